#include "kernels/attention/attention.hpp"

#include <algorithm>
#include "kernels/attention/kv_element.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"

namespace qrt::kernels {
namespace {

constexpr int kThreads = 128;  // 4 warps
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 32;     // keys per online-softmax step: one per lane of warp 0
constexpr int64_t kMaxBlocks = int64_t{1} << 30;

// Shared memory: q_s[head_dim] (the query row), acc[head_dim] (unnormalized output), p[kChunk] (scores, then
// probabilities of the current chunk), and the running max / denominator / correction.
//
// Per chunk of keys [j0, j0 + n):
//   1. each warp scores keys j0 + warp, j0 + warp + 4, ...: lanes split the dot product, a shuffle sums it;
//      a key that is not visible scores -inf.
//   2. warp 0 (lane c owns key j0 + c) takes the chunk max m_c, the new running max m' = max(m, m_c), turns the
//      scores into p = exp(s - m'), rescales the denominator by exp(m - m') and adds the chunk's sum.
//   3. every thread rescales its own acc[d] by the same factor and adds sum_c p[c] * v[j0 + c][d] over the chunk's
//      visible keys only (a ballot in step 2): a slot the query cannot see may hold anything, NaN included (a slot
//      not written yet), and 0 * NaN would poison the output; the CPU reference skips those slots the same way.
// While no key has been visible (m' = -inf) the chunk contributes nothing, so exp never sees -inf - -inf.
template <class T>
__global__ void __launch_bounds__(kThreads) attention_kernel(const float* __restrict__ q,
                                                             const int32_t* __restrict__ q_pos,
                                                             const T* __restrict__ k,
                                                             const T* __restrict__ v,
                                                             const int32_t* __restrict__ key_pos,
                                                             const int32_t* __restrict__ key_count,
                                                             AttentionShape s, float* __restrict__ out) {
  extern __shared__ float smem[];
  float* q_s = smem;                 // [head_dim]
  float* acc = smem + s.head_dim;    // [head_dim]
  float* p = acc + s.head_dim;       // [kChunk]
  __shared__ int64_t row_s[kChunk];  // the cache row of each key of the chunk
  __shared__ float run_max, run_denom, run_scale;
  __shared__ unsigned run_visible;  // bit c: key j0 + c of the current chunk is visible

  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int hd = s.head_dim;
  const int group = s.heads / s.kv_heads;
  const int64_t q_stride = static_cast<int64_t>(s.heads) * hd;
  const int64_t kv_stride = static_cast<int64_t>(s.kv_heads) * hd;
  const int64_t items = s.tokens * s.heads;
  const KvReader<T> kr = kv_reader(k, kv_stride), vr = kv_reader(v, kv_stride);
  const int64_t count = *key_count;
  const int64_t keys = count < 0 ? 0 : (count > s.capacity ? s.capacity : count);

  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    const int64_t t = item / s.heads;
    const int h = static_cast<int>(item % s.heads);
    const int64_t kv_off = static_cast<int64_t>(h / group) * hd;
    const float* qh = q + t * q_stride + static_cast<int64_t>(h) * hd;
    for (int d = threadIdx.x; d < hd; d += kThreads) {
      q_s[d] = qh[d];
      acc[d] = 0.0f;
    }
    if (threadIdx.x == 0) {
      run_max = s.sinks != nullptr ? s.sinks[h] : -INFINITY;  // the sink: a logit with a zero value
      run_denom = s.sinks != nullptr ? 1.0f : 0.0f;
    }
    const int64_t qp = q_pos[t];
    __syncthreads();

    for (int64_t j0 = 0; j0 < keys; j0 += kChunk) {
      const int n = static_cast<int>(keys - j0 < kChunk ? keys - j0 : kChunk);
      // 1. scores
      for (int c = warp; c < kChunk; c += kWarps) {
        float score = -INFINITY;
        if (c < n) {
          const int64_t row = kv_row(s.pages, j0 + c);
          if (lane == 0) row_s[c] = row;
          const int64_t dist = qp - static_cast<int64_t>(key_pos[row]);
          const bool visible = dist >= 0 && (s.sliding_window <= 0 || dist < s.sliding_window);
          if (visible) {
            float dot = 0.0f;
            const KvHead<T> kj = kr.head(row, kv_off);
            for (int d = lane; d < hd; d += 32) dot += q_s[d] * kj.at(d);
            score = soft_capped(warp_sum(dot) * s.scale, s.softcap);
          }
        }
        if (lane == 0) p[c] = score;
      }
      __syncthreads();
      // 2. online softmax bookkeeping (warp 0)
      if (warp == 0) {
        const float score = p[lane];
        const float chunk_max = warp_max(score);
        const float old_max = run_max;
        const float new_max = fmaxf(old_max, chunk_max);
        float prob = 0.0f;
        float scale_old = 1.0f;
        if (new_max != -INFINITY) {
          prob = expf(score - new_max);            // exp(-inf) = 0 for masked keys and the unused tail
          scale_old = expf(old_max - new_max);     // 0 when old_max = -inf
        }
        p[lane] = prob;
        const unsigned visible = __ballot_sync(kFullWarpMask, score != -INFINITY);
        const float chunk_sum = warp_sum(prob);
        __syncwarp();  // every lane has read run_max before lane 0 replaces it
        if (lane == 0) {
          run_denom = run_denom * scale_old + chunk_sum;
          run_max = new_max;
          run_scale = scale_old;
          run_visible = visible;
        }
      }
      __syncthreads();
      // 3. accumulate values
      const float scale_old = run_scale;
      const unsigned visible = run_visible;
      for (int d = threadIdx.x; d < hd; d += kThreads) {
        float a = acc[d] * scale_old;
        for (unsigned rest = visible; rest != 0; rest &= rest - 1) {
          const int c = __ffs(static_cast<int>(rest)) - 1;
          a += p[c] * vr.head(row_s[c], kv_off).at(d);
        }
        acc[d] = a;
      }
      __syncthreads();
    }

    const float denom = run_denom;
    float* oh = out + t * q_stride + static_cast<int64_t>(h) * hd;
    for (int d = threadIdx.x; d < hd; d += kThreads) oh[d] = denom > 0.0f ? acc[d] / denom : 0.0f;
    __syncthreads();  // q_s, acc and the running values are reset for the next item
  }
}

}  // namespace

uint64_t attention_shared_bytes(int head_dim) {
  return (2 * static_cast<uint64_t>(head_dim > 0 ? head_dim : 0) + kChunk) * sizeof(float);
}

Status attention(const float* q, const int32_t* q_pos, const void* k, const void* v, const int32_t* key_pos,
                 const int32_t* key_count, const AttentionShape& s, float* out, cudaStream_t stream) {
  if (s.tokens < 0 || s.capacity < 0 || s.heads <= 0 || s.kv_heads <= 0 || s.head_dim <= 0 ||
      s.heads % s.kv_heads != 0)
    return invalid_argument("attention: bad shape (tokens " + std::to_string(s.tokens) + ", capacity " +
                            std::to_string(s.capacity) + ", heads " + std::to_string(s.heads) + ", kv_heads " +
                            std::to_string(s.kv_heads) + ", head_dim " + std::to_string(s.head_dim) + ")");
  const int64_t items = s.tokens * s.heads;
  if (items == 0) return ok_status();
  const unsigned blocks = static_cast<unsigned>(items < kMaxBlocks ? items : kMaxBlocks);
  const size_t shared = attention_shared_bytes(s.head_dim);
  return with_kv_element(s.kv_type, [&](auto element) {
    using T = decltype(element);
    attention_kernel<T><<<blocks, kThreads, shared, stream>>>(q, q_pos, static_cast<const T*>(k),
                                                              static_cast<const T*>(v), key_pos, key_count, s, out);
    return cuda_launch_status("attention_kernel");
  });
}

namespace {

// One block per row; every thread copies a stride of the K and V rows.
template <class T>
__global__ void kv_write_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                const int32_t* __restrict__ slots, const int32_t* __restrict__ positions,
                                int64_t rows, int64_t kv_dim, T* __restrict__ cache_k, T* __restrict__ cache_v,
                                int32_t* __restrict__ cache_pos, int64_t capacity) {
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t slot = slots[row];
    if (slot < 0 || slot >= capacity) continue;
    for (int64_t i = threadIdx.x; i < kv_dim; i += blockDim.x) {
      cache_k[slot * kv_dim + i] = kv_from_float<T>(k[row * kv_dim + i]);
      if (cache_v != cache_k) cache_v[slot * kv_dim + i] = kv_from_float<T>(v[row * kv_dim + i]);  // else v is k
    }
    if (threadIdx.x == 0) cache_pos[slot] = positions[row];
  }
}

// A q8_0 cache: one warp per item (row, block of 32, K or V), the block's scale taken over the warp.
__global__ void kv_write_q8_0_kernel(const float* __restrict__ k, const float* __restrict__ v,
                                     const int32_t* __restrict__ slots, const int32_t* __restrict__ positions,
                                     int64_t rows, int64_t kv_dim, uint8_t* __restrict__ cache_k,
                                     uint8_t* __restrict__ cache_v, int32_t* __restrict__ cache_pos,
                                     int64_t capacity) {
  const int lane = threadIdx.x % 32;
  const int64_t blocks = kv_dim / kKvQ8Block, items = rows * blocks * 2;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t item = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32; item < items;
       item += warps) {
    const bool value = item % 2 == 1;
    const int64_t row = item / 2 / blocks, b = item / 2 % blocks;
    const int64_t slot = slots[row];
    if (slot < 0 || slot >= capacity || (value && cache_v == cache_k)) continue;  // the same for the whole warp
    const float x = (value ? v : k)[row * kv_dim + b * kKvQ8Block + lane];
    kv_store_q8_0_warp(x, (value ? cache_v : cache_k) + (slot * blocks + b) * kKvQ8BlockBytes, lane);
    if (!value && b == 0 && lane == 0) cache_pos[slot] = positions[row];
  }
}

}  // namespace

Status kv_write(const float* k, const float* v, const int32_t* slots, const int32_t* positions, int64_t rows,
                int64_t kv_dim, void* cache_k, void* cache_v, KvType cache_type, int32_t* cache_pos,
                int64_t capacity, cudaStream_t stream) {
  if (rows < 0 || kv_dim <= 0 || capacity < 0)
    return invalid_argument("kv_write: bad shape (rows " + std::to_string(rows) + ", kv_dim " +
                            std::to_string(kv_dim) + ", capacity " + std::to_string(capacity) + ")");
  if (!kv_row_fits(cache_type, kv_dim))
    return invalid_argument("kv_write: a q8_0 cache row of " + std::to_string(kv_dim) +
                            " elements is not whole blocks of 32");
  if (rows == 0) return ok_status();
  if (cache_type == KvType::kQ8_0) {
    const int64_t warps = rows * (kv_dim / kKvQ8Block) * 2;
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>((warps + 3) / 4, kMaxBlocks));
    kv_write_q8_0_kernel<<<blocks, 128, 0, stream>>>(k, v, slots, positions, rows, kv_dim,
                                                     static_cast<uint8_t*>(cache_k), static_cast<uint8_t*>(cache_v),
                                                     cache_pos, capacity);
    return cuda_launch_status("kv_write_q8_0_kernel");
  }
  const unsigned blocks = static_cast<unsigned>(rows < kMaxBlocks ? rows : kMaxBlocks);
  const int threads = static_cast<int>(kv_dim < 256 ? (kv_dim + 31) / 32 * 32 : 256);
  return with_kv_element(cache_type, [&](auto element) {
    using T = decltype(element);
    if constexpr (std::is_same_v<T, KvQ8_0>) {
      return internal_error("kv_write: q8_0 has its own kernel");
    } else {
      kv_write_kernel<T><<<blocks, threads, 0, stream>>>(k, v, slots, positions, rows, kv_dim,
                                                         static_cast<T*>(cache_k), static_cast<T*>(cache_v), cache_pos,
                                                         capacity);
      return cuda_launch_status("kv_write_kernel");
    }
  });
}

}  // namespace qrt::kernels
