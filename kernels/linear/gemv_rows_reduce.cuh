// The end of the row-per-block decode GEMVs (gemv_dp4a.cu, gemv_dense.cu): every thread of a block holds partial
// sums acc[r][i] for the block's R rows and M batch rows; a warp shuffle, then one pass over the warps' partials in
// shared memory, and y[i, row0 + r] is written for the rows that exist. `partial` is the kernel's
// __shared__ float[Threads / 32][R * M].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernel_utils.cuh"

namespace qrt::kernels {

template <int Threads, int R, int M>
__device__ __forceinline__ void store_row_sums(float (&acc)[R][M], float (*partial)[R * M], int64_t row0,
                                               int64_t rows, float* y) {
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const float v = warp_sum(acc[r][i]);
      if (lane == 0) partial[warp][r * M + i] = v;
    }
  __syncthreads();
  if (threadIdx.x < R * M) {
    const int r = static_cast<int>(threadIdx.x) / M, i = static_cast<int>(threadIdx.x) % M;
    if (row0 + r < rows) {
      float s = partial[0][threadIdx.x];
#pragma unroll
      for (int w = 1; w < Threads / 32; ++w) s += partial[w][threadIdx.x];
      y[i * rows + row0 + r] = s;
    }
  }
}

}  // namespace qrt::kernels
