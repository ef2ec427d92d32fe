#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/linear/q8_activations.hpp"
#include "kernels/linear/q8_warp.cuh"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;

// One warp per 32-column block, lane j holding x[j] (quantize_q8_warp: q8_activations.hpp's expressions, so the
// result equals quantize_q8_block bit for bit).
__global__ void __launch_bounds__(kThreads) quantize_q8_kernel(const float* __restrict__ x, int64_t blocks,
                                                               int8_t* __restrict__ codes, float* __restrict__ scales) {
  allow_next_grid();
  wait_for_previous_grid();  // x comes from the kernel before (programmatic_launch.cuh)
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32; b < blocks; b += warps)
    quantize_q8_warp(x[b * kQ8BlockCols + lane], lane, codes + b * kQ8BlockCodeBytes,
                     scales + b * kQ8BlockScaleFloats);
}

}  // namespace

Status quantize_q8_activations(const float* x, int64_t m, int64_t cols, Q8Activations out, cudaStream_t stream) {
  if (m < 0 || cols <= 0 || cols % kQ8BlockCols != 0)
    return invalid_argument("quantize_q8_activations: shape [" + std::to_string(m) + ", " + std::to_string(cols) +
                            "] needs a positive column count that is a multiple of 32");
  if (x == nullptr || out.codes == nullptr || out.scales == nullptr)
    return invalid_argument("quantize_q8_activations: null pointer");
  const int64_t blocks = m * (cols / kQ8BlockCols);
  if (blocks == 0) return ok_status();
  return launch_programmatic("quantize_q8_kernel", quantize_q8_kernel, grid_for(blocks * 32, kThreads), kThreads, 0,
                             stream, x, blocks, out.codes, out.scales);
}

}  // namespace qrt::kernels
