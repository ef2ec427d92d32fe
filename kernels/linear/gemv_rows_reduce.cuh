// The end of the row-per-block decode GEMVs (gemv_dp4a.cu, gemv_dense.cu): every thread of a block holds partial
// sums acc[r][i] for its group's R rows and M batch rows; a warp shuffle, then one pass over the group's warps'
// partials in shared memory, and y[i, row0 + r] is written for the rows that exist. A group is `lanes` consecutive
// threads (a multiple of 32; the whole block by default), row0 the calling thread's group's first row. `partial` is
// the kernel's __shared__ float[Threads / 32][R * M].
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/kernel_utils.cuh"

namespace qrt::kernels {

// A row group's threads for rows of `items` work items in blocks of `threads`: the fewest warps (32, 64, ... up to
// the block) that give each item a thread, so that narrow rows leave no thread of the block idle.
inline int row_group_lanes(int64_t items, int threads) {
  int lanes = 32;
  while (lanes < items && lanes < threads) lanes *= 2;
  return lanes;
}

template <int Threads, int R, int M>
__device__ __forceinline__ void store_row_sums(float (&acc)[R][M], float (*partial)[R * M], int64_t row0,
                                               int64_t rows, float* y, int lanes = Threads) {
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const float v = warp_sum(acc[r][i]);
      if (lane == 0) partial[warp][r * M + i] = v;
    }
  __syncthreads();
  const int t = static_cast<int>(threadIdx.x) % lanes;
  const int first_warp = static_cast<int>(threadIdx.x) / lanes * (lanes / 32);
  if (t < R * M) {
    const int r = t / M, i = t % M;
    if (row0 + r < rows) {
      float s = partial[first_warp][t];  // the group's warps in order
      for (int w = 1; w < lanes / 32; ++w) s += partial[first_warp + w][t];
      y[i * rows + row0 + r] = s;
    }
  }
}

}  // namespace qrt::kernels
