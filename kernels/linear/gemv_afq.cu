// Fast decode GEMV for MLX affine AFQ2, AFQ3, AFQ4, AFQ5, AFQ6 and AFQ8: the staged kernel (gemv_staged.cuh) with
// the lane policy of gemv_lanes_afq_mx.hpp. The scale dtype (F16, BF16, F32) becomes a template parameter here and
// nowhere else. Bytes each must move and the expected bound are stated there and in bench/NOTES-gemv.md.
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/gemv_lanes_afq_mx.hpp"
#include "kernels/linear/gemv_staged.cuh"

namespace qrt::kernels {
namespace {

using quant::ScalarType;

template <quant::FormatId Id, ScalarType S>
using AfqPolicy = typename gemv_lanes::LanePolicy<Id, S>::type;

template <quant::FormatId Id>
bool afq_applies(const quant::QuantView& w, const float* x) {
  const int g = w.params.group_size;
  if (g != 32 && g != 64 && g != 128) return false;
  if (w.cols % g != 0 || w.scales == nullptr || w.biases == nullptr) return false;
  const ScalarType st = w.params.scale_type;
  if (st != ScalarType::kF16 && st != ScalarType::kBF16 && st != ScalarType::kF32) return false;
  const uintptr_t scale_align = st == ScalarType::kF32 ? 4 : 2;
  if (!gemv_staged::aligned_to(w.scales, scale_align) || !gemv_staged::aligned_to(w.biases, scale_align))
    return false;
  // The policy's layout checks do not depend on the scale dtype.
  return gemv_staged::staged_applies<AfqPolicy<Id, ScalarType::kF16>>(w, x);
}

template <quant::FormatId Id>
Status afq_launch(const char* name, const quant::QuantView& w, const float* x, int m, float* y,
                  cudaStream_t stream) {
  switch (w.params.scale_type) {
    case ScalarType::kF16:
      return gemv_staged::launch_staged<AfqPolicy<Id, ScalarType::kF16>>(name, w, x, m, y, stream);
    case ScalarType::kBF16:
      return gemv_staged::launch_staged<AfqPolicy<Id, ScalarType::kBF16>>(name, w, x, m, y, stream);
    case ScalarType::kF32:
      return gemv_staged::launch_staged<AfqPolicy<Id, ScalarType::kF32>>(name, w, x, m, y, stream);
    default:
      return invalid_argument(std::string(name) + ": scale dtype must be F16, BF16 or F32, found " +
                              std::string(quant::scalar_type_name(w.params.scale_type)));
  }
}

}  // namespace

bool FastGemv<quant::FormatId::kAFQ2>::applies(const quant::QuantView& w, const float* x) {
  return afq_applies<quant::FormatId::kAFQ2>(w, x);
}
Status FastGemv<quant::FormatId::kAFQ2>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                cudaStream_t stream) {
  return afq_launch<quant::FormatId::kAFQ2>(kName.data(), w, x, m, y, stream);
}

bool FastGemv<quant::FormatId::kAFQ3>::applies(const quant::QuantView& w, const float* x) {
  return afq_applies<quant::FormatId::kAFQ3>(w, x);
}
Status FastGemv<quant::FormatId::kAFQ3>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                cudaStream_t stream) {
  return afq_launch<quant::FormatId::kAFQ3>(kName.data(), w, x, m, y, stream);
}

bool FastGemv<quant::FormatId::kAFQ4>::applies(const quant::QuantView& w, const float* x) {
  return afq_applies<quant::FormatId::kAFQ4>(w, x);
}
Status FastGemv<quant::FormatId::kAFQ4>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                cudaStream_t stream) {
  return afq_launch<quant::FormatId::kAFQ4>(kName.data(), w, x, m, y, stream);
}

bool FastGemv<quant::FormatId::kAFQ5>::applies(const quant::QuantView& w, const float* x) {
  return afq_applies<quant::FormatId::kAFQ5>(w, x);
}
Status FastGemv<quant::FormatId::kAFQ5>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                cudaStream_t stream) {
  return afq_launch<quant::FormatId::kAFQ5>(kName.data(), w, x, m, y, stream);
}

bool FastGemv<quant::FormatId::kAFQ6>::applies(const quant::QuantView& w, const float* x) {
  return afq_applies<quant::FormatId::kAFQ6>(w, x);
}
Status FastGemv<quant::FormatId::kAFQ6>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                cudaStream_t stream) {
  return afq_launch<quant::FormatId::kAFQ6>(kName.data(), w, x, m, y, stream);
}

bool FastGemv<quant::FormatId::kAFQ8>::applies(const quant::QuantView& w, const float* x) {
  return afq_applies<quant::FormatId::kAFQ8>(w, x);
}
Status FastGemv<quant::FormatId::kAFQ8>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                cudaStream_t stream) {
  return afq_launch<quant::FormatId::kAFQ8>(kName.data(), w, x, m, y, stream);
}

}  // namespace qrt::kernels
