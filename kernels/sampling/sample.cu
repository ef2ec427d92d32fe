// Device sampling, following sample_with_uniform (kernels/cpu/sampler.cpp) step by step:
//  1. penalties: the row is copied to scratch and each (token, count) pair changes one logit, with the CPU's
//     float operations written as explicitly rounded intrinsics (no contraction into an FMA).
//  2. temperature 0: argmax_rows_split (first maximum, NaN never wins, except that a NaN in slot 0 gives 0, as
//     std::max_element does on the CPU).
//  3. the candidates in the CPU's order: logit descending, ties to the lower id, -0 and +0 one value (they compare
//     equal on the CPU), NaN never a candidate. Every logit maps to a 32-bit key that sorts ascending in that
//     order (NaN gets the largest key), and the id breaks ties, so no step relies on a stable sort.
//     - 0 < top_k <= kTopKMax (the usual case): one block per row selects the k smallest keys by radix select
//       and sorts just those in shared memory (sample_top_k_kernel);
//     - top_k 0 or larger: one cub::DeviceRadixSort over 64-bit keys (row | logit key | id) sorts every row.
//  4. per row, one block: probabilities exp((logit - top) / T) in double for the candidates, their sum (a
//     fixed-order tree), the division; then the top-p prefix (a block-wide scan), the min-p prefix (a binary
//     search: sorted probabilities never increase), the mass (a tree) and the draw r = u01 * mass (a scan), the
//     CPU's steps in the CPU's candidate order (finish_row).
// Where the result can differ from the CPU: the device exp (at most 1 ulp from the correctly rounded value) and
// the order of the sums (trees and scans here, left to right on the CPU) change the probabilities and their
// cumulative sums by a few ulps, which moves a boundary by ~1e-16 relative: the ids differ only when r or top_p
// lies within ~1e-15 of a boundary, for random u01 a probability of that order.
// Cost: top-k reads each row five times (four radix digits and the gather); the whole-row path sorts every row,
// then scans the kept candidates 256 at a time (a flat distribution over 128k tokens with top_p 1: 500 steps).
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/sampling/argmax.hpp"
#include "kernels/sampling/sample.hpp"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kTopKMax = 1024;     // top_k up to this selects before sorting (sample_top_k_kernel)
constexpr int kTopKThreads = 1024;
constexpr uint64_t kAlign = 256;
constexpr uint32_t kNanKey = 0xffffffffu;  // larger than the key of any number

uint64_t align_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

int bits_for(int64_t n) {  // bits needed to hold 0 .. n - 1
  int b = 0;
  while ((int64_t{1} << b) < n) ++b;
  return b;
}

// Where each piece of the workspace lives.
struct Layout {
  uint64_t penalized = 0;  // float [rows * vocab]
  uint64_t keys_in = 0;    // uint64 [rows * vocab]
  uint64_t keys_out = 0;   // uint64 [rows * vocab]
  uint64_t probs = 0;      // double [rows * vocab]
  uint64_t cub = 0;        // cub temp storage
  uint64_t cub_bytes = 0;
  uint64_t argmax = 0;  // argmax_rows_split's workspace
  uint64_t total = 0;
  int id_bits = 0;
  int end_bit = 0;
};

Status check_shape(int64_t rows, int64_t vocab) {
  if (rows < 0 || vocab <= 0 || vocab > 2147483647LL || (rows > 0 && rows > (int64_t{2147483647} / vocab)))
    return invalid_argument("sample_rows: shape [" + std::to_string(rows) + ", " + std::to_string(vocab) +
                            "] needs rows >= 0, vocab > 0 and rows * vocab < 2^31");
  return ok_status();
}

Result<Layout> make_layout(int64_t rows, int64_t vocab) {
  QRT_TRY(check_shape(rows, vocab));
  Layout l;
  const uint64_t n = static_cast<uint64_t>(rows * vocab);
  l.id_bits = bits_for(vocab);
  l.end_bit = bits_for(rows) + 32 + l.id_bits;  // <= 64 since rows * vocab < 2^31
  uint64_t at = 0;
  l.penalized = at;
  at += align_up(n * sizeof(float));
  l.keys_in = at;
  at += align_up(n * sizeof(uint64_t));
  l.keys_out = at;
  at += align_up(n * sizeof(uint64_t));
  l.probs = at;
  at += align_up(n * sizeof(double));
  size_t cub_bytes = 0;
  QRT_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, cub_bytes, static_cast<const uint64_t*>(nullptr),
                                              static_cast<uint64_t*>(nullptr), static_cast<int>(n), 0, l.end_bit));
  l.cub = at;
  l.cub_bytes = cub_bytes;
  at += align_up(cub_bytes > 0 ? cub_bytes : 1);
  l.argmax = at;
  at += align_up(argmax_split_workspace_bytes(rows));
  l.total = at;
  return l;
}

// One block per row: the row's (token, count) pairs with the CPU's float formula, rounded step by step.
__global__ void penalize_kernel(float* __restrict__ logits, int64_t vocab, const int32_t* __restrict__ offsets,
                                const int32_t* __restrict__ pairs, float repetition, float presence,
                                float frequency) {
  const int64_t r = blockIdx.x;
  float* row = logits + r * vocab;
  for (int32_t i = offsets[r] + static_cast<int32_t>(threadIdx.x); i < offsets[r + 1]; i += blockDim.x) {
    const int32_t token = pairs[2 * i];
    const int32_t count = pairs[2 * i + 1];
    float l = row[token];
    l = l > 0.0f ? __fdiv_rn(l, repetition) : __fmul_rn(l, repetition);
    l = __fsub_rn(l, __fadd_rn(presence, __fmul_rn(frequency, static_cast<float>(count))));
    row[token] = l;
  }
}

// std::max_element returns slot 0 when it holds NaN (NaN < x and x < NaN are both false).
__global__ void greedy_nan_fixup_kernel(const float* __restrict__ logits, int64_t rows, int64_t vocab,
                                        int32_t* __restrict__ ids) {
  const int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (r < rows && isnan(logits[r * vocab])) ids[r] = 0;
}

// Ascending order of the key = descending logit; -0 and +0 share a key; NaN gets kNanKey.
__device__ __forceinline__ uint32_t descending_key(float v) {
  if (isnan(v)) return kNanKey;
  uint32_t u = __float_as_uint(v);
  if (u == 0x80000000u) u = 0;
  const uint32_t ordered = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // ascending with the value
  return ~ordered;
}

__global__ void build_keys_kernel(const float* __restrict__ logits, int64_t rows, int64_t vocab, int id_bits,
                                  uint64_t* __restrict__ keys) {
  const int64_t n = rows * vocab;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t row = static_cast<uint64_t>(i / vocab);
    const uint64_t id = static_cast<uint64_t>(i % vocab);
    keys[i] = (row << (32 + id_bits)) | (uint64_t{descending_key(logits[i])} << id_bits) | id;
  }
}

// Sum of q[0 .. n) over the block as a fixed-order tree (each thread a strided share, warps, then the warp
// partials in order); every thread gets it. scratch: [Threads / 32] shared.
template <int Threads>
__device__ double block_sum(const double* q, int64_t n, double* scratch) {
  double part = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += Threads) part += q[i];
  part = warp_sum(part);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = part;
  __syncthreads();
  double sum = 0.0;
  for (int w = 0; w < Threads / 32; ++w) sum += scratch[w];
  __syncthreads();  // scratch is reused by the caller
  return sum;
}

// The first index i of q[0 .. n) whose inclusive prefix sum q[0] + ... + q[i] satisfies reached(), or n when none
// does: a block-wide scan, Threads elements at a time with the running total carried, stopping at the first
// chunk with a hit. Every thread gets the result. scratch: [2 * Threads / 32] shared.
template <int Threads, class Reached>
__device__ int64_t first_prefix_reaching(const double* q, int64_t n, Reached reached, double* scratch) {
  constexpr int kWarpsPerBlock = Threads / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double carry = 0.0;
  for (int64_t base = 0; base < n; base += Threads) {
    const int64_t i = base + threadIdx.x;
    double v = i < n ? q[i] : 0.0;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const double t = __shfl_up_sync(kFullWarpMask, v, offset);
      if (lane >= offset) v += t;
    }
    if (lane == 31) scratch[warp] = v;
    __syncthreads();
    double before = carry, total = carry;
    for (int w = 0; w < kWarpsPerBlock; ++w) {
      before += w < warp ? scratch[w] : 0.0;
      total += scratch[w];
    }
    const unsigned hits = __ballot_sync(kFullWarpMask, i < n && reached(before + v));
    if (lane == 0) scratch[kWarpsPerBlock + warp] = hits != 0 ? static_cast<double>(base + warp * 32 + __ffs(hits) - 1)
                                                              : -1.0;
    __syncthreads();
    int64_t first = -1;
    for (int w = 0; w < kWarpsPerBlock && first < 0; ++w)
      if (scratch[kWarpsPerBlock + w] >= 0.0) first = static_cast<int64_t>(scratch[kWarpsPerBlock + w]);
    __syncthreads();  // scratch is rewritten by the next chunk
    if (first >= 0) return first;
    carry = total;
  }
  return n;
}

// The CPU's chain after the sort, for one row by one block: candidate i (0 <= i < keep, best first) is token
// id_at(i); q: [keep] double scratch (global or shared). All threads call it; thread 0 writes ids[r]. The prefix
// searches (top-p, the draw) are block-wide scans and the min-p cut a binary search (the probabilities of sorted
// candidates never increase), so no thread walks the candidates alone. scratch: [2 * Threads / 32] shared.
template <int Threads, class IdAt>
__device__ void finish_row(const float* __restrict__ row, IdAt id_at, int64_t keep, const SampleSettings& s,
                           double u01, double* q, double* scratch, int32_t* id_out) {
  if (keep == 0) {  // a row of NaN
    if (threadIdx.x == 0) *id_out = 0;
    return;
  }
  const double inv_t = 1.0 / static_cast<double>(s.temperature);
  const double top = row[id_at(0)];
  for (int64_t i = threadIdx.x; i < keep; i += Threads) q[i] = exp((static_cast<double>(row[id_at(i)]) - top) * inv_t);
  __syncthreads();
  const double sum = block_sum<Threads>(q, keep, scratch);
  for (int64_t i = threadIdx.x; i < keep; i += Threads) q[i] = q[i] / sum;
  __syncthreads();
  int64_t n = keep;
  if (s.top_p < 1.0f) {  // the shortest prefix whose mass reaches top_p
    const double top_p = static_cast<double>(s.top_p);
    const int64_t last = first_prefix_reaching<Threads>(q, n, [&](double cum) { return cum >= top_p; }, scratch);
    n = last < n ? last + 1 : n;
  }
  if (s.min_p > 0.0f) {  // relative to the most likely candidate: the first m >= 1 with q[m] < floor
    const double floor = static_cast<double>(s.min_p) * q[0];
    int64_t lo = 1, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (q[mid] >= floor) lo = mid + 1; else hi = mid;
    }
    n = lo;
  }
  const double x = u01 * block_sum<Threads>(q, n, scratch);
  const int64_t chosen = first_prefix_reaching<Threads>(q, n, [&](double cum) { return x < cum; }, scratch);
  if (threadIdx.x == 0) *id_out = id_at(chosen < n ? chosen : n - 1);
}

// One block per row over the row's sorted keys (the whole-row path: top_k 0 or above kTopKMax).
__global__ void __launch_bounds__(kThreads)
    sample_sorted_kernel(const float* __restrict__ logits, const uint64_t* __restrict__ sorted, int64_t vocab,
                         int id_bits, SampleSettings s, const double* __restrict__ u01, double* __restrict__ probs,
                         int32_t* __restrict__ ids) {
  __shared__ double block_scratch[2 * kThreads / 32];
  __shared__ int64_t shared_keep;
  const int64_t r = blockIdx.x;
  const uint64_t* keys = sorted + r * vocab;
  const uint64_t id_mask = (uint64_t{1} << id_bits) - 1;
  auto id_at = [&](int64_t i) { return static_cast<int32_t>(keys[i] & id_mask); };
  // The cast drops the row bits above the logit key.
  auto logit_key_at = [&](int64_t i) { return static_cast<uint32_t>(keys[i] >> id_bits); };
  if (threadIdx.x == 0) {
    // NaN keys sort last: the candidates are the prefix before the first of them.
    int64_t lo = 0, hi = vocab;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (logit_key_at(mid) == kNanKey) hi = mid; else lo = mid + 1;
    }
    shared_keep = (s.top_k > 0 && s.top_k < lo) ? s.top_k : lo;
  }
  __syncthreads();
  finish_row<kThreads>(logits + r * vocab, id_at, shared_keep, s, u01[r], probs + r * vocab, block_scratch,
                       ids + r);
}

// Exclusive prefix count of `flag` over the block in thread order; `total` gets the block's count. Every thread
// of the block calls it. counts: [kTopKThreads / 32] shared.
__device__ __forceinline__ int block_exclusive_count(bool flag, int* counts, int& total) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned ballot = __ballot_sync(kFullWarpMask, flag);
  if (lane == 0) counts[warp] = __popc(ballot);
  __syncthreads();
  int before = 0;
  total = 0;
  for (int w = 0; w < kTopKThreads / 32; ++w) {
    before += w < warp ? counts[w] : 0;
    total += counts[w];
  }
  __syncthreads();  // counts is rewritten by the next call
  return before + __popc(ballot & ((1u << lane) - 1u));
}

// The top-k path (0 < k <= kTopKMax), one block of kTopKThreads per row, without sorting the row:
//  1. radix select (four 8-bit digits) finds T, the k-th smallest descending key of the row (NaN included), and
//     how many of the k have a key equal to T;
//  2. the candidates (keys below T, then the lowest ids with key T; never NaN) are gathered in index order;
//  3. a bitonic sort of at most kTopKMax (key, id) pairs in shared memory orders them as the CPU's partial_sort.
__global__ void __launch_bounds__(kTopKThreads)
    sample_top_k_kernel(const float* __restrict__ logits, int64_t vocab, SampleSettings s,
                        const double* __restrict__ u01, int32_t* __restrict__ ids) {
  __shared__ unsigned histogram[256];
  __shared__ uint64_t picked[kTopKMax];  // (descending key << 32) | id
  __shared__ double q[kTopKMax];
  __shared__ double block_scratch[2 * kTopKThreads / 32];
  __shared__ int counts[kTopKThreads / 32];
  __shared__ uint32_t shared_prefix;
  __shared__ int64_t shared_remaining;
  const int64_t r = blockIdx.x;
  const float* row = logits + r * vocab;
  const int64_t k = s.top_k < vocab ? s.top_k : vocab;

  // 1. Radix select, most significant digit first.
  uint32_t prefix = 0, prefix_mask = 0;
  int64_t remaining = k;  // rank (1-based) of T among the keys matching the prefix so far
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = threadIdx.x; b < 256; b += kTopKThreads) histogram[b] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < vocab; i += kTopKThreads) {
      const uint32_t key = descending_key(row[i]);
      if ((key & prefix_mask) == prefix) atomicAdd(&histogram[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int64_t below = 0;
      int digit = 255;
      for (int b = 0; b < 256; ++b) {
        if (below + histogram[b] >= remaining) {
          digit = b;
          break;
        }
        below += histogram[b];
      }
      shared_prefix = prefix | (static_cast<uint32_t>(digit) << shift);
      shared_remaining = remaining - below;
    }
    __syncthreads();
    prefix = shared_prefix;
    remaining = shared_remaining;
    prefix_mask |= 255u << shift;
    __syncthreads();  // shared_prefix is rewritten in the next round
  }
  const uint32_t threshold = prefix;
  const int64_t take_equal = threshold == kNanKey ? 0 : remaining;  // NaN is never a candidate

  // 2. Gather in index order, so that the ties at the threshold taken are the lowest ids.
  int64_t equal_taken = 0, count = 0;
  for (int64_t base = 0; base < vocab; base += kTopKThreads) {
    const int64_t i = base + threadIdx.x;
    const uint32_t key = i < vocab ? descending_key(row[i]) : kNanKey;
    int equal_total = 0, picked_total = 0;
    const bool equal = i < vocab && key == threshold && key != kNanKey;
    const int equal_rank = block_exclusive_count(equal, counts, equal_total);
    const bool pick = (key < threshold) || (equal && equal_taken + equal_rank < take_equal);
    const int slot = block_exclusive_count(pick, counts, picked_total);
    if (pick) picked[count + slot] = (uint64_t{key} << 32) | static_cast<uint64_t>(i);
    equal_taken += equal_total;
    count += picked_total;
  }
  // 3. Bitonic sort of kTopKMax slots, the unused ones padded with the largest key.
  for (int i = threadIdx.x; i < kTopKMax; i += kTopKThreads)
    if (i >= count) picked[i] = ~uint64_t{0};
  for (int size = 2; size <= kTopKMax; size <<= 1) {
    for (int stride = size / 2; stride > 0; stride >>= 1) {
      __syncthreads();
      for (int i = threadIdx.x; i < kTopKMax; i += kTopKThreads) {
        const int j = i ^ stride;
        if (j > i) {
          const bool ascending = (i & size) == 0;
          const uint64_t a = picked[i], b = picked[j];
          if ((a > b) == ascending) {
            picked[i] = b;
            picked[j] = a;
          }
        }
      }
    }
  }
  __syncthreads();
  auto id_at = [&](int64_t i) { return static_cast<int32_t>(picked[i] & 0xffffffffu); };
  finish_row<kTopKThreads>(row, id_at, count, s, u01[r], q, block_scratch, ids + r);
}

}  // namespace

Result<uint64_t> sample_rows_workspace_bytes(int64_t rows, int64_t vocab) {
  QRT_ASSIGN_OR_RETURN(Layout l, make_layout(rows, vocab));
  return l.total;
}

Status sample_rows(const SampleRowsArgs& a, void* workspace, uint64_t workspace_bytes, cudaStream_t stream) {
  QRT_ASSIGN_OR_RETURN(Layout l, make_layout(a.rows, a.vocab));
  if (workspace_bytes < l.total)
    return invalid_argument("sample_rows: workspace of " + std::to_string(workspace_bytes) + " bytes, needs " +
                            std::to_string(l.total));
  const SampleSettings& s = a.settings;
  if (!(s.temperature >= 0.0f) || s.top_k < 0)
    return invalid_argument("sample_rows: temperature must be >= 0 and top_k >= 0");
  if (a.rows == 0) return ok_status();
  uint8_t* base = static_cast<uint8_t*>(workspace);
  const unsigned rows = static_cast<unsigned>(a.rows);
  const int64_t n = a.rows * a.vocab;

  const float* src = a.logits;
  if (a.penalty_offsets != nullptr) {
    float* penalized = reinterpret_cast<float*>(base + l.penalized);
    QRT_CUDA_TRY(cudaMemcpyAsync(penalized, a.logits, static_cast<size_t>(n) * sizeof(float),
                                 cudaMemcpyDeviceToDevice, stream));
    penalize_kernel<<<rows, 128, 0, stream>>>(penalized, a.vocab, a.penalty_offsets, a.penalty_pairs,
                                              s.repetition_penalty, s.presence_penalty, s.frequency_penalty);
    QRT_TRY(cuda_launch_status("penalize_kernel"));
    src = penalized;
  }

  if (s.temperature == 0.0f) {
    if (a.rows <= 65535) return argmax_rows_split(src, a.rows, a.vocab, a.ids, base + l.argmax, stream, true);
    QRT_TRY(argmax_rows(src, a.rows, a.vocab, a.ids, stream));
    greedy_nan_fixup_kernel<<<grid_for(a.rows, kThreads), kThreads, 0, stream>>>(src, a.rows, a.vocab, a.ids);
    return cuda_launch_status("greedy_nan_fixup_kernel");
  }

  if (s.top_k > 0 && s.top_k <= kTopKMax) {
    sample_top_k_kernel<<<rows, kTopKThreads, 0, stream>>>(src, a.vocab, s, a.u01, a.ids);
    return cuda_launch_status("sample_top_k_kernel");
  }
  uint64_t* keys_in = reinterpret_cast<uint64_t*>(base + l.keys_in);
  uint64_t* keys_out = reinterpret_cast<uint64_t*>(base + l.keys_out);
  build_keys_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(src, a.rows, a.vocab, l.id_bits, keys_in);
  QRT_TRY(cuda_launch_status("build_keys_kernel"));
  size_t cub_bytes = l.cub_bytes;
  QRT_CUDA_TRY(cub::DeviceRadixSort::SortKeys(base + l.cub, cub_bytes, keys_in, keys_out, static_cast<int>(n), 0,
                                              l.end_bit, stream));
  sample_sorted_kernel<<<rows, kThreads, 0, stream>>>(src, keys_out, a.vocab, l.id_bits, s, a.u01,
                                                      reinterpret_cast<double*>(base + l.probs), a.ids);
  return cuda_launch_status("sample_sorted_kernel");
}

}  // namespace qrt::kernels
