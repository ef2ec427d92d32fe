#include "kernels/attention/attention_latent.hpp"
#include "kernels/attention/attention_latent_mma.hpp"
#include "kernels/attention/attention_rows.cuh"
#include "kernels/attention/kv_element.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMergeThreads = 128;
constexpr int kMergeWarps = kMergeThreads / 32;  // merge_weights' scratch
constexpr int kHeads = kLatentHeadsPerBlock;
constexpr int kTargetBlocks = 1024;  // as the split kernel: about eight per SM of an H100
constexpr int kMaxSplits = 256;
constexpr int kMinSplitKeys = 32;
constexpr uint64_t kSharedLimit = 48 * 1024;  // without cudaFuncSetAttribute
// Keys whose value loads a thread issues together: 4 keep the kernel at 64 registers (4 blocks of 256 threads per
// SM, set by __launch_bounds__); 8 spilled there.
constexpr int kValueKeys = 4;

// Shared memory: q_s[heads][hd], scores then probabilities p[heads][chunk_capacity], visible[chunk_capacity].
//   1. each warp scores rows j0 + warp, j0 + warp + 8, ...: the lanes split the row, one sum per query head.
//   2. warp g (and g + 8) takes the max and the sum of exp for head g over the split.
//   3. each thread takes dims d, d + 256, ...: for every visible row of the split (read again, coalesced across the
//      threads, kValueKeys rows' loads at a time) it adds p[g] * row[d] for every head g; invisible slots (they may
//      hold NaN) are skipped.
template <class T>
__global__ void __launch_bounds__(kThreads, 4) attention_latent_kernel(
    const float* __restrict__ q, const int32_t* __restrict__ q_pos, const T* __restrict__ k,
    const int32_t* __restrict__ key_pos, const int32_t* __restrict__ key_count, AttentionShape s, int splits,
    int chunk_capacity, float* __restrict__ ws_max, float* __restrict__ ws_sum, float* __restrict__ ws_out) {
  extern __shared__ float smem[];
  allow_next_grid();
  wait_for_previous_grid();  // q and the cache are earlier kernels' (programmatic_launch.cuh)
  const LatentBlock at = latent_block(s, key_count, splits, kHeads);
  if (at.n == 0) return;  // the merge reads only the splits that hold keys
  const int split = at.split, first_head = at.first_head, heads = at.heads, n = at.n;
  const int64_t t = at.t, j0 = at.j0;
  const KvPages pages = at.pages;
  const int hd = s.head_dim;

  float* q_s = smem;                     // [heads][hd]
  float* p = q_s + heads * hd;           // [heads][chunk_capacity]
  unsigned char* visible = reinterpret_cast<unsigned char*>(p + heads * chunk_capacity);  // [chunk_capacity]
  __shared__ float head_max[kHeads], head_sum[kHeads];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const KvReader<T> kr = kv_reader(k, hd);
  const float* qt = q + (t * s.heads + first_head) * hd;
  for (int i = threadIdx.x; i < heads * hd; i += kThreads) q_s[i] = qt[i];
  const int64_t qp = q_pos[t];
  __syncthreads();

  // 1. scores
  for (int c = warp; c < n; c += kWarps) {
    const int64_t row = kv_row(pages, j0 + c);
    const int64_t dist = qp - static_cast<int64_t>(key_pos[row]);
    const bool seen = dist >= 0 && (s.sliding_window <= 0 || dist < s.sliding_window);
    const KvHead<T> kj = kr.head(row, 0);
    float dot[kHeads];
#pragma unroll
    for (int g = 0; g < kHeads; ++g) dot[g] = 0.0f;
    for (int d = lane; d < hd; d += 32) {
      const float kd = kj.at(d);
#pragma unroll
      for (int g = 0; g < kHeads; ++g)
        if (g < heads) dot[g] += q_s[g * hd + d] * kd;
    }
#pragma unroll
    for (int g = 0; g < kHeads; ++g) {
      if (g >= heads) break;
      const float score = soft_capped(warp_sum(dot[g]) * s.scale, s.softcap);
      if (lane == 0) p[g * chunk_capacity + c] = seen ? score : -INFINITY;
    }
    if (lane == 0) visible[c] = seen;
  }
  __syncthreads();

  // 2. per-head max and sum over the split
  split_softmax<kWarps>(p, n, chunk_capacity, heads, head_max, head_sum);
  __syncthreads();

  // 3. the rows again, as values, kValueKeys keys at a time with their loads issued together (a thread that loaded
  // one key and used it before the next waited a full round trip per key: 128 in a row for a 128-key split, now 32).
  // The sums run over the keys in order, as before.
  const int64_t slot = (t * s.heads + first_head) * splits + split;  // (row, head, split) of head g: + g * splits
  for (int d = threadIdx.x; d < hd; d += kThreads) {
    float acc[kHeads];
#pragma unroll
    for (int g = 0; g < kHeads; ++g) acc[g] = 0.0f;
    for (int c0 = 0; c0 < n; c0 += kValueKeys) {
      float v[kValueKeys];
#pragma unroll
      for (int u = 0; u < kValueKeys; ++u) {
        const int c = c0 + u;
        v[u] = c < n && visible[c] ? kr.head(kv_row(pages, j0 + c), 0).at(d) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kValueKeys; ++u) {
        const int c = c0 + u;
        if (c >= n) break;
        if (!visible[c]) continue;
#pragma unroll
        for (int g = 0; g < kHeads; ++g)
          if (g < heads) acc[g] += p[g * chunk_capacity + c] * v[u];
      }
    }
#pragma unroll
    for (int g = 0; g < kHeads; ++g)
      if (g < heads) ws_out[(slot + static_cast<int64_t>(g) * splits) * hd + d] = acc[g];
  }
  if (static_cast<int>(threadIdx.x) < heads) {
    ws_max[slot + static_cast<int64_t>(threadIdx.x) * splits] = head_max[threadIdx.x];
    ws_sum[slot + static_cast<int64_t>(threadIdx.x) * splits] = head_sum[threadIdx.x];
  }
}

// One block per (query row, head): out = sum_b o_b * exp(m_b - M) / sum_b l_b * exp(m_b - M) over the splits that
// held keys (a sink logit joins the denominator); zeros when no key was visible. The splits' weights are kept in
// shared memory; each thread adds them up for its dims in split order.
__global__ void __launch_bounds__(kMergeThreads) attention_latent_merge_kernel(
    const int32_t* __restrict__ key_count, AttentionShape s, int splits, const float* __restrict__ ws_max,
    const float* __restrict__ ws_sum, const float* __restrict__ ws_out, float* __restrict__ out) {
  extern __shared__ float weight[];  // [splits]
  __shared__ float warp_top[kMergeWarps], warp_denom[kMergeWarps];
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t item = blockIdx.x;  // t * heads + h
  const int hd = s.head_dim;
  const int64_t keys = clamp_keys(row_key_count(key_count, s, item / s.heads), s.capacity);
  const int64_t chunk = split_chunk(keys, splits);
  const int used = static_cast<int>((keys + chunk - 1) / chunk);
  const float sink = s.sinks != nullptr ? s.sinks[item % s.heads] : -INFINITY;
  merge_weights<kMergeThreads>(ws_max + item * splits, ws_sum + item * splits, used, sink, weight, warp_top,
                               warp_denom);
  const float* partial = ws_out + item * splits * hd;
  for (int d = threadIdx.x; d < hd; d += kMergeThreads) {
    float total = 0.0f;
    for (int b = 0; b < used; ++b)
      if (weight[b] != 0.0f) total += partial[static_cast<int64_t>(b) * hd + d] * weight[b];
    out[item * hd + d] = total;
  }
}

}  // namespace

AttentionLatentPlan plan_attention_latent(const AttentionShape& s) {
  AttentionLatentPlan plan;
  if (s.tokens <= 0 || s.tokens > 65535 || s.capacity <= 0 || s.heads <= 0 || s.kv_heads != 1 || s.head_dim <= 0)
    return plan;
  const int per_block = s.heads < kHeads ? s.heads : kHeads;
  const int64_t head_blocks = (s.heads + kHeads - 1) / kHeads;
  const uint64_t fixed = static_cast<uint64_t>(per_block) * s.head_dim * sizeof(float);
  if (fixed >= kSharedLimit || head_blocks > 65535) return plan;
  const int64_t max_chunk = static_cast<int64_t>((kSharedLimit - fixed) / (per_block * sizeof(float) + 1)) / 32 * 32;
  if (max_chunk < 32) return plan;
  int64_t splits = kTargetBlocks / (s.tokens * head_blocks);
  splits = splits < 1 ? 1 : (splits > kMaxSplits ? kMaxSplits : splits);
  const int64_t useful = (s.capacity + kMinSplitKeys - 1) / kMinSplitKeys;
  if (splits > useful) splits = useful;
  const int64_t needed = (s.capacity + max_chunk - 1) / max_chunk;
  if (needed > splits) splits = needed;
  if (splits > 65535 || static_cast<uint64_t>(splits) * sizeof(float) > kSharedLimit) return plan;
  const int64_t per = (s.capacity + splits - 1) / splits;
  const int64_t chunk_capacity = per < 32 ? 32 : (per + 31) / 32 * 32;
  plan.splits = static_cast<int>(splits);
  plan.head_blocks = static_cast<int>(head_blocks);
  plan.chunk_capacity = static_cast<int>(chunk_capacity);
  plan.shared_bytes = fixed + static_cast<uint64_t>(per_block) * chunk_capacity * sizeof(float) + chunk_capacity;
  const uint64_t partials = static_cast<uint64_t>(s.tokens) * s.heads * splits;
  plan.workspace_bytes = partials * (2 + static_cast<uint64_t>(s.head_dim)) * sizeof(float);
  return plan;
}

Status attention_latent(const float* q, const int32_t* q_pos, const void* k, const int32_t* key_pos,
                        const int32_t* key_count, const AttentionShape& s, const AttentionLatentPlan& plan,
                        float* workspace, float* out, cudaStream_t stream, uint64_t shared_optin) {
  if (plan.splits <= 0 || workspace == nullptr)
    return invalid_argument("attention_latent: no plan or workspace for this shape");
  const uint64_t partials = static_cast<uint64_t>(s.tokens) * s.heads * plan.splits;
  float* ws_max = workspace;
  float* ws_sum = ws_max + partials;
  float* ws_out = ws_sum + partials;
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(s.tokens),
                  static_cast<unsigned>(plan.head_blocks));
  if (shared_optin > 0 && attention_latent_mma_applies(s, k, shared_optin)) {
    QRT_TRY(attention_latent_mma_partials(q, q_pos, k, key_pos, key_count, s, plan, ws_max, ws_sum, ws_out, stream));
  } else {
    QRT_TRY(with_kv_element(s.kv_type, [&](auto element) {
      using T = decltype(element);
      return launch_programmatic("attention_latent_kernel", attention_latent_kernel<T>, grid, kThreads,
                                 plan.shared_bytes, stream, q, q_pos, static_cast<const T*>(k), key_pos, key_count, s,
                                 plan.splits, plan.chunk_capacity, ws_max, ws_sum, ws_out);
    }));
  }
  const size_t merge_shared = static_cast<size_t>(plan.splits) * sizeof(float);
  return launch_programmatic("attention_latent_merge_kernel", attention_latent_merge_kernel,
                             static_cast<unsigned>(s.tokens * s.heads), kMergeThreads, merge_shared, stream, key_count,
                             s, plan.splits, ws_max, ws_sum, ws_out, out);
}

}  // namespace qrt::kernels
