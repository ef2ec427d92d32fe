#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/sampling/argmax.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kNone = -1;

// (v, i) beats (best_v, best_i): any number beats "none yet"; then larger value, then lower index. NaN never
// beats anything.
__device__ __forceinline__ bool beats(float v, int64_t i, float best_v, int64_t best_i) {
  if (isnan(v) || i == kNone) return false;
  if (best_i == kNone) return true;
  return v > best_v || (v == best_v && i < best_i);
}

// One block per row: each thread scans a strided share of the row, then a shuffle and a shared-memory round
// reduce the (value, index) pairs.
__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ logits, int64_t rows,
                                                          int64_t cols, int32_t* __restrict__ ids) {
  __shared__ float warp_v[kThreads / 32];
  __shared__ int64_t warp_i[kThreads / 32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * cols;
    float best_v = 0.0f;
    int64_t best_i = kNone;
    for (int64_t i = threadIdx.x; i < cols; i += kThreads) {
      const float v = row[i];
      if (beats(v, i, best_v, best_i)) {
        best_v = v;
        best_i = i;
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float ov = __shfl_xor_sync(kFullWarpMask, best_v, offset);
      const int64_t oi = __shfl_xor_sync(kFullWarpMask, best_i, offset);
      if (beats(ov, oi, best_v, best_i)) {
        best_v = ov;
        best_i = oi;
      }
    }
    if (lane == 0) {
      warp_v[warp] = best_v;
      warp_i[warp] = best_i;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kThreads / 32; ++w)
        if (beats(warp_v[w], warp_i[w], best_v, best_i)) {
          best_v = warp_v[w];
          best_i = warp_i[w];
        }
      ids[r] = static_cast<int32_t>(best_i == kNone ? 0 : best_i);
    }
    __syncthreads();  // warp_v / warp_i are rewritten for the next row
  }
}

}  // namespace

Status argmax_rows(const float* logits, int64_t rows, int64_t cols, int32_t* ids, cudaStream_t stream) {
  if (rows < 0 || cols <= 0 || cols > 2147483647LL)
    return invalid_argument("argmax_rows: shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
                            "] needs rows >= 0 and 0 < cols < 2^31");
  if (rows == 0) return ok_status();
  const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
  argmax_kernel<<<blocks, kThreads, 0, stream>>>(logits, rows, cols, ids);
  return cuda_launch_status("argmax_kernel");
}

}  // namespace qrt::kernels
