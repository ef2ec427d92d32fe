// One 32-column block of x quantized by a warp, lane j holding x[j], into the layout of q8_activations.hpp (codes
// [64] = 32 q_hi then 32 q_lo, scales [4]). Shared by the quantize kernel and the kernels that produce GEMV inputs
// (rms_norm, silu_mul), so that a fused producer writes the same bytes as quantize_q8_activations. Every lane of
// the warp must call it (shuffles and a vote over the full warp).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/linear/q8_activations.hpp"

namespace qrt::kernels {

// The sum of v over the lane's half of the warp (lanes 0..15 or 16..31).
__device__ __forceinline__ int q8_half_warp_sum_int(int v) {
#pragma unroll
  for (int offset = 8; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

__device__ __forceinline__ void quantize_q8_warp(float v, int lane, int8_t* codes, float* scales) {
  const bool finite = __all_sync(kFullWarpMask, isfinite(v));
  const float amax = warp_max(fabsf(v));
  const float d_hi = q8_hi_scale(amax, finite);
  const float d_lo = q8_lo_scale(d_hi);
  const int hi = q8_code(v, d_hi);
  const int lo = q8_code(q8_residual(v, d_hi, hi), d_lo);
  codes[lane] = static_cast<int8_t>(hi);
  codes[kQ8BlockCols + lane] = static_cast<int8_t>(lo);
  // Each half's sums first (lanes 0..15 and 16..31), then the whole block's: integer sums, exact in any order.
  const int half_hi = q8_half_warp_sum_int(hi), half_lo = q8_half_warp_sum_int(lo);
  const int sum_hi = half_hi + __shfl_xor_sync(kFullWarpMask, half_hi, 16);
  const int sum_lo = half_lo + __shfl_xor_sync(kFullWarpMask, half_lo, 16);
  if (lane == 0) {
    scales[0] = d_hi;
    scales[1] = d_lo;
    scales[2] = q8_block_sum(d_hi, d_lo, sum_hi, sum_lo);
    scales[3] = q8_block_sum(d_hi, d_lo, half_hi, half_lo);
  }
}

}  // namespace qrt::kernels
