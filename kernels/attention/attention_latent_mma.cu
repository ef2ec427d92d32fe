// DeepSeek's latent decode attention on the tensor cores (attention_latent.hpp: attention_latent_mma), for f16 and
// bf16 caches. The latent kernel beside it (attention_latent.cu) scores a row for its 16 query heads with 16 fp32
// multiply-adds per element, each reading the query from shared memory, and sums the row again as values the same
// way: about two instructions per multiply-add, issue-bound several times over the row's bytes. Here the 16 heads of
// a block are the m16 of mma.sync.m16n8k16 (mma_f16.cuh):
//   - S = Q·Kᵀ for a tile of 32 keys: warp w takes keys 8w .. 8w + 7 over the whole row width (Q's A fragments and
//     K's B fragments by ldmatrix from shared memory, two 16-column steps per load);
//   - the tile's maxima and sums per head meet across the 4 warps in shared memory; P, rounded to the cache's type,
//     goes to shared memory as a [16 heads][32 keys] tile, read back as A fragments by every warp;
//   - O += P·V with V = the same K rows (transposing ldmatrix): warp w owns the 16-column pairs w, w + 4, ... of
//     the row, 18 accumulator slices per lane at width 576.
// Q and P are rounded to the cache's 16-bit type (the prompt kernels' rounding); scores, softmax and O are fp32. The
// partial results per (row, head, split) are those of the latent kernel (running max in natural log units, sum,
// unnormalized output), so its merge kernel follows unchanged. A prompt's rows (attention_latent_rows) run with one
// split per row and write the normalized output themselves; a tile none of a row's keys are visible in is skipped.
#include <climits>
#include <type_traits>

#include "kernels/attention/attention_latent.hpp"
#include "kernels/attention/attention_latent_mma.hpp"
#include "kernels/attention/attention_rows.cuh"
#include "kernels/attention/kv_element.cuh"
#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/mma_f16.cuh"
#include "kernels/cuda/programmatic_launch.cuh"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kHeads = kLatentHeadsPerBlock;  // 16: the rows of every product
constexpr int kKeys = 32;                     // keys per tile, 8 per warp in S = Q·Kᵀ
constexpr int kPad = 8;                       // elements after each row in shared memory (distinct ldmatrix banks)
constexpr int kPRow = kKeys + kPad;           // P's row in shared memory
constexpr int kMaxPairsPerWarp = 9;           // 16-column pairs of O per warp: rows up to 4 · 9 · 16 = 576 wide
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Dynamic shared memory: Q [16][hd + 8], the K tile [32][hd + 8], P [16][40], all 16-bit.
uint64_t latent_mma_shared_bytes(int hd) {
  return (uint64_t{kHeads + kKeys} * (hd + kPad) + uint64_t{kHeads} * kPRow) * 2;
}

// Lane (g, t) = (lane / 4, lane % 4) holds heads g and g + 8 of the block: in S, keys 8w + 2t and 8w + 2t + 1; in
// O, columns 16p + 8h + 2t and + 1 of pair p and half h. The running max and sum of a head are the same in every
// lane that holds it (each tile's are reduced over the block before use).
template <class T>
__global__ void __launch_bounds__(kThreads) attention_latent_mma_kernel(
    const float* __restrict__ q, const int32_t* __restrict__ q_pos, const T* __restrict__ k,
    const int32_t* __restrict__ key_pos, const int32_t* __restrict__ key_count, AttentionShape s, int splits,
    float* __restrict__ ws_max, float* __restrict__ ws_sum, float* __restrict__ ws_out, float* __restrict__ out) {
  extern __shared__ __align__(16) uint4 smem_vectors[];
  __shared__ int64_t rows_s[kKeys];
  __shared__ unsigned char seen_s[kKeys];
  __shared__ float tile_max[kWarps][kHeads], tile_sum[kWarps][kHeads];
  allow_next_grid();
  wait_for_previous_grid();  // q and the cache are earlier kernels' (programmatic_launch.cuh)
  const LatentBlock at = latent_block(s, key_count, splits, kHeads);
  if (at.n == 0 && out == nullptr) return;  // the merge reads only the splits that hold keys
  const int split = at.split, first_head = at.first_head, heads = at.heads, n = at.n;
  const int64_t t = at.t, j0 = at.j0;
  const KvPages pages = at.pages;
  const int hd = s.head_dim, row = hd + kPad, pairs = hd / 16;

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, tq = lane % 4;
  T* q_s = reinterpret_cast<T*>(smem_vectors);
  T* k_s = q_s + kHeads * row;
  T* p_s = k_s + kKeys * row;
  const float* qt = q + (t * s.heads + first_head) * hd;
  for (int i = tid; i < kHeads * hd / 2; i += kThreads) {
    const int r = i / (hd / 2), c = 2 * (i % (hd / 2));
    const bool has = r < heads;  // heads past the block's: zeros, never written out
    *reinterpret_cast<uint32_t*>(q_s + r * row + c) =
        pack16x2(kv_from_float<T>(has ? qt[r * hd + c] : 0.0f), kv_from_float<T>(has ? qt[r * hd + c + 1] : 0.0f));
  }
  const int64_t qp = q_pos[t];
  const float scale2 = s.scale * kLog2e;  // scores in base 2: one exp2 per probability

  float o[kMaxPairsPerWarp][2][4];
#pragma unroll
  for (int pi = 0; pi < kMaxPairsPerWarp; ++pi)
#pragma unroll
    for (int h = 0; h < 2; ++h) o[pi][h][0] = o[pi][h][1] = o[pi][h][2] = o[pi][h][3] = 0.0f;
  float max_a = -INFINITY, max_b = -INFINITY, sum_a = 0.0f, sum_b = 0.0f;
  // A fragments of Q (rows l % 8 + 8 (l / 8 % 2), columns + 8 (l / 16)); B fragments of the tile's keys.
  const T* q_frag = q_s + (lane % 8 + 8 * ((lane / 8) % 2)) * row + 8 * (lane / 16);
  const T* k_frag = k_s + (8 * warp + lane % 8) * row + 8 * (lane / 8);
  const T* p_frag = p_s + (lane % 8 + 8 * ((lane / 8) % 2)) * kPRow + 8 * (lane / 16);
  const T* v_frag = k_s + (8 * ((lane / 8) % 2) + lane % 8) * row + 8 * (lane / 16);

  for (int c0 = 0; c0 < n; c0 += kKeys) {
    const int in_tile = n - c0 < kKeys ? n - c0 : kKeys;
    __syncthreads();  // Q is written; the previous tile's K and P are read
    int seen = 0;
    if (tid < kKeys) {
      const int64_t r = tid < in_tile ? kv_row(pages, j0 + c0 + tid) : 0;
      const int64_t dist = qp - static_cast<int64_t>(tid < in_tile ? key_pos[r] : 0);
      seen = tid < in_tile && dist >= 0 && (s.sliding_window <= 0 || dist < s.sliding_window);
      seen_s[tid] = static_cast<unsigned char>(seen);
      rows_s[tid] = r;
    }
    if (!__syncthreads_or(seen)) continue;  // the row sees none of these keys (a prompt's later ones): nothing to add
    // The tile's rows (16-byte pieces); a row no query sees is zeros (an unwritten slot may hold NaN).
    for (int i = tid; i < kKeys * (hd / 8); i += kThreads) {
      const int c = i / (hd / 8), col = 8 * (i % (hd / 8));
      T* dst = k_s + c * row + col;
      if (seen_s[c]) {
        cp_async_16(dst, k + rows_s[c] * hd + col);
      } else {
        *reinterpret_cast<uint4*>(dst) = make_uint4(0u, 0u, 0u, 0u);
      }
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    // S for keys 8w .. 8w + 7: element e is head g (e < 2) or g + 8, key 8w + 2t + (e & 1).
    float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int kk = 0; kk < hd / 16; kk += 2) {
      uint32_t qa[4], qb[4], b[4];
      ldmatrix_x4<false>(qa, q_frag + 16 * kk);
      ldmatrix_x4<false>(qb, q_frag + 16 * kk + 16);
      ldmatrix_x4<false>(b, k_frag + 16 * kk);
      mma_16816<T>(sc, qa, b[0], b[1]);
      mma_16816<T>(sc, qb, b[2], b[3]);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = 8 * warp + 2 * tq + (e & 1);
      const float v = s.softcap > 0.0f ? soft_capped(sc[e] * s.scale, s.softcap) * kLog2e : sc[e] * scale2;
      sc[e] = seen_s[key] ? v : -INFINITY;
    }
    // The tile's max per head: this lane's two keys, the row's 4 lanes, then the 4 warps.
    float ta = fmaxf(sc[0], sc[1]), tb = fmaxf(sc[2], sc[3]);
    ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, 1));
    ta = fmaxf(ta, __shfl_xor_sync(0xffffffffu, ta, 2));
    tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, 1));
    tb = fmaxf(tb, __shfl_xor_sync(0xffffffffu, tb, 2));
    if (tq == 0) {
      tile_max[warp][g] = ta;
      tile_max[warp][g + 8] = tb;
    }
    __syncthreads();
    float m_a = max_a, m_b = max_b;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      m_a = fmaxf(m_a, tile_max[w][g]);
      m_b = fmaxf(m_b, tile_max[w][g + 8]);
    }
    const float corr_a = m_a == -INFINITY ? 1.0f : exp2f(max_a - m_a);  // 0 while nothing was visible before
    const float corr_b = m_b == -INFINITY ? 1.0f : exp2f(max_b - m_b);
    max_a = m_a;
    max_b = m_b;
    // P rounded to T into shared memory; the sums count the rounded values, as P·V uses them.
    T p[4];
    float add_a = 0.0f, add_b = 0.0f;
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float m = e < 2 ? m_a : m_b;
      p[e] = kv_from_float<T>(sc[e] == -INFINITY ? 0.0f : exp2f(sc[e] - m));
      (e < 2 ? add_a : add_b) += kv_to_float(p[e]);
    }
    const int key0 = 8 * warp + 2 * tq;
    *reinterpret_cast<uint32_t*>(p_s + g * kPRow + key0) = pack16x2(p[0], p[1]);
    *reinterpret_cast<uint32_t*>(p_s + (g + 8) * kPRow + key0) = pack16x2(p[2], p[3]);
    add_a += __shfl_xor_sync(0xffffffffu, add_a, 1);
    add_a += __shfl_xor_sync(0xffffffffu, add_a, 2);
    add_b += __shfl_xor_sync(0xffffffffu, add_b, 1);
    add_b += __shfl_xor_sync(0xffffffffu, add_b, 2);
    if (tq == 0) {
      tile_sum[warp][g] = add_a;
      tile_sum[warp][g + 8] = add_b;
    }
    __syncthreads();  // P and the sums are complete; the maxima are read
    float tile_a = 0.0f, tile_b = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      tile_a += tile_sum[w][g];
      tile_b += tile_sum[w][g + 8];
    }
    sum_a = sum_a * corr_a + tile_a;
    sum_b = sum_b * corr_b + tile_b;

    // O = O · correction + P·V: P's A fragments for keys 0..15 and 16..31; V's B fragments of two 8-column slices
    // per transposing ldmatrix (matrix i: keys 16j + 8 (i % 2) .., columns 16 pair + 8 (i / 2) ..).
    uint32_t pa[2][4];
    ldmatrix_x4<false>(pa[0], p_frag);
    ldmatrix_x4<false>(pa[1], p_frag + 16);
#pragma unroll
    for (int pi = 0; pi < kMaxPairsPerWarp; ++pi) {
      const int pair = warp + kWarps * pi;
      if (pair >= pairs) break;
      if (corr_a != 1.0f || corr_b != 1.0f) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          o[pi][h][0] *= corr_a;
          o[pi][h][1] *= corr_a;
          o[pi][h][2] *= corr_b;
          o[pi][h][3] *= corr_b;
        }
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        uint32_t b[4];
        ldmatrix_x4<true>(b, v_frag + 16 * j * row + 16 * pair);
        mma_16816<T>(o[pi][0], pa[j], b[0], b[1]);
        mma_16816<T>(o[pi][1], pa[j], b[2], b[3]);
      }
    }
  }

  // Where heads g and g + 8 go and what their sums are multiplied by: for one split (a prompt's rows,
  // attention_latent_rows) the output itself, O / sum with a sink logit in the denominator (the merge's arithmetic for
  // one split; zeros for a head that saw nothing); else the split's partials in the latent kernel's layout and units.
  float *dst_a = nullptr, *dst_b = nullptr;
  float fa = 1.0f, fb = 1.0f;
  if (out != nullptr) {
    const auto factor = [&](int h, float m, float l) {
      const float sink = s.sinks != nullptr ? s.sinks[first_head + h] * kLog2e : -INFINITY;
      const float top = fmaxf(m, sink);
      if (top == -INFINITY) return 0.0f;
      const float w = m == -INFINITY ? 0.0f : exp2f(m - top);
      const float denom = l * w + (sink == -INFINITY ? 0.0f : exp2f(sink - top));
      return denom > 0.0f ? w / denom : 0.0f;
    };
    float* row_out = out + (t * s.heads + first_head) * hd;
    if (g < heads) dst_a = row_out + g * hd, fa = factor(g, max_a, sum_a);
    if (g + 8 < heads) dst_b = row_out + (g + 8) * hd, fb = factor(g + 8, max_b, sum_b);
  } else {
    const int64_t slot = (t * s.heads + first_head) * splits + split;  // (row, head, split) of head h: + h * splits
    if (g < heads) dst_a = ws_out + (slot + static_cast<int64_t>(g) * splits) * hd;
    if (g + 8 < heads) dst_b = ws_out + (slot + static_cast<int64_t>(g + 8) * splits) * hd;
    if (warp == 0 && tq == 0) {
      if (g < heads) {
        ws_max[slot + static_cast<int64_t>(g) * splits] = max_a == -INFINITY ? -INFINITY : max_a * kLn2;
        ws_sum[slot + static_cast<int64_t>(g) * splits] = sum_a;
      }
      if (g + 8 < heads) {
        ws_max[slot + static_cast<int64_t>(g + 8) * splits] = max_b == -INFINITY ? -INFINITY : max_b * kLn2;
        ws_sum[slot + static_cast<int64_t>(g + 8) * splits] = sum_b;
      }
    }
  }
#pragma unroll
  for (int pi = 0; pi < kMaxPairsPerWarp; ++pi) {
    const int pair = warp + kWarps * pi;
    if (pair >= pairs) break;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = 16 * pair + 8 * h + 2 * tq;
      if (dst_a != nullptr) {
        dst_a[col] = o[pi][h][0] * fa;
        dst_a[col + 1] = o[pi][h][1] * fa;
      }
      if (dst_b != nullptr) {
        dst_b[col] = o[pi][h][2] * fb;
        dst_b[col + 1] = o[pi][h][3] * fb;
      }
    }
  }
}

}  // namespace

bool attention_latent_mma_applies(const AttentionShape& s, const void* k, uint64_t shared_optin) {
  return (s.kv_type == KvType::kF16 || s.kv_type == KvType::kBF16) && s.kv_heads == 1 && s.head_dim > 0 &&
         s.head_dim % 32 == 0 && s.head_dim <= 16 * kWarps * kMaxPairsPerWarp &&
         reinterpret_cast<uintptr_t>(k) % 16 == 0 && latent_mma_shared_bytes(s.head_dim) + 1024 <= shared_optin;
}

namespace {

template <class T>
Status launch(const float* q, const int32_t* q_pos, const void* k, const int32_t* key_pos, const int32_t* key_count,
              const AttentionShape& s, dim3 grid, int splits, float* ws_max, float* ws_sum, float* ws_out, float* out,
              cudaStream_t stream) {
  const auto kernel = attention_latent_mma_kernel<T>;
  const uint64_t shared = latent_mma_shared_bytes(s.head_dim);
  QRT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  return launch_programmatic("attention_latent_mma_kernel", kernel, grid, kThreads, shared, stream, q, q_pos,
                             static_cast<const T*>(k), key_pos, key_count, s, splits, ws_max, ws_sum, ws_out, out);
}

Status launch_typed(const float* q, const int32_t* q_pos, const void* k, const int32_t* key_pos,
                    const int32_t* key_count, const AttentionShape& s, dim3 grid, int splits, float* ws_max,
                    float* ws_sum, float* ws_out, float* out, cudaStream_t stream) {
  if (!attention_latent_mma_applies(s, k, UINT64_MAX))
    return invalid_argument("attention_latent_mma: needs an f16 or bf16 latent cache, 16-byte aligned, rows a "
                            "multiple of 32 up to 576 wide");
  return s.kv_type == KvType::kF16
             ? launch<__half>(q, q_pos, k, key_pos, key_count, s, grid, splits, ws_max, ws_sum, ws_out, out, stream)
             : launch<__nv_bfloat16>(q, q_pos, k, key_pos, key_count, s, grid, splits, ws_max, ws_sum, ws_out, out,
                                     stream);
}

}  // namespace

Status attention_latent_mma_partials(const float* q, const int32_t* q_pos, const void* k, const int32_t* key_pos,
                                     const int32_t* key_count, const AttentionShape& s, const AttentionLatentPlan& plan,
                                     float* ws_max, float* ws_sum, float* ws_out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(plan.splits), static_cast<unsigned>(s.tokens),
                  static_cast<unsigned>(plan.head_blocks));
  return launch_typed(q, q_pos, k, key_pos, key_count, s, grid, plan.splits, ws_max, ws_sum, ws_out, nullptr, stream);
}

bool attention_latent_rows_applies(const AttentionShape& s, const void* k, uint64_t shared_optin) {
  return s.tokens >= 1 && s.tokens <= 65535 && s.table_stride == 0 && s.heads >= 1 &&
         (s.heads + kHeads - 1) / kHeads <= 65535 && attention_latent_mma_applies(s, k, shared_optin);
}

Status attention_latent_rows(const float* q, const int32_t* q_pos, const void* k, const int32_t* key_pos,
                             const int32_t* key_count, const AttentionShape& s, float* out, cudaStream_t stream) {
  if (!attention_latent_rows_applies(s, k, UINT64_MAX))
    return invalid_argument("attention_latent_rows: needs 1..65535 rows of one sequence over an f16 or bf16 latent "
                            "cache, 16-byte aligned, rows a multiple of 32 up to 576 wide");
  const dim3 grid(1, static_cast<unsigned>(s.tokens), static_cast<unsigned>((s.heads + kHeads - 1) / kHeads));
  return launch_typed(q, q_pos, k, key_pos, key_count, s, grid, 1, nullptr, nullptr, nullptr, out, stream);
}

}  // namespace qrt::kernels
