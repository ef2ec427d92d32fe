#include "kernels/attention/attention_split.hpp"

#include <type_traits>

#include "kernels/attention/attention_rows.cuh"
#include "kernels/attention/kv_element.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/linear/q8_warp.cuh"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
// Blocks for about eight per SM of a large GPU (132 on an H100) whatever the key count: at long contexts each
// block's serial memory round trips (one per kKeysAtOnce keys of each warp) set the pace, so more, shorter splits
// keep more loads in flight (with 256 blocks, an H100's context sweep put decode attention at 16k keys near a tenth
// of its bandwidth). A split holds at least 32 keys, so short caches get fewer.
constexpr int kTargetBlocks = 1024;
constexpr int kMaxSplits = 256;
constexpr int kMinSplitKeys = 32;
constexpr uint64_t kSharedLimit = 48 * 1024;  // without cudaFuncSetAttribute
// Keys whose K (or V) loads a warp (thread) issues together: each is one 4-element load per lane (KvQuad), so eight
// keys take fewer registers and load instructions than four did when a lane read its dims one element at a time, and
// a split's keys half the serial memory round trips (those round trips, not bytes, set a block's pace at long
// contexts). Groups above 4 query heads
// and the f32 and q8_0 caches (twice the raw registers per row) keep 4 keys: no registers are left for more at 8
// blocks per SM. Head dimensions up to 32 · kMaxDimsPerLane, a multiple of 4.
template <class T>
__host__ __device__ constexpr bool wide_kv_rows() {
  return std::is_same_v<T, float> || std::is_same_v<T, KvQ8_0>;
}
template <int kGroup, class T>
__host__ __device__ constexpr int keys_at_once() {
  return kGroup <= 4 && !wide_kv_rows<T>() ? 8 : 4;
}
constexpr int kMaxDimsPerLane = 8;
constexpr int kQuad = 4;  // elements per KvQuad
// The value pass: each thread sums kQuad consecutive dims over its share of the keys; the shares are added in shared
// memory for kReduceHeads query heads at a time.
constexpr int kReduceHeads = 4;
constexpr uint64_t kReduceBytes = uint64_t{kReduceHeads} * kThreads * kQuad * sizeof(float);

// Blocks of the split kernel an SM must hold, as register bounds for ptxas (65536 / (128 · blocks) registers): the
// plan's kTargetBlocks are about 8 per SM of an H100, and left to itself ptxas gave the common case (GQA group 4,
// head_dim 128, a 16-bit cache) 72 registers, 7 blocks, so the last blocks ran as a second wave. With 16-bit and fp8
// caches ptxas meets 8 blocks without spills (12 bytes for a group of 1), 6 for head dims above 128 (two pieces per
// lane), 4 for groups above 8 (4 accumulators per query head). f32 and q8_0 rows spilled under such bounds for groups
// of 8 and head dims above 128: ptxas chooses for those, as before.
template <int kGroup, int kQuads, class T>
constexpr int split_blocks_per_sm() {
  if constexpr (kGroup > 8) return 4;
  if constexpr (wide_kv_rows<T>() && (kQuads == 2 || kGroup == 8)) return 1;
  return kQuads == 2 ? 6 : 8;
}

// Shared memory: q_s[group][hd], scores then probabilities p[group][chunk_capacity], visible[chunk_capacity], the
// value pass's sums [kReduceHeads][key groups][hd] (kReduceBytes).
//   1. each warp scores kKeysAtOnce keys at a time (warp w: keys j0 + w kKeysAtOnce ..): lane l holds dims
//      4l .. 4l + 3 (and 128 + 4l .. for kQuads 2) of each K row, one sum per query head; a key the query cannot see
//      is marked invisible.
//   2. warp g (and g + 4, ...) takes the max and the sum of exp for query head g over the split.
//   3. groups of hd / 4 threads share out the keys, each thread accumulating sum_j p[g][j] * v[j][d] for 4 dims d
//      and every head g of the group, so that each V row is read once; invisible slots (they may hold NaN: a slot
//      not written yet) are skipped.
// kGroup: the group size rounded up to a power of two (register arrays need a compile-time bound; the loops skip
// g >= group). kQuads: 4-element pieces per lane of a K row (1 up to head_dim 128, 2 up to 256).
template <int kGroup, int kQuads, class T>
__global__ void __launch_bounds__(kThreads, (split_blocks_per_sm<kGroup, kQuads, T>())) attention_split_kernel(
    const float* __restrict__ q, const int32_t* __restrict__ q_pos, const T* __restrict__ k,
    const T* __restrict__ v, const int32_t* __restrict__ key_pos, const int32_t* __restrict__ key_count,
    AttentionShape s, int splits, int chunk_capacity, float* __restrict__ ws_max, float* __restrict__ ws_sum,
    float* __restrict__ ws_out) {
  constexpr int kKeysAtOnce = keys_at_once<kGroup, T>();
  extern __shared__ float smem[];
  allow_next_grid();
  wait_for_previous_grid();  // q, the cache and the key counts (programmatic_launch.cuh)
  const int split = blockIdx.x, kv_head = blockIdx.y;
  const int64_t t = blockIdx.z;
  const int hd = s.head_dim, group = s.heads / s.kv_heads;
  const int64_t keys = clamp_keys(row_key_count(key_count, s, t), s.capacity);
  const KvPages pages = row_pages(s, t);
  const int64_t chunk = split_chunk(keys, splits);
  const int64_t j0 = split * chunk;
  if (j0 >= keys) return;  // the merge reads only the splits that hold keys
  const int n = static_cast<int>(keys - j0 < chunk ? keys - j0 : chunk);

  float* q_s = smem;                                                    // [group][hd]
  float* p = q_s + group * hd;                                          // [group][chunk_capacity]
  unsigned char* visible = reinterpret_cast<unsigned char*>(p + group * chunk_capacity);  // [chunk_capacity]
  __shared__ float head_max[kSplitMaxGroup], head_sum[kSplitMaxGroup];

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t q_stride = static_cast<int64_t>(s.heads) * hd, kv_stride = static_cast<int64_t>(s.kv_heads) * hd;
  const KvReader<T> kr = kv_reader(k, kv_stride), vr = kv_reader(v, kv_stride);
  const int64_t kv_off = static_cast<int64_t>(kv_head) * hd;
  const int first_head = kv_head * group;
  for (int i = threadIdx.x; i < group * hd; i += kThreads) q_s[i] = q[t * q_stride + first_head * hd + i];
  const int64_t qp = q_pos[t];
  __syncthreads();

  // 1. scores, kKeysAtOnce keys per warp step with all their K loads issued before the arithmetic.
  for (int c0 = warp * kKeysAtOnce; c0 < n; c0 += kWarps * kKeysAtOnce) {
    KvQuad<T> kq[kKeysAtOnce][kQuads];
    bool seen[kKeysAtOnce];
#pragma unroll
    for (int u = 0; u < kKeysAtOnce; ++u) {
      const int c = c0 + u;
      const int64_t row = kv_row(pages, j0 + (c < n ? c : n - 1));  // past the split: a repeat, discarded below
      const int64_t dist = qp - static_cast<int64_t>(key_pos[row]);
      seen[u] = c < n && dist >= 0 && (s.sliding_window <= 0 || dist < s.sliding_window);
      const KvHead<T> kj = kr.head(row, kv_off);
#pragma unroll
      for (int e = 0; e < kQuads; ++e) {
        const int d = kQuad * lane + 32 * kQuad * e;
        if (d < hd) kq[u][e].load(kj, d);
      }
    }
#pragma unroll
    for (int u = 0; u < kKeysAtOnce; ++u) {
      const int c = c0 + u;
      if (c >= n) break;
      if (lane == 0) visible[c] = seen[u];
      float dot[kGroup];
#pragma unroll
      for (int g = 0; g < kGroup; ++g) dot[g] = 0.0f;
#pragma unroll
      for (int e = 0; e < kQuads; ++e) {
        const int d = kQuad * lane + 32 * kQuad * e;
        if (d >= hd) break;
        float kx[kQuad];
        kq[u][e].widen(kx);
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
          if (g >= group) break;
          const float4 qv = *reinterpret_cast<const float4*>(q_s + g * hd + d);
          dot[g] = fmaf(qv.x, kx[0], fmaf(qv.y, kx[1], fmaf(qv.z, kx[2], fmaf(qv.w, kx[3], dot[g]))));
        }
      }
#pragma unroll
      for (int g = 0; g < kGroup; ++g) {
        if (g >= group) break;
        const float score = soft_capped(warp_sum(dot[g]) * s.scale, s.softcap);
        if (lane == 0) p[g * chunk_capacity + c] = seen[u] ? score : -INFINITY;
      }
    }
  }
  __syncthreads();

  // 2. per-head max and sum over the split
  split_softmax<kWarps>(p, n, chunk_capacity, group, head_max, head_sum);
  __syncthreads();

  // 3. values. The split's keys are dealt round-robin to kThreads / (hd / 4) groups of threads (one warp per group at
  // head_dim 128); a thread of a group accumulates 4 consecutive dims of every head of the query group over its keys
  // with kKeysAtOnce V rows' loads in flight, and the groups' sums are then added in shared memory, kReduceHeads
  // heads at a time. An invisible slot (which may hold NaN) adds nothing.
  const int per_key = hd / kQuad, key_groups = kThreads / per_key;
  const int key_group = threadIdx.x / per_key, d0 = (threadIdx.x % per_key) * kQuad;
  float acc[kGroup][kQuad];
#pragma unroll
  for (int g = 0; g < kGroup; ++g)
#pragma unroll
    for (int i = 0; i < kQuad; ++i) acc[g][i] = 0.0f;
  if (key_group < key_groups) {
    for (int c0 = key_group; c0 < n; c0 += key_groups * kKeysAtOnce) {
      KvQuad<T> vq[kKeysAtOnce];
#pragma unroll
      for (int u = 0; u < kKeysAtOnce; ++u) {
        const int c = c0 + u * key_groups;
        vq[u].load(vr.head(kv_row(pages, j0 + (c < n ? c : 0)), kv_off), d0);
      }
#pragma unroll
      for (int u = 0; u < kKeysAtOnce; ++u) {
        const int c = c0 + u * key_groups;
        if (c >= n) break;
        if (!visible[c]) continue;
        float vx[kQuad];
        vq[u].widen(vx);
#pragma unroll
        for (int g = 0; g < kGroup; ++g) {
          if (g >= group) break;
          const float pr = p[g * chunk_capacity + c];
#pragma unroll
          for (int i = 0; i < kQuad; ++i) acc[g][i] += pr * vx[i];
        }
      }
    }
  }
  const int64_t slot = (t * s.heads + first_head) * splits + split;  // (row, head, split) of head g: + g * splits
  float* reduce = reinterpret_cast<float*>(visible + chunk_capacity);  // [kReduceHeads][key_groups][hd]
#pragma unroll
  for (int g0 = 0; g0 < kGroup; g0 += kReduceHeads) {
    if (g0 >= group) break;
    __syncthreads();  // the previous round's sums are read
    if (key_group < key_groups) {
#pragma unroll
      for (int r = 0; r < kReduceHeads; ++r)
#pragma unroll
        for (int i = 0; i < kQuad; ++i)
          if (g0 + r < kGroup) reduce[(r * key_groups + key_group) * hd + d0 + i] = acc[g0 + r][i];
    }
    __syncthreads();
    for (int e = threadIdx.x; e < kReduceHeads * hd; e += kThreads) {
      const int r = e / hd, d = e % hd;
      if (g0 + r >= group) break;
      float sum = 0.0f;
      for (int b = 0; b < key_groups; ++b) sum += reduce[(r * key_groups + b) * hd + d];
      ws_out[(slot + static_cast<int64_t>(g0 + r) * splits) * hd + d] = sum;
    }
  }
  if (static_cast<int>(threadIdx.x) < group) {
    ws_max[slot + static_cast<int64_t>(threadIdx.x) * splits] = head_max[threadIdx.x];
    ws_sum[slot + static_cast<int64_t>(threadIdx.x) * splits] = head_sum[threadIdx.x];
  }
}

// One block per (query row, head): out = sum_b o_b * exp(m_b - M) / sum_b l_b * exp(m_b - M) over the splits that
// held keys; zeros when no key was visible. The splits' maxima and sums are read in parallel (strided over the
// threads) and their weights exp(m_b - M) / denominator kept in shared memory; then warp w adds the partial outputs
// of splits w, w + kWarps, ... (its lanes covering head_dim, two splits' loads in flight), and the warps' sums are
// added in a fixed order. Shared memory: weight[splits], sums[kWarps][hd].
__global__ void __launch_bounds__(kThreads) attention_merge_kernel(const int32_t* __restrict__ key_count,
                                                                   AttentionShape s, int splits,
                                                                   const float* __restrict__ ws_max,
                                                                   const float* __restrict__ ws_sum,
                                                                   const float* __restrict__ ws_out,
                                                                   float* __restrict__ out, Q8Activations q8) {
  extern __shared__ float weight[];  // [splits], then sums [kWarps][hd]
  allow_next_grid();
  wait_for_previous_grid();  // the split kernel's partials (programmatic_launch.cuh)
  float* sums = weight + splits;
  __shared__ float warp_top[kWarps], warp_denom[kWarps];
  const int64_t item = blockIdx.x;  // t * heads + h
  const int hd = s.head_dim;
  const int64_t keys = clamp_keys(row_key_count(key_count, s, item / s.heads), s.capacity);
  const int64_t chunk = split_chunk(keys, splits);
  const int used = static_cast<int>((keys + chunk - 1) / chunk);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  // The sink joins the merge as one more logit with a zero value (it adds to the denominator only).
  const float sink = s.sinks != nullptr ? s.sinks[item % s.heads] : -INFINITY;
  merge_weights<kThreads>(ws_max + item * splits, ws_sum + item * splits, used, sink, weight, warp_top, warp_denom);
  const float* partial = ws_out + item * splits * hd;
  float acc[kMaxDimsPerLane];
#pragma unroll
  for (int i = 0; i < kMaxDimsPerLane; ++i) acc[i] = 0.0f;
#pragma unroll 2
  for (int b = warp; b < used; b += kWarps) {
    const float wb = weight[b];
    if (wb == 0.0f) continue;  // a split with no visible key adds nothing
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < hd) acc[i] += partial[static_cast<int64_t>(b) * hd + d] * wb;
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < hd) sums[warp * hd + d] = acc[i];
  }
  __syncthreads();
  float* o = out + item * hd;  // out is [tokens, heads * hd]: row t, head h at (t * heads + h) * hd
  for (int d = threadIdx.x; d < hd; d += kThreads) {
    float total = sums[d];
    for (int w = 1; w < kWarps; ++w) total += sums[w * hd + d];
    o[d] = total;
    if (q8.codes != nullptr) {  // head_dim % 32 == 0: a warp's lanes are one activation block, all in or all out
      const int64_t block = (item * hd + d) / kQ8BlockCols;
      quantize_q8_warp(total, d % kQ8BlockCols, q8.codes + block * kQ8BlockCodeBytes,
                       q8.scales + block * kQ8BlockScaleFloats);
    }
  }
}

}  // namespace

AttentionSplitPlan plan_attention_split(const AttentionShape& s) {
  AttentionSplitPlan plan;
  if (s.tokens <= 0 || s.capacity <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0 ||
      s.heads % s.kv_heads != 0)
    return plan;
  const int group = s.heads / s.kv_heads;
  if (group > kSplitMaxGroup || s.tokens > 65535 || s.kv_heads > 65535 || s.head_dim > 32 * kMaxDimsPerLane)
    return plan;
  const int64_t per_split_blocks = s.tokens * s.kv_heads;
  int64_t splits = kTargetBlocks / per_split_blocks;
  splits = splits < 1 ? 1 : (splits > kMaxSplits ? kMaxSplits : splits);
  const int64_t useful = (s.capacity + kMinSplitKeys - 1) / kMinSplitKeys;
  if (splits > useful) splits = useful;
  // Scores of one split live in shared memory: more splits for long caches.
  if (s.head_dim % kQuad != 0) return plan;  // every row read in 4-element pieces (KvQuad)
  const uint64_t fixed = static_cast<uint64_t>(group) * s.head_dim * sizeof(float) + kReduceBytes;
  if (fixed >= kSharedLimit) return plan;
  const int64_t max_chunk = static_cast<int64_t>((kSharedLimit - fixed) / (group * sizeof(float) + 1)) / 32 * 32;
  if (max_chunk < 32) return plan;
  const int64_t needed = (s.capacity + max_chunk - 1) / max_chunk;
  if (needed > splits) splits = needed;
  // The merge's weights and per-warp sums.
  if (splits > 65535 || (static_cast<uint64_t>(splits) + uint64_t{kWarps} * s.head_dim) * sizeof(float) > kSharedLimit)
    return plan;
  const int64_t per = (s.capacity + splits - 1) / splits;
  const int64_t chunk_capacity = per < 32 ? 32 : (per + 31) / 32 * 32;
  plan.splits = static_cast<int>(splits);
  plan.chunk_capacity = static_cast<int>(chunk_capacity);
  plan.shared_bytes = fixed + static_cast<uint64_t>(group) * chunk_capacity * sizeof(float) + chunk_capacity;
  const uint64_t partials = static_cast<uint64_t>(s.tokens) * s.heads * splits;
  plan.workspace_bytes = partials * (2 + static_cast<uint64_t>(s.head_dim)) * sizeof(float);
  return plan;
}

bool attention_split_aligned(const void* k, const void* v, KvType type) {
  uintptr_t bytes = 2;  // q8_0: its blocks' 2-byte scale and code pairs
  switch (type) {
    case KvType::kF32: bytes = 16; break;
    case KvType::kF16:
    case KvType::kBF16: bytes = 8; break;
    case KvType::kFp8: bytes = 4; break;
    case KvType::kQ8_0: break;
  }
  return reinterpret_cast<uintptr_t>(k) % bytes == 0 && reinterpret_cast<uintptr_t>(v) % bytes == 0;
}

Status attention_split(const float* q, const int32_t* q_pos, const void* k, const void* v, const int32_t* key_pos,
                       const int32_t* key_count, const AttentionShape& s, const AttentionSplitPlan& plan,
                       float* workspace, float* out, cudaStream_t stream, Q8Activations q8) {
  if (plan.splits <= 0 || workspace == nullptr)
    return invalid_argument("attention_split: no split plan or workspace for this shape");
  if (!attention_split_aligned(k, v, s.kv_type))
    return invalid_argument("attention_split: the K or V array is not aligned to 4 of its elements");
  if (q8.codes != nullptr && (s.head_dim % kQ8BlockCols != 0 || q8.scales == nullptr))
    return invalid_argument("attention_split: a quantized output needs head_dim a multiple of 32 (got " +
                            std::to_string(s.head_dim) + ") and both arrays");
  const uint64_t partials = static_cast<uint64_t>(s.tokens) * s.heads * plan.splits;
  float* ws_max = workspace;
  float* ws_sum = ws_max + partials;
  float* ws_out = ws_sum + partials;
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(s.kv_heads),
                  static_cast<unsigned>(s.tokens));
  const int group = s.heads / s.kv_heads;
  QRT_TRY(with_kv_element(s.kv_type, [&](auto element) {
    using T = decltype(element);
    const T* kt = static_cast<const T*>(k);
    const T* vt = static_cast<const T*>(v);
    auto launch = [&](auto kernel) {
      return launch_programmatic("attention_split_kernel", kernel, grid, kThreads, plan.shared_bytes, stream, q, q_pos,
                                 kt, vt, key_pos, key_count, s, plan.splits, plan.chunk_capacity, ws_max, ws_sum,
                                 ws_out);
    };
    const auto by_group = [&](auto quads) {
      constexpr int kQuads = decltype(quads)::value;
      if (group <= 1) return launch(attention_split_kernel<1, kQuads, T>);
      if (group <= 2) return launch(attention_split_kernel<2, kQuads, T>);
      if (group <= 4) return launch(attention_split_kernel<4, kQuads, T>);
      if (group <= 8) return launch(attention_split_kernel<8, kQuads, T>);
      return launch(attention_split_kernel<16, kQuads, T>);
    };
    if (s.head_dim <= 32 * kQuad) return by_group(std::integral_constant<int, 1>{});
    return by_group(std::integral_constant<int, 2>{});
  }));
  const size_t merge_shared = (static_cast<size_t>(plan.splits) + size_t{kWarps} * s.head_dim) * sizeof(float);
  return launch_programmatic("attention_merge_kernel", attention_merge_kernel,
                             static_cast<unsigned>(s.tokens * s.heads), kThreads, merge_shared, stream, key_count, s,
                             plan.splits, ws_max, ws_sum, ws_out, out, q8);
}

}  // namespace qrt::kernels
