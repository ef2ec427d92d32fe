// Fast decode GEMV for E4M3 weights with a per-tensor scale (fp8) or a scale per 128×128 tile (fp8_block, F32,
// F16 or BF16 scales): the staged kernel (gemv_staged.cuh) with the lane policies of gemv_lanes_fp8.hpp, where the
// bytes they move and the expected bound are stated.
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/gemv_lanes_fp8.hpp"
#include "kernels/linear/gemv_staged.cuh"

namespace qrt::kernels {
namespace {
using quant::ScalarType;

template <ScalarType S>
using BlockPolicy = typename gemv_lanes::LanePolicy<quant::FormatId::kFP8_BLOCK, S>::type;
using TensorPolicy = gemv_lanes::LanePolicy<quant::FormatId::kFP8, ScalarType::kF32>::type;
}  // namespace

bool FastGemv<quant::FormatId::kFP8>::applies(const quant::QuantView& w, const float* x) {
  return gemv_staged::staged_applies<TensorPolicy>(w, x);
}
Status FastGemv<quant::FormatId::kFP8>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                               cudaStream_t stream) {
  return gemv_staged::launch_staged<TensorPolicy>(kName.data(), w, x, m, y, stream);
}

bool FastGemv<quant::FormatId::kFP8_BLOCK>::applies(const quant::QuantView& w, const float* x) {
  const ScalarType st = w.params.scale_type;
  if (w.scales == nullptr || (st != ScalarType::kF16 && st != ScalarType::kBF16 && st != ScalarType::kF32))
    return false;
  if (!gemv_staged::aligned_to(w.scales, static_cast<uintptr_t>(quant::float_scale_bytes(st)))) return false;
  return gemv_staged::staged_applies<BlockPolicy<ScalarType::kF32>>(w, x);  // the layout checks ignore the dtype
}
Status FastGemv<quant::FormatId::kFP8_BLOCK>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                     cudaStream_t stream) {
  const char* name = kName.data();
  switch (w.params.scale_type) {
    case ScalarType::kF16: return gemv_staged::launch_staged<BlockPolicy<ScalarType::kF16>>(name, w, x, m, y, stream);
    case ScalarType::kBF16: return gemv_staged::launch_staged<BlockPolicy<ScalarType::kBF16>>(name, w, x, m, y, stream);
    case ScalarType::kF32: return gemv_staged::launch_staged<BlockPolicy<ScalarType::kF32>>(name, w, x, m, y, stream);
    default:
      return invalid_argument("gemv_fp8_block: scale dtype must be F16, BF16 or F32, found " +
                              std::string(quant::scalar_type_name(w.params.scale_type)));
  }
}

}  // namespace qrt::kernels
