// Fast decode GEMV for OCP MXFP4 (E2M1 codes, E8M0 scale per 32 columns), NVFP4 (E2M1 codes, E4M3 scale per 16
// columns and a tensor scale) and OCP MXFP8 (E4M3 codes, E8M0 scale per 32 columns): the staged kernel
// (gemv_staged.cuh) with the lane policies of gemv_lanes_afq_mx.hpp and gemv_lanes_fp8.hpp. Bytes they must move
// and the expected bounds are stated there and in bench/NOTES-gemv.md.
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/gemv_lanes_afq_mx.hpp"
#include "kernels/linear/gemv_lanes_fp8.hpp"
#include "kernels/linear/gemv_staged.cuh"

namespace qrt::kernels {
namespace {
template <quant::FormatId Id>
using Policy = typename gemv_lanes::LanePolicy<Id, quant::ScalarType::kF32>::type;

// The three share their requirements: a byte scale array and the staged kernel's layout checks.
template <quant::FormatId Id>
bool microscaled_applies(const quant::QuantView& w, const float* x) {
  return w.scales != nullptr && gemv_staged::staged_applies<Policy<Id>>(w, x);
}
}  // namespace

bool FastGemv<quant::FormatId::kMXFP4>::applies(const quant::QuantView& w, const float* x) {
  return microscaled_applies<quant::FormatId::kMXFP4>(w, x);
}
Status FastGemv<quant::FormatId::kMXFP4>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                 cudaStream_t stream) {
  return gemv_staged::launch_staged<Policy<quant::FormatId::kMXFP4>>(kName.data(), w, x, m, y, stream);
}

bool FastGemv<quant::FormatId::kNVFP4>::applies(const quant::QuantView& w, const float* x) {
  return microscaled_applies<quant::FormatId::kNVFP4>(w, x);
}
Status FastGemv<quant::FormatId::kNVFP4>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                 cudaStream_t stream) {
  return gemv_staged::launch_staged<Policy<quant::FormatId::kNVFP4>>(kName.data(), w, x, m, y, stream);
}

bool FastGemv<quant::FormatId::kMXFP8>::applies(const quant::QuantView& w, const float* x) {
  return microscaled_applies<quant::FormatId::kMXFP8>(w, x);
}
Status FastGemv<quant::FormatId::kMXFP8>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                 cudaStream_t stream) {
  return gemv_staged::launch_staged<Policy<quant::FormatId::kMXFP8>>(kName.data(), w, x, m, y, stream);
}

}  // namespace qrt::kernels
