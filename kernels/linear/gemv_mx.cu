// Fast decode GEMV for OCP MXFP4 (E2M1 codes, E8M0 scale per 32 columns): the staged kernel (gemv_staged.cuh)
// with the lane policy of gemv_lanes_afq_mx.hpp. Bytes it must move and the expected bound are stated there and in
// bench/NOTES-gemv.md.
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/gemv_lanes_afq_mx.hpp"
#include "kernels/linear/gemv_staged.cuh"

namespace qrt::kernels {
namespace {
using Policy = gemv_lanes::LanePolicy<quant::FormatId::kMXFP4, quant::ScalarType::kF32>::type;
}  // namespace

bool FastGemv<quant::FormatId::kMXFP4>::applies(const quant::QuantView& w, const float* x) {
  if (w.scales == nullptr) return false;
  return gemv_staged::staged_applies<Policy>(w, x);
}

Status FastGemv<quant::FormatId::kMXFP4>::launch(const quant::QuantView& w, const float* x, int m, float* y,
                                                 cudaStream_t stream) {
  return gemv_staged::launch_staged<Policy>(kName.data(), w, x, m, y, stream);
}

}  // namespace qrt::kernels
