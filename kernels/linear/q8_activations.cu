#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/linear/q8_activations.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ int warp_sum_int(int v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

// One warp per 32-column block, lane j holding x[j]; the expressions are q8_activations.hpp's, so the result equals
// quantize_q8_block bit for bit.
__global__ void __launch_bounds__(kThreads) quantize_q8_kernel(const float* __restrict__ x, int64_t blocks,
                                                               int8_t* __restrict__ codes, float* __restrict__ scales) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kThreads / 32);
  for (int64_t b = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32; b < blocks; b += warps) {
    const float v = x[b * kQ8BlockCols + lane];
    const bool finite = __all_sync(kFullWarpMask, isfinite(v));
    const float amax = warp_max(fabsf(v));
    const float d_hi = q8_hi_scale(amax, finite);
    const float d_lo = q8_lo_scale(d_hi);
    const int hi = q8_code(v, d_hi);
    const int lo = q8_code(q8_residual(v, d_hi, hi), d_lo);
    int8_t* c = codes + b * kQ8BlockCodeBytes;
    c[lane] = static_cast<int8_t>(hi);
    c[kQ8BlockCols + lane] = static_cast<int8_t>(lo);
    const int sum_hi = warp_sum_int(hi);
    const int sum_lo = warp_sum_int(lo);
    if (lane == 0) {
      float* s = scales + b * kQ8BlockScaleFloats;
      s[0] = d_hi;
      s[1] = d_lo;
      s[2] = q8_block_sum(d_hi, d_lo, sum_hi, sum_lo);
      s[3] = 0.0f;
    }
  }
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
  quantize_q8_kernel<<<grid_for(blocks * 32, kThreads), kThreads, 0, stream>>>(x, blocks, out.codes, out.scales);
  return cuda_launch_status("quantize_q8_kernel");
}

}  // namespace qrt::kernels
