// Small device helpers shared by the op kernels: warp and block reductions and grid sizing. Included only by .cu
// files. Every kernel using the block reductions must be launched with a multiple of 32 threads (at most 1024).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qrt::kernels {

constexpr unsigned kFullWarpMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(kFullWarpMask, v, offset));
  return v;
}

__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

__device__ __forceinline__ double warp_max(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmax(v, __shfl_xor_sync(kFullWarpMask, v, offset));
  return v;
}

// Sum over the whole block; every thread gets the result. `scratch` holds 32 floats of shared memory and may be
// reused after the call returns (the final __syncthreads protects it).
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = (blockDim.x + 31) / 32;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  if (warp == 0) {
    total = lane < warps ? scratch[lane] : 0.0f;
    total = warp_sum(total);
    if (lane == 0) scratch[0] = total;
  }
  __syncthreads();
  total = scratch[0];
  __syncthreads();
  return total;
}

// Blocks for a grid-stride loop over n items: enough to fill the device, never more than the items need.
inline unsigned grid_for(int64_t n, int threads, int64_t max_blocks = int64_t{1} << 20) {
  int64_t blocks = (n + threads - 1) / threads;
  if (blocks > max_blocks) blocks = max_blocks;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks);
}

}  // namespace qrt::kernels
