// Device sampling, following sample_with_uniform (kernels/cpu/sampler.cpp) step by step:
//  1. penalties: the row is copied to scratch and each (token, count) pair changes one logit, with the CPU's
//     float operations written as explicitly rounded intrinsics (no contraction into an FMA).
//  2. temperature 0: argmax_rows (first maximum, NaN never wins), then a NaN in slot 0 gives 0, as
//     std::max_element does on the CPU.
//  3. the candidates in the CPU's order: logit descending, ties to the lower id, -0 and +0 one value (they compare
//     equal on the CPU), NaN never a candidate. Every logit maps to a 32-bit key that sorts ascending in that
//     order (NaN gets the largest key), and the id breaks ties, so no step relies on a stable sort.
//     - 0 < top_k <= kTopKMax (the usual case): one block per row selects the k smallest keys by radix select
//       and sorts just those in shared memory (sample_top_k_kernel);
//     - top_k 0 or larger: one cub::DeviceRadixSort over 64-bit keys (row | logit key | id) sorts every row.
//  4. per row, one block: probabilities exp((logit - top) / T) in double for the candidates, their sum (a
//     fixed-order tree), the division; then one thread runs the top-p prefix, the min-p prefix, the mass and the
//     draw r = u01 * mass sequentially in candidate order, exactly as the CPU does (finish_row).
// Where the result can differ from the CPU: the device exp (at most 1 ulp from the correctly rounded value) and
// the sum's order (a tree here, left to right on the CPU) change the normalized probabilities by a few ulps. The
// draw compares r = u01 * mass with cumulative sums that are all scaled by the same 1 / sum (so the sum's error
// cancels there), and a few-ulp change in a probability moves a cumulative boundary by ~1e-16 relative: the ids
// differ only when r or top_p lies within ~1e-15 of a boundary, for random u01 a probability of that order.
// Cost: top-k reads each row five times (four radix digits and the gather); the whole-row path sorts every row
// and then scans the kept candidates on one thread, which is slow only for flat distributions over a large
// vocabulary with top_p 1 and min_p 0.
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

// The CPU's chain after the sort, for one row by one block: candidate i (0 <= i < keep, best first) is token
// id_at(i); q: [keep] double scratch (global or shared). All threads call it; thread 0 writes ids[r].
template <int Threads, class IdAt>
__device__ void finish_row(const float* __restrict__ row, IdAt id_at, int64_t keep, const SampleSettings& s,
                           double u01, double* q, double* warp_partials, int32_t* id_out) {
  if (keep == 0) {  // a row of NaN
    if (threadIdx.x == 0) *id_out = 0;
    return;
  }
  const double inv_t = 1.0 / static_cast<double>(s.temperature);
  const double top = row[id_at(0)];
  double part = 0.0;
  for (int64_t i = threadIdx.x; i < keep; i += Threads) {
    const double p = exp((static_cast<double>(row[id_at(i)]) - top) * inv_t);
    q[i] = p;
    part += p;
  }
  // The sum as a fixed-order tree (warps, then the warp partials in order).
  part = warp_sum(part);
  if (threadIdx.x % 32 == 0) warp_partials[threadIdx.x / 32] = part;
  __syncthreads();
  double sum = 0.0;
  for (int w = 0; w < Threads / 32; ++w) sum += warp_partials[w];
  for (int64_t i = threadIdx.x; i < keep; i += Threads) q[i] = q[i] / sum;
  __syncthreads();
  if (threadIdx.x != 0) return;
  int64_t n = keep;
  if (s.top_p < 1.0f) {  // the shortest prefix whose mass reaches top_p
    double cum = 0.0;
    int64_t m = 0;
    while (m < n) {
      cum += q[m++];
      if (cum >= static_cast<double>(s.top_p)) break;
    }
    n = m;
  }
  if (s.min_p > 0.0f) {  // relative to the most likely candidate
    const double floor = static_cast<double>(s.min_p) * q[0];
    int64_t m = 1;
    while (m < n && q[m] >= floor) ++m;
    n = m;
  }
  double mass = 0.0;
  for (int64_t i = 0; i < n; ++i) mass += q[i];
  const double x = u01 * mass;
  double cum = 0.0;
  int32_t id = id_at(n - 1);
  for (int64_t i = 0; i < n; ++i) {
    cum += q[i];
    if (x < cum) {
      id = id_at(i);
      break;
    }
  }
  *id_out = id;
}

// One block per row over the row's sorted keys (the whole-row path: top_k 0 or above kTopKMax).
__global__ void __launch_bounds__(kThreads)
    sample_sorted_kernel(const float* __restrict__ logits, const uint64_t* __restrict__ sorted, int64_t vocab,
                         int id_bits, SampleSettings s, const double* __restrict__ u01, double* __restrict__ probs,
                         int32_t* __restrict__ ids) {
  __shared__ double warp_partials[kThreads / 32];
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
  finish_row<kThreads>(logits + r * vocab, id_at, shared_keep, s, u01[r], probs + r * vocab, warp_partials,
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
  __shared__ double warp_partials[kTopKThreads / 32];
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
  finish_row<kTopKThreads>(row, id_at, count, s, u01[r], q, warp_partials, ids + r);
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
