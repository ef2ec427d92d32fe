// The staged experts' kernel (expert_gemv_staged.cuh) for AFQ2, AFQ3, AFQ5 and AFQ6, the MLX affine widths that have
// no integer-dot kernel (AFQ4 and AFQ8 take expert_gemv_dp4a), with each scale dtype a policy of its own.
#include "kernels/linear/gemv_lanes_afq_mx.hpp"
#include "kernels/moe/expert_gemv_staged.cuh"

namespace qrt::kernels::staged_experts {
namespace {

using quant::FormatId;
using quant::ScalarType;

template <FormatId Id, ScalarType S>
using Policy = typename gemv_lanes::LanePolicy<Id, S>::type;

template <FormatId Id>
bool applies_to(const quant::QuantView& w, const quant::PartSizes& per_expert, const float* x) {
  const int g = w.params.group_size;
  const ScalarType st = w.params.scale_type;
  if ((g != 32 && g != 64 && g != 128) || w.cols % g != 0 || w.scales == nullptr || w.biases == nullptr) return false;
  if (st != ScalarType::kF16 && st != ScalarType::kBF16 && st != ScalarType::kF32) return false;
  // The layout checks do not depend on the scale dtype.
  return applies<Policy<Id, ScalarType::kF16>>(w, per_expert, x, quant::float_scale_bytes(st));
}

template <FormatId Id>
Status launch_for(const Launch& l) {
  switch (l.expert0.params.scale_type) {
    case ScalarType::kF16: return launch<Policy<Id, ScalarType::kF16>>(l);
    case ScalarType::kBF16: return launch<Policy<Id, ScalarType::kBF16>>(l);
    default: return launch<Policy<Id, ScalarType::kF32>>(l);  // afq_applies admitted F16, BF16 and F32 only
  }
}

}  // namespace

std::optional<bool> afq_applies(FormatId format, const quant::QuantView& expert0, const quant::PartSizes& per_expert,
                                const float* x) {
  switch (format) {
    case FormatId::kAFQ2: return applies_to<FormatId::kAFQ2>(expert0, per_expert, x);
    case FormatId::kAFQ3: return applies_to<FormatId::kAFQ3>(expert0, per_expert, x);
    case FormatId::kAFQ5: return applies_to<FormatId::kAFQ5>(expert0, per_expert, x);
    case FormatId::kAFQ6: return applies_to<FormatId::kAFQ6>(expert0, per_expert, x);
    default: return std::nullopt;
  }
}

std::optional<Status> afq_launch(FormatId format, const Launch& l) {
  switch (format) {
    case FormatId::kAFQ2: return launch_for<FormatId::kAFQ2>(l);
    case FormatId::kAFQ3: return launch_for<FormatId::kAFQ3>(l);
    case FormatId::kAFQ5: return launch_for<FormatId::kAFQ5>(l);
    case FormatId::kAFQ6: return launch_for<FormatId::kAFQ6>(l);
    default: return std::nullopt;
  }
}

}  // namespace qrt::kernels::staged_experts
