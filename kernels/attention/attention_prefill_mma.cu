// Prompt attention with the scores, probabilities and output in registers (FlashAttention-2's layout), for head
// dims 64 and 128 (attention_prefill_tc.hpp). Against the shared-memory kernel beside it (attention_prefill_tc.cu),
// which stores S, P and O in shared memory around every wmma product and runs the softmax as two lanes per row over
// 32 columns each, here:
//   - each warp keeps its 16 query rows as mma A fragments for the whole kernel, computes S = Q·Kᵀ for a tile of 64
//     keys into 32 accumulator registers per lane, masks, scales and exponentiates them in place (a row's max and
//     sum need two shuffles among the 4 lanes that hold it), and feeds P to P·V straight from those registers: the
//     accumulator layout of m16n8k16 is its A layout, two tiles of 8 keys per 16-key step;
//   - O (16 rows × d) lives in accumulators (d / 2 floats per lane), rescaled in registers by the running max;
//   - shared memory holds only the K and V tile (rows padded by 8 elements, so that the fragment loads of the 8 rows
//     of a B fragment fall in distinct banks): 34 KB at d = 128, no opt-in, several blocks per SM.
// Tiles no query of the block can see are skipped as there, and a warp skips the products of a tile none of its own
// rows can see (the diagonal tile of a causal prompt: the first warps of the block).
#include <climits>
#include <string>

#include "kernels/attention/attention_prefill_common.cuh"
#include "kernels/attention/attention_prefill_tc.hpp"
#include "kernels/attention/kv_element.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/mma_f16.cuh"

namespace qrt::kernels {
namespace {

constexpr int kRows = 64;  // query rows per block: 16 per warp
constexpr int kKeys = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kPad = 8;  // elements after each K/V row in shared memory

// grid (query tiles, heads). Lane (g, t) = (lane / 4, lane % 4) of warp w holds rows a = 16w + g and b = a + 8 of
// the block's 64: their scores at keys 8n + 2t, 8n + 2t + 1 of each 8-key slice n, and their outputs at columns
// 8m + 2t, 8m + 2t + 1. A row's running max is the same in its 4 lanes; its running sum is kept per lane (each lane's
// share of the row's probabilities) and added up once at the end.
template <class T, int D>
__global__ void __launch_bounds__(kThreads) attention_prefill_mma_kernel(
    const float* __restrict__ q, const int32_t* __restrict__ q_pos, const T* __restrict__ k, const T* __restrict__ v,
    const int32_t* __restrict__ key_pos, const int32_t* __restrict__ key_count, AttentionShape s,
    float* __restrict__ out) {
  // As 16-byte vectors (the tile loads' unit, and their alignment); (D + kPad) * 2 bytes is a multiple of 16.
  __shared__ uint4 k_raw[kKeys * (D + kPad) / 8], v_raw[kKeys * (D + kPad) / 8];
  T* k_s = reinterpret_cast<T*>(k_raw);
  T* v_s = reinterpret_cast<T*>(v_raw);
  __shared__ int32_t key_pos_s[kKeys], q_pos_s[kRows];
  __shared__ unsigned char key_live[kKeys];
  __shared__ int32_t block_q_min, block_q_max;

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int h = static_cast<int>(blockIdx.y), group = s.heads / s.kv_heads;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int rows = static_cast<int>(s.tokens - t0 < kRows ? s.tokens - t0 : kRows);
  const int64_t q_stride = static_cast<int64_t>(s.heads) * D, kv_stride = static_cast<int64_t>(s.kv_heads) * D;
  const int64_t kv_off = static_cast<int64_t>(h / group) * D;
  const int64_t count = *key_count;
  const int64_t keys = count < 0 ? 0 : (count > s.capacity ? s.capacity : count);

  if (tid < kRows) q_pos_s[tid] = tid < rows ? q_pos[t0 + tid] : -1;  // -1: a row past the prompt sees nothing
  __syncthreads();
  if (tid == 0) position_range(q_pos_s, 0, rows, &block_q_min, &block_q_max);
  const int ra = 16 * warp + g, rb = ra + 8;
  const int32_t qpa = q_pos_s[ra], qpb = q_pos_s[rb];
  // The warp's own rows' range, for skipping a tile none of them sees.
  int32_t w_lo, w_hi;
  position_range(q_pos_s, 16 * warp, min(16 * warp + 16, rows), &w_lo, &w_hi);

  // Q as A fragments, rounded to T: qf[kk] covers columns 16kk .. 16kk + 15 of rows a and b.
  uint32_t qf[D / 16][4];
  {
    const float* qa = q + (t0 + ra) * q_stride + static_cast<int64_t>(h) * D;
    const float* qb = q + (t0 + rb) * q_stride + static_cast<int64_t>(h) * D;
    const bool has_a = ra < rows, has_b = rb < rows;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int c = 16 * kk + 2 * t;
      auto pair = [&](const float* row, bool has, int col) {
        return has ? pack16x2(kv_from_float<T>(row[col]), kv_from_float<T>(row[col + 1]))
                   : pack16x2(kv_from_float<T>(0.0f), kv_from_float<T>(0.0f));
      };
      qf[kk][0] = pair(qa, has_a, c);
      qf[kk][1] = pair(qb, has_b, c);
      qf[kk][2] = pair(qa, has_a, c + 8);
      qf[kk][3] = pair(qb, has_b, c + 8);
    }
  }

  float o[D / 8][4];
#pragma unroll
  for (int m = 0; m < D / 8; ++m) o[m][0] = o[m][1] = o[m][2] = o[m][3] = 0.0f;
  const float sink = s.sinks != nullptr ? s.sinks[h] : -INFINITY;  // a logit with a zero value
  float max_a = sink, max_b = sink;
  float sum_a = s.sinks != nullptr && t == 0 ? 1.0f : 0.0f, sum_b = sum_a;  // the sink counted once per row
  __syncthreads();
  const int64_t q_min = block_q_min, q_max = block_q_max;

  for (int64_t j0 = 0; j0 < keys; j0 += kKeys) {
    const int n_keys = static_cast<int>(keys - j0 < kKeys ? keys - j0 : kKeys);
    const int useful = mark_tile_keys<kKeys>(key_pos, s, j0, n_keys, q_min, q_max, key_pos_s, key_live);
    if (!__syncthreads_or(useful)) continue;  // the whole block agrees: nothing here for any of its rows
    load_kv_tile<kKeys, kThreads>(k, v, j0, kv_stride, kv_off, D, D + kPad, s.pages, key_live, k_s, v_s);
    __syncthreads();

    // Whether any key of the tile is visible to some row of this warp (two keys per lane, then the warp agrees).
    bool mine = false;
    for (int c = lane; c < kKeys; c += 32) {
      const int32_t kp = key_pos_s[c];
      mine = mine || (key_live[c] != 0 && kp <= w_hi && (s.sliding_window <= 0 || kp > w_lo - s.sliding_window));
    }
    if (__any_sync(0xffffffffu, mine)) {
      // S = Q·Kᵀ: slice n holds keys 8n .. 8n + 7 (B's column g is key 8n + g, its k index the head dim).
      float sc[kKeys / 8][4];
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
        sc[n][0] = sc[n][1] = sc[n][2] = sc[n][3] = 0.0f;
        const T* krow = k_s + (8 * n + g) * (D + kPad) + 2 * t;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          const uint32_t b0 = *reinterpret_cast<const uint32_t*>(krow + 16 * kk);
          const uint32_t b1 = *reinterpret_cast<const uint32_t*>(krow + 16 * kk + 8);
          mma_16816<T>(sc[n], qf[kk], b0, b1);
        }
      }
      // Mask, scale and cap; the rows' new maxima (the 4 lanes of a row agree after two shuffles).
      float m_a = max_a, m_b = max_b;
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = 8 * n + 2 * t + (e & 1);
          const int64_t dist = static_cast<int64_t>(e < 2 ? qpa : qpb) - key_pos_s[c];
          const bool visible = key_live[c] != 0 && dist >= 0 && (s.sliding_window <= 0 || dist < s.sliding_window);
          const float score = visible ? soft_capped(sc[n][e] * s.scale, s.softcap) : -INFINITY;
          sc[n][e] = score;
          if (e < 2) {
            m_a = fmaxf(m_a, score);
          } else {
            m_b = fmaxf(m_b, score);
          }
        }
      m_a = fmaxf(m_a, __shfl_xor_sync(0xffffffffu, m_a, 1));
      m_a = fmaxf(m_a, __shfl_xor_sync(0xffffffffu, m_a, 2));
      m_b = fmaxf(m_b, __shfl_xor_sync(0xffffffffu, m_b, 1));
      m_b = fmaxf(m_b, __shfl_xor_sync(0xffffffffu, m_b, 2));
      const float corr_a = m_a == -INFINITY ? 1.0f : expf(max_a - m_a);  // 0 while nothing was visible before
      const float corr_b = m_b == -INFINITY ? 1.0f : expf(max_b - m_b);
      max_a = m_a;
      max_b = m_b;
      // P = exp(S - max) rounded to T, packed as A fragments: 16-key step j is slices 2j (k = 2t, 2t + 1) and
      // 2j + 1 (k = 8 + 2t, 9 + 2t). The sums count the rounded values, as P·V uses them.
      uint32_t pf[kKeys / 16][4];
      float add_a = 0.0f, add_b = 0.0f;
#pragma unroll
      for (int n = 0; n < kKeys / 8; ++n) {
        T p[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float m = e < 2 ? m_a : m_b;
          p[e] = kv_from_float<T>(sc[n][e] == -INFINITY ? 0.0f : expf(sc[n][e] - m));
          (e < 2 ? add_a : add_b) += kv_to_float(p[e]);
        }
        pf[n / 2][2 * (n % 2)] = pack16x2(p[0], p[1]);
        pf[n / 2][2 * (n % 2) + 1] = pack16x2(p[2], p[3]);
      }
      sum_a = sum_a * corr_a + add_a;
      sum_b = sum_b * corr_b + add_b;
      // O = O · correction + P·V: output slice m holds columns 8m .. 8m + 7 (B's column g is V's column 8m + g,
      // its k index the key).
#pragma unroll
      for (int m = 0; m < D / 8; ++m) {
        o[m][0] *= corr_a;
        o[m][1] *= corr_a;
        o[m][2] *= corr_b;
        o[m][3] *= corr_b;
        const T* vcol = v_s + 8 * m + g;
#pragma unroll
        for (int j = 0; j < kKeys / 16; ++j) {
          const int key = 16 * j + 2 * t;
          const uint32_t b0 = pack16x2(vcol[key * (D + kPad)], vcol[(key + 1) * (D + kPad)]);
          const uint32_t b1 = pack16x2(vcol[(key + 8) * (D + kPad)], vcol[(key + 9) * (D + kPad)]);
          mma_16816<T>(o[m], pf[j], b0, b1);
        }
      }
    }
    __syncthreads();  // K, V and the key arrays are replaced by the next tile
  }

  // Each row's sum over its 4 lanes, then O / sum (zeros for a row that saw nothing).
  sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 1);
  sum_a += __shfl_xor_sync(0xffffffffu, sum_a, 2);
  sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 1);
  sum_b += __shfl_xor_sync(0xffffffffu, sum_b, 2);
  const float inv_a = sum_a > 0.0f ? 1.0f / sum_a : 0.0f, inv_b = sum_b > 0.0f ? 1.0f / sum_b : 0.0f;
  const bool vec = reinterpret_cast<uintptr_t>(out) % 8 == 0;
  for (int half = 0; half < 2; ++half) {
    const int r = half == 0 ? ra : rb;
    if (r >= rows) continue;
    const float inv = half == 0 ? inv_a : inv_b;
    float* dst = out + (t0 + r) * q_stride + static_cast<int64_t>(h) * D + 2 * t;
#pragma unroll
    for (int m = 0; m < D / 8; ++m) {
      const float x = o[m][2 * half] * inv, y = o[m][2 * half + 1] * inv;
      if (vec) {
        *reinterpret_cast<float2*>(dst + 8 * m) = make_float2(x, y);
      } else {
        dst[8 * m] = x;
        dst[8 * m + 1] = y;
      }
    }
  }
}

template <class T, int D>
Status launch(const float* q, const int32_t* q_pos, const void* k, const void* v, const int32_t* key_pos,
              const int32_t* key_count, const AttentionShape& s, float* out, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((s.tokens + kRows - 1) / kRows), static_cast<unsigned>(s.heads));
  attention_prefill_mma_kernel<T, D><<<grid, kThreads, 0, stream>>>(
      q, q_pos, static_cast<const T*>(k), static_cast<const T*>(v), key_pos, key_count, s, out);
  return cuda_launch_status("attention_prefill_mma_kernel");
}

}  // namespace

bool attention_prefill_mma_applies(const AttentionShape& s) {
  return (s.kv_type == KvType::kF16 || s.kv_type == KvType::kBF16) && s.tokens >= kPrefillTcMinTokens &&
         (s.head_dim == 64 || s.head_dim == 128) && s.heads > 0 && s.kv_heads > 0 && s.heads % s.kv_heads == 0 &&
         s.heads <= 65535 && (s.tokens + kRows - 1) / kRows <= INT_MAX;
}

Status attention_prefill_mma(const float* q, const int32_t* q_pos, const void* k, const void* v,
                             const int32_t* key_pos, const int32_t* key_count, const AttentionShape& s, float* out,
                             cudaStream_t stream) {
  if (!attention_prefill_mma_applies(s) && s.tokens != 0)
    return invalid_argument("attention_prefill_mma: needs a 16-bit cache, head_dim 64 or 128 and at least " +
                            std::to_string(kPrefillTcMinTokens) + " rows (" + std::string(kv_type_name(s.kv_type)) +
                            ", head_dim " + std::to_string(s.head_dim) + ", " + std::to_string(s.tokens) + " rows)");
  if (s.tokens == 0) return ok_status();
  const bool f16 = s.kv_type == KvType::kF16;
  if (s.head_dim == 64)
    return f16 ? launch<__half, 64>(q, q_pos, k, v, key_pos, key_count, s, out, stream)
               : launch<__nv_bfloat16, 64>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
  return f16 ? launch<__half, 128>(q, q_pos, k, v, key_pos, key_count, s, out, stream)
             : launch<__nv_bfloat16, 128>(q, q_pos, k, v, key_pos, key_count, s, out, stream);
}

}  // namespace qrt::kernels
