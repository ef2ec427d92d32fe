// The staged experts' kernel (expert_gemv_staged.cuh) for the floating-point formats: OCP MXFP4 (gpt-oss's experts
// as its checkpoints and UQFF store them), NVFP4, MXFP8, FP8 per tensor, block FP8 (Qwen3-MoE FP8 checkpoints; each
// scale dtype a policy) and unquantized F32, F16 and BF16.
#include "kernels/linear/gemv_lanes_afq_mx.hpp"
#include "kernels/linear/gemv_lanes_dense.hpp"
#include "kernels/linear/gemv_lanes_fp8.hpp"
#include "kernels/moe/expert_gemv_staged.cuh"

namespace qrt::kernels::staged_experts {
namespace {

using quant::FormatId;
using quant::ScalarType;

template <FormatId Id, ScalarType S = ScalarType::kF32>
using Policy = typename gemv_lanes::LanePolicy<Id, S>::type;

bool float_scales(ScalarType st) { return st == ScalarType::kF16 || st == ScalarType::kBF16 || st == ScalarType::kF32; }

}  // namespace

std::optional<bool> float_applies(FormatId format, const quant::QuantView& w, const quant::PartSizes& per_expert,
                                  const float* x) {
  switch (format) {
    case FormatId::kMXFP4: return w.scales != nullptr && applies<Policy<FormatId::kMXFP4>>(w, per_expert, x, 1);
    case FormatId::kNVFP4: return w.scales != nullptr && applies<Policy<FormatId::kNVFP4>>(w, per_expert, x, 1);
    case FormatId::kMXFP8: return w.scales != nullptr && applies<Policy<FormatId::kMXFP8>>(w, per_expert, x, 1);
    case FormatId::kFP8: return applies<Policy<FormatId::kFP8>>(w, per_expert, x, 0);
    case FormatId::kFP8_BLOCK:
      return w.scales != nullptr && float_scales(w.params.scale_type) &&
             applies<Policy<FormatId::kFP8_BLOCK>>(w, per_expert, x, quant::float_scale_bytes(w.params.scale_type));
    case FormatId::kF32: return applies<Policy<FormatId::kF32>>(w, per_expert, x, 0);
    case FormatId::kF16: return applies<Policy<FormatId::kF16>>(w, per_expert, x, 0);
    case FormatId::kBF16: return applies<Policy<FormatId::kBF16>>(w, per_expert, x, 0);
    default: return std::nullopt;
  }
}

std::optional<Status> float_launch(FormatId format, const Launch& l) {
  switch (format) {
    case FormatId::kMXFP4: return launch<Policy<FormatId::kMXFP4>>(l);
    case FormatId::kNVFP4: return launch<Policy<FormatId::kNVFP4>>(l);
    case FormatId::kMXFP8: return launch<Policy<FormatId::kMXFP8>>(l);
    case FormatId::kFP8: return launch<Policy<FormatId::kFP8>>(l);
    case FormatId::kFP8_BLOCK:
      switch (l.expert0.params.scale_type) {
        case ScalarType::kF16: return launch<Policy<FormatId::kFP8_BLOCK, ScalarType::kF16>>(l);
        case ScalarType::kBF16: return launch<Policy<FormatId::kFP8_BLOCK, ScalarType::kBF16>>(l);
        default: return launch<Policy<FormatId::kFP8_BLOCK, ScalarType::kF32>>(l);  // float_applies checked
      }
    case FormatId::kF32: return launch<Policy<FormatId::kF32>>(l);
    case FormatId::kF16: return launch<Policy<FormatId::kF16>>(l);
    case FormatId::kBF16: return launch<Policy<FormatId::kBF16>>(l);
    default: return std::nullopt;
  }
}

}  // namespace qrt::kernels::staged_experts
