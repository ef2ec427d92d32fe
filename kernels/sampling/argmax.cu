#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/sampling/argmax.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kUnroll = 4;
constexpr int kNone = -1;

// (v, i) beats (best_v, best_i): any number beats "none yet"; then larger value, then lower index. NaN never
// beats anything.
__device__ __forceinline__ bool beats(float v, int i, float best_v, int best_i) {
  if (isnan(v) || i == kNone) return false;
  if (best_i == kNone) return true;
  return v > best_v || (v == best_v && i < best_i);
}

// The best (value, index) pair of the warp, in every lane.
__device__ __forceinline__ void warp_best(float& best_v, int& best_i) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(kFullWarpMask, best_v, offset);
    const int oi = __shfl_xor_sync(kFullWarpMask, best_i, offset);
    if (beats(ov, oi, best_v, best_i)) {
      best_v = ov;
      best_i = oi;
    }
  }
}

// One block of 1024 threads per row: each thread scans a strided share of the row, kUnroll loads in flight before
// it compares them (in increasing index order, so the lowest index keeps winning ties), then shuffles and one
// warp reduce the (value, index) pairs. One block per row is enough for decode (a row of 128256 logits is 0.5 MB):
// the 256-thread version with one load in flight per thread spent 71 µs of an H100 on it, a block that keeps
// enough loads in flight is bound by one SM's share of the bandwidth instead.
__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ logits, int64_t rows,
                                                          int64_t cols, int32_t* __restrict__ ids) {
  __shared__ float warp_v[kThreads / 32];
  __shared__ int warp_i[kThreads / 32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int n = static_cast<int>(cols);  // argmax_rows checked cols < 2^31
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * cols;
    float best_v = 0.0f;
    int best_i = kNone;
    for (int i0 = threadIdx.x; i0 < n; i0 += kUnroll * kThreads) {
      float v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * kThreads;
        v[u] = i < n ? row[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * kThreads;
        if (i < n && beats(v[u], i, best_v, best_i)) {
          best_v = v[u];
          best_i = i;
        }
      }
    }
    warp_best(best_v, best_i);
    if (lane == 0) {
      warp_v[warp] = best_v;
      warp_i[warp] = best_i;
    }
    __syncthreads();
    if (warp == 0) {
      best_v = warp_v[lane];  // kThreads / 32 == 32 warps: one pair per lane
      best_i = warp_i[lane];
      warp_best(best_v, best_i);
      if (lane == 0) ids[r] = best_i == kNone ? 0 : best_i;
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
