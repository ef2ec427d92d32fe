#include <mma.h>

#include <climits>

#include "kernels/attention/attention_prefill_common.cuh"
#include "kernels/attention/attention_prefill_tc.hpp"
#include "kernels/attention/kv_element.cuh"
#include "kernels/cuda/cuda_check.hpp"

namespace qrt::kernels {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kRows = 64;    // query rows per block: 16 per warp
constexpr int kKeys = 64;    // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxHeadDim = 256;

// The shared-memory layout for head dimension d (byte offsets; every region starts on 128 bytes, as wmma's loads
// and stores need 32-byte aligned tiles).
struct Layout {
  uint64_t q, k, v, s, p, o, row_max, row_sum, q_pos, key_pos, key_live, total;
};
__host__ __device__ constexpr uint64_t round_up(uint64_t x) { return (x + 127) / 128 * 128; }
__host__ __device__ constexpr Layout layout_for(int d) {
  Layout l{};
  l.q = 0;                                               // Q rows: [kRows][d], 16-bit
  l.k = l.q + round_up(uint64_t{kRows} * d * 2);         // the K tile: [kKeys][d], 16-bit
  l.v = l.k + round_up(uint64_t{kKeys} * d * 2);         // the V tile: [kKeys][d], 16-bit
  l.s = l.v + round_up(uint64_t{kKeys} * d * 2);         // scores: [kRows][kKeys], fp32
  l.p = l.s + round_up(uint64_t{kRows} * kKeys * 4);     // probabilities: [kRows][kKeys], 16-bit
  l.o = l.p + round_up(uint64_t{kRows} * kKeys * 2);     // unnormalized output: [kRows][d], fp32
  l.row_max = l.o + round_up(uint64_t{kRows} * d * 4);   // [kRows] fp32 each
  l.row_sum = l.row_max + round_up(kRows * 4);
  l.q_pos = l.row_sum + round_up(kRows * 4);             // [kRows] int32
  l.key_pos = l.q_pos + round_up(kRows * 4);             // [kKeys] int32
  l.key_live = l.key_pos + round_up(kKeys * 4);          // [kKeys] bytes
  l.total = l.key_live + round_up(kKeys);
  return l;
}

// grid (query tiles, heads). T: the cache's 16-bit type, which Q and P are rounded to for the products.
// Per key tile:
//   1. the block decides whether any of its queries can see a key of the tile (else skips it), and loads the K and V
//      rows (load_kv_tile);
//   2. warp w computes S = Q·Kᵀ for its 16 rows (4 tiles of 16 keys);
//   3. two lanes per row mask S by position and window, take the new running max, write P = exp(S - max) in T,
//      rescale the row's sum and its O by exp(old max - new max);
//   4. warp w adds P·V to its 16 rows of O (O loaded into the accumulator and stored back per 16 columns).
template <class T>
__global__ void __launch_bounds__(kThreads) attention_prefill_tc_kernel(
    const float* __restrict__ q, const int32_t* __restrict__ q_pos, const T* __restrict__ k, const T* __restrict__ v,
    const int32_t* __restrict__ key_pos, const int32_t* __restrict__ key_count, AttentionShape s,
    float* __restrict__ out) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int d = s.head_dim;
  const Layout l = layout_for(d);
  T* q_s = reinterpret_cast<T*>(smem + l.q);
  T* k_s = reinterpret_cast<T*>(smem + l.k);
  T* v_s = reinterpret_cast<T*>(smem + l.v);
  float* s_s = reinterpret_cast<float*>(smem + l.s);
  T* p_s = reinterpret_cast<T*>(smem + l.p);
  float* o_s = reinterpret_cast<float*>(smem + l.o);
  float* row_max = reinterpret_cast<float*>(smem + l.row_max);
  float* row_sum = reinterpret_cast<float*>(smem + l.row_sum);
  int32_t* q_pos_s = reinterpret_cast<int32_t*>(smem + l.q_pos);
  int32_t* key_pos_s = reinterpret_cast<int32_t*>(smem + l.key_pos);
  unsigned char* key_live = smem + l.key_live;
  __shared__ int32_t block_q_min, block_q_max;

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int h = blockIdx.y, group = s.heads / s.kv_heads;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int rows = static_cast<int>(s.tokens - t0 < kRows ? s.tokens - t0 : kRows);
  const int64_t q_stride = static_cast<int64_t>(s.heads) * d, kv_stride = static_cast<int64_t>(s.kv_heads) * d;
  const int64_t kv_off = static_cast<int64_t>(h / group) * d;
  const int64_t count = *key_count;
  const int64_t keys = count < 0 ? 0 : (count > s.capacity ? s.capacity : count);

  // Q rows (zero past the last token; such rows see nothing), O = 0, running max -inf, sums 0. Four columns per
  // step (d is a multiple of 16), so one division per four elements and float4 loads where q is 16-byte aligned.
  const bool q_vec = reinterpret_cast<uintptr_t>(q) % 16 == 0;
  for (int i = 4 * tid; i < kRows * d; i += 4 * kThreads) {
    const int r = i / d;
    const float* src = q + (t0 + r) * q_stride + static_cast<int64_t>(h) * d + i % d;
    float4 x = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < rows) x = q_vec ? *reinterpret_cast<const float4*>(src) : make_float4(src[0], src[1], src[2], src[3]);
    q_s[i] = kv_from_float<T>(x.x);
    q_s[i + 1] = kv_from_float<T>(x.y);
    q_s[i + 2] = kv_from_float<T>(x.z);
    q_s[i + 3] = kv_from_float<T>(x.w);
    *reinterpret_cast<float4*>(o_s + i) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  for (int r = tid; r < kRows; r += kThreads) {
    q_pos_s[r] = r < rows ? q_pos[t0 + r] : -1;
    row_max[r] = s.sinks != nullptr ? s.sinks[h] : -INFINITY;  // the sink: a logit with a zero value
    row_sum[r] = s.sinks != nullptr ? 1.0f : 0.0f;
  }
  __syncthreads();
  if (tid == 0) position_range(q_pos_s, 0, rows, &block_q_min, &block_q_max);
  __syncthreads();
  const int64_t q_min = block_q_min, q_max = block_q_max;

  for (int64_t j0 = 0; j0 < keys; j0 += kKeys) {
    const int n = static_cast<int>(keys - j0 < kKeys ? keys - j0 : kKeys);
    // 1. which keys of the tile some query of the block may see
    const int useful = mark_tile_keys<kKeys>(key_pos, s, j0, n, q_min, q_max, key_pos_s, key_live);
    if (!__syncthreads_or(useful)) continue;  // the whole block agrees: nothing here for any of its rows
    load_kv_tile<kKeys, kThreads>(k, v, j0, kv_stride, kv_off, d, d, s.pages, key_live, k_s, v_s);
    __syncthreads();

    // 2. S = Q·Kᵀ for rows [16 warp, 16 warp + 16)
    const int r0 = 16 * warp;
    for (int nb = 0; nb < kKeys / 16; ++nb) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::fill_fragment(acc, 0.0f);
      for (int kb = 0; kb < d / 16; ++kb) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;  // Kᵀ: key rows are B's columns
        wmma::load_matrix_sync(a, q_s + r0 * d + 16 * kb, d);
        wmma::load_matrix_sync(b, k_s + 16 * nb * d + 16 * kb, d);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(s_s + r0 * kKeys + 16 * nb, acc, kKeys, wmma::mem_row_major);
    }
    __syncwarp();

    // 3. online softmax: lanes r and r + 16 share row r0 + r, 32 keys and half of O's columns each
    {
      const int r = r0 + lane % 16, half = lane / 16;
      const int32_t qp = q_pos_s[r];
      float* srow = s_s + r * kKeys;
      float m = -INFINITY;
      for (int c = 32 * half; c < 32 * half + 32; ++c) {
        const int64_t dist = static_cast<int64_t>(qp) - key_pos_s[c];
        const bool visible = key_live[c] != 0 && dist >= 0 && (s.sliding_window <= 0 || dist < s.sliding_window);
        const float score = visible ? soft_capped(srow[c] * s.scale, s.softcap) : -INFINITY;
        srow[c] = score;
        m = fmaxf(m, score);
      }
      const float m_old = row_max[r];
      m = fmaxf(fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 16)), m_old);
      const float correction = m == -INFINITY ? 1.0f : expf(m_old - m);  // 0 while nothing was visible before
      float sum = 0.0f;
      for (int c = 32 * half; c < 32 * half + 32; ++c) {
        const T p = kv_from_float<T>(srow[c] == -INFINITY ? 0.0f : expf(srow[c] - m));
        p_s[r * kKeys + c] = p;
        sum += kv_to_float(p);  // the rounded probability, as P·V uses it
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 16);
      float* orow = o_s + static_cast<int64_t>(r) * d;
      for (int c = half * (d / 2); c < (half + 1) * (d / 2); ++c) orow[c] *= correction;
      __syncwarp();  // both lanes have read row_max[r] before one replaces it
      if (half == 0) {
        row_sum[r] = row_sum[r] * correction + sum;
        row_max[r] = m;
      }
    }
    __syncwarp();

    // 4. O += P·V for the warp's rows, 16 output columns at a time
    for (int db = 0; db < d / 16; ++db) {
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      wmma::load_matrix_sync(acc, o_s + r0 * d + 16 * db, d, wmma::mem_row_major);
      for (int kb = 0; kb < kKeys / 16; ++kb) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, p_s + r0 * kKeys + 16 * kb, kKeys);
        wmma::load_matrix_sync(b, v_s + 16 * kb * d + 16 * db, d);
        wmma::mma_sync(acc, a, b, acc);
      }
      wmma::store_matrix_sync(o_s + r0 * d + 16 * db, acc, d, wmma::mem_row_major);
    }
    __syncthreads();  // K, V and the key arrays are replaced by the next tile
  }

  for (int i = 4 * tid; i < rows * d; i += 4 * kThreads) {
    const int r = i / d;
    const float sum = row_sum[r];
    const float scale = sum > 0.0f ? 1.0f / sum : 0.0f;
    const float4 o = *reinterpret_cast<const float4*>(o_s + i);
    float* dst = out + (t0 + r) * q_stride + static_cast<int64_t>(h) * d + i % d;
    const float4 y = make_float4(o.x * scale, o.y * scale, o.z * scale, o.w * scale);
    if (reinterpret_cast<uintptr_t>(out) % 16 == 0) {
      *reinterpret_cast<float4*>(dst) = y;
    } else {
      dst[0] = y.x;
      dst[1] = y.y;
      dst[2] = y.z;
      dst[3] = y.w;
    }
  }
}

}  // namespace

uint64_t attention_prefill_tc_shared_bytes(int head_dim) { return layout_for(head_dim > 0 ? head_dim : 0).total; }

bool attention_prefill_tc_applies(const AttentionShape& s, uint64_t shared_optin) {
  return (s.kv_type == KvType::kF16 || s.kv_type == KvType::kBF16) && s.tokens >= kPrefillTcMinTokens &&
         s.head_dim > 0 && s.head_dim % 16 == 0 && s.head_dim <= kMaxHeadDim && s.heads > 0 && s.kv_heads > 0 &&
         s.heads % s.kv_heads == 0 && s.heads <= 65535 && (s.tokens + kRows - 1) / kRows <= INT_MAX &&
         attention_prefill_tc_shared_bytes(s.head_dim) <= shared_optin;
}

Status attention_prefill_tc(const float* q, const int32_t* q_pos, const void* k, const void* v, const int32_t* key_pos,
                            const int32_t* key_count, const AttentionShape& s, float* out, cudaStream_t stream) {
  if ((s.kv_type != KvType::kF16 && s.kv_type != KvType::kBF16) || s.head_dim <= 0 || s.head_dim % 16 != 0 || s.head_dim > kMaxHeadDim ||
      s.tokens < 0 || s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads != 0)
    return invalid_argument("attention_prefill_tc: needs a 16-bit cache and head_dim a multiple of 16 up to 256 (" +
                            std::string(kv_type_name(s.kv_type)) + ", head_dim " + std::to_string(s.head_dim) + ")");
  if (s.tokens == 0) return ok_status();
  const uint64_t shared = attention_prefill_tc_shared_bytes(s.head_dim);
  const dim3 grid(static_cast<unsigned>((s.tokens + kRows - 1) / kRows), static_cast<unsigned>(s.heads));
  return with_kv_element(s.kv_type, [&](auto element) -> Status {
    using T = decltype(element);
    if constexpr (!std::is_same_v<T, __half> && !std::is_same_v<T, __nv_bfloat16>) {
      return invalid_argument("attention_prefill_tc: not a 16-bit cache");
    } else {
      const auto kernel = attention_prefill_tc_kernel<T>;
      QRT_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
      kernel<<<grid, kThreads, shared, stream>>>(q, q_pos, static_cast<const T*>(k), static_cast<const T*>(v), key_pos,
                                                 key_count, s, out);
      return cuda_launch_status("attention_prefill_tc_kernel");
    }
  });
}

}  // namespace qrt::kernels
