#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/sampling/argmax.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 1024;
constexpr int kSplitThreads = 256;
constexpr int kUnroll = 4;
constexpr int kNone = -1;

Status check_argmax_shape(int64_t rows, int64_t cols) {
  if (rows < 0 || cols <= 0 || cols > 2147483647LL)
    return invalid_argument("argmax_rows: shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
                            "] needs rows >= 0 and 0 < cols < 2^31");
  return ok_status();
}

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

// The best (value, index) of indices [begin, end) of `row` over the whole block, in every thread: each thread scans
// a strided share with kUnroll loads in flight before it compares them (in increasing index order, so the lowest
// index keeps winning ties), then the warps' winners meet in shared memory. warp_v / warp_i: kThreads / 32 each.
__device__ __forceinline__ void block_best(const float* __restrict__ row, int begin, int end, float* warp_v,
                                           int* warp_i, float& best_v, int& best_i) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  best_v = 0.0f;
  best_i = kNone;
  for (int i0 = begin + static_cast<int>(threadIdx.x); i0 < end; i0 += kUnroll * static_cast<int>(blockDim.x)) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = i0 + u * static_cast<int>(blockDim.x);
      v[u] = i < end ? row[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int i = i0 + u * static_cast<int>(blockDim.x);
      if (i < end && beats(v[u], i, best_v, best_i)) {
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
  best_v = lane < warps ? warp_v[lane] : 0.0f;
  best_i = lane < warps ? warp_i[lane] : kNone;
  warp_best(best_v, best_i);
  __syncthreads();  // warp_v / warp_i may be rewritten after the return
}

// One block of 1024 threads per row. One block per row is enough for many rows; for a few (decode) the split
// version below reads a row with many blocks (the 256-thread version with one load in flight per thread spent
// 71 µs of an H100 on a 128256-entry row, this one 34 µs: one SM's share of the bandwidth).
__global__ void __launch_bounds__(kThreads) argmax_kernel(const float* __restrict__ logits, int64_t rows,
                                                          int64_t cols, int32_t* __restrict__ ids) {
  __shared__ float warp_v[kThreads / 32];
  __shared__ int warp_i[kThreads / 32];
  const int n = static_cast<int>(cols);  // argmax_rows checked cols < 2^31
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float best_v;
    int best_i;
    block_best(logits + r * cols, 0, n, warp_v, warp_i, best_v, best_i);
    if (threadIdx.x == 0) ids[r] = best_i == kNone ? 0 : best_i;
  }
}

// Split version, first kernel: block (chunk, row) writes the winner of its slice of the row (kNone when the slice
// holds only NaN).
__global__ void __launch_bounds__(kSplitThreads) argmax_chunk_kernel(const float* __restrict__ logits, int64_t cols,
                                                                     int chunk, float* __restrict__ chunk_v,
                                                                     int* __restrict__ chunk_i) {
  __shared__ float warp_v[kSplitThreads / 32];
  __shared__ int warp_i[kSplitThreads / 32];
  const int64_t r = blockIdx.y;
  const int begin = static_cast<int>(blockIdx.x) * chunk;
  const int end = min(begin + chunk, static_cast<int>(cols));
  float best_v;
  int best_i;
  block_best(logits + r * cols, begin, end, warp_v, warp_i, best_v, best_i);
  if (threadIdx.x == 0) {
    chunk_v[r * gridDim.x + blockIdx.x] = best_v;
    chunk_i[r * gridDim.x + blockIdx.x] = best_i;
  }
}

// Second kernel: one warp per row over its chunks' winners, in chunk order (ties keep the lower index).
__global__ void argmax_merge_kernel(const float* __restrict__ chunk_v, const int* __restrict__ chunk_i, int chunks,
                                    const float* __restrict__ logits, int64_t cols, bool nan_in_slot_0_wins,
                                    int32_t* __restrict__ ids) {
  const int64_t r = blockIdx.x;
  float best_v = 0.0f;
  int best_i = kNone;
  for (int c = static_cast<int>(threadIdx.x); c < chunks; c += 32) {
    const float v = chunk_v[r * chunks + c];
    const int i = chunk_i[r * chunks + c];
    if (beats(v, i, best_v, best_i)) {
      best_v = v;
      best_i = i;
    }
  }
  warp_best(best_v, best_i);
  if (threadIdx.x == 0) ids[r] = best_i == kNone || (nan_in_slot_0_wins && isnan(logits[r * cols])) ? 0 : best_i;
}

}  // namespace

Status argmax_rows(const float* logits, int64_t rows, int64_t cols, int32_t* ids, cudaStream_t stream) {
  QRT_TRY(check_argmax_shape(rows, cols));
  if (rows == 0) return ok_status();
  const unsigned blocks = static_cast<unsigned>(rows < (int64_t{1} << 20) ? rows : (int64_t{1} << 20));
  argmax_kernel<<<blocks, kThreads, 0, stream>>>(logits, rows, cols, ids);
  return cuda_launch_status("argmax_kernel");
}

uint64_t argmax_split_workspace_bytes(int64_t rows) {
  return rows <= 0 ? 0 : static_cast<uint64_t>(rows) * kArgmaxMaxChunks * (sizeof(float) + sizeof(int));
}

Status argmax_rows_split(const float* logits, int64_t rows, int64_t cols, int32_t* ids, void* workspace,
                         cudaStream_t stream, bool nan_in_slot_0_wins) {
  QRT_TRY(check_argmax_shape(rows, cols));
  if (rows == 0) return ok_status();
  if (workspace == nullptr || rows > 65535)
    return invalid_argument("argmax_rows_split: needs a workspace and at most 65535 rows (got " +
                            std::to_string(rows) + ")");
  // Slices of at least kSplitThreads * kUnroll entries (one pass of the block), at most kArgmaxMaxChunks per row.
  const int64_t min_chunk = int64_t{kSplitThreads} * kUnroll;
  int64_t chunks = (cols + min_chunk - 1) / min_chunk;
  if (chunks > kArgmaxMaxChunks) chunks = kArgmaxMaxChunks;
  const int chunk = static_cast<int>((cols + chunks - 1) / chunks);
  chunks = (cols + chunk - 1) / chunk;
  float* chunk_v = static_cast<float*>(workspace);
  int* chunk_i = reinterpret_cast<int*>(chunk_v + rows * chunks);
  argmax_chunk_kernel<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(rows)), kSplitThreads, 0,
                        stream>>>(logits, cols, chunk, chunk_v, chunk_i);
  QRT_TRY(cuda_launch_status("argmax_chunk_kernel"));
  argmax_merge_kernel<<<static_cast<unsigned>(rows), 32, 0, stream>>>(chunk_v, chunk_i, static_cast<int>(chunks),
                                                                      logits, cols, nan_in_slot_0_wins, ids);
  return cuda_launch_status("argmax_merge_kernel");
}

}  // namespace qrt::kernels
