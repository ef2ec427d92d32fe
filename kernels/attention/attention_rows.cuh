// What the split decode kernels share (attention_split.cu, attention_latent.cu): each query row's key count and
// block table (its own when the rows are many sequences of one pool, AttentionShape::table_stride), the keys of each
// split for the current count, the softmax over a split's scores, and the merge's weights of the splits.
#pragma once

#include <cstdint>

#include "kernels/attention/attention.hpp"
#include "kernels/cuda/kernel_utils.cuh"

namespace qrt::kernels {

__device__ __forceinline__ int64_t clamp_keys(const int32_t* key_count, int64_t capacity) {
  const int64_t n = *key_count;
  return n < 0 ? 0 : (n > capacity ? capacity : n);
}

// Query row t's key count and block table.
__device__ __forceinline__ const int32_t* row_key_count(const int32_t* key_count, const AttentionShape& s, int64_t t) {
  return s.table_stride > 0 ? key_count + t : key_count;
}
__device__ __forceinline__ KvPages row_pages(const AttentionShape& s, int64_t t) {
  KvPages pages = s.pages;
  if (s.table_stride > 0) pages.table += t * s.table_stride;
  return pages;
}

// Keys per split for the current count: the count spread evenly over the splits, in whole warps' worth of keys.
__device__ __forceinline__ int64_t split_chunk(int64_t keys, int splits) {
  const int64_t per = (keys + splits - 1) / splits;
  return per < 32 ? 32 : (per + 31) / 32 * 32;
}

// Where a block of the latent kernels (attention_latent.cu, attention_latent_mma.cu) stands: grid (split, query row,
// block of heads_per_block query heads); its heads, and its split's keys j0 .. j0 + n - 1 of the row's count (n = 0
// for a split past the keys).
struct LatentBlock {
  int split;
  int64_t t;
  int first_head, heads;
  int64_t keys, j0;
  int n;
  KvPages pages;
};
__device__ __forceinline__ LatentBlock latent_block(const AttentionShape& s, const int32_t* key_count, int splits,
                                                    int heads_per_block) {
  LatentBlock b;
  b.split = static_cast<int>(blockIdx.x);
  b.t = blockIdx.y;
  b.first_head = static_cast<int>(blockIdx.z) * heads_per_block;
  b.heads = s.heads - b.first_head < heads_per_block ? s.heads - b.first_head : heads_per_block;
  b.keys = clamp_keys(row_key_count(key_count, s, b.t), s.capacity);
  b.pages = row_pages(s, b.t);
  const int64_t chunk = split_chunk(b.keys, splits);
  b.j0 = b.split * chunk;
  b.n = b.j0 >= b.keys ? 0 : static_cast<int>(b.keys - b.j0 < chunk ? b.keys - b.j0 : chunk);
  return b;
}

// A split's scores of `heads` query heads (p[g][0, n), -inf for invisible keys) become exp(score - max) in place,
// with the max and the sum per head in head_max / head_sum; warp g takes heads g, g + kBlockWarps, ....
template <int kBlockWarps>
__device__ __forceinline__ void split_softmax(float* p, int n, int chunk_capacity, int heads, float* head_max,
                                              float* head_sum) {
  const int lane = threadIdx.x % 32;
  for (int g = threadIdx.x / 32; g < heads; g += kBlockWarps) {
    float* pg = p + g * chunk_capacity;
    float m = -INFINITY;
    for (int c = lane; c < n; c += 32) m = fmaxf(m, pg[c]);
    m = warp_max(m);
    float sum = 0.0f;
    for (int c = lane; c < n; c += 32) {
      const float e = m == -INFINITY ? 0.0f : expf(pg[c] - m);  // exp(-inf - m) = 0 for invisible keys
      pg[c] = e;
      sum += e;
    }
    sum = warp_sum(sum);
    if (lane == 0) {
      head_max[g] = m;
      head_sum[g] = sum;
    }
  }
}

// The merge's weights of one (query row, head) over the splits [0, used) that held keys, m / l their maxima and
// sums: weight[b] = exp(m_b - M) / (sum_b l_b exp(m_b - M) + exp(sink - M)), M the largest of them and the sink (the
// sink adds to the denominator only; -inf: none); all zero when no key was visible. A block of kBlockThreads
// threads; warp_top / warp_denom are shared scratch of a float per warp. Ends synchronized.
template <int kBlockThreads>
__device__ __forceinline__ void merge_weights(const float* m, const float* l, int used, float sink, float* weight,
                                              float* warp_top, float* warp_denom) {
  constexpr int kBlockWarps = kBlockThreads / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float top = -INFINITY;
  for (int b = threadIdx.x; b < used; b += kBlockThreads) top = fmaxf(top, m[b]);
  top = warp_max(top);
  if (lane == 0) warp_top[warp] = top;
  __syncthreads();
  top = warp_top[0];
  for (int w = 1; w < kBlockWarps; ++w) top = fmaxf(top, warp_top[w]);
  top = fmaxf(top, sink);
  float denom = 0.0f;
  for (int b = threadIdx.x; b < used; b += kBlockThreads) {
    const float e = (m[b] == -INFINITY || top == -INFINITY) ? 0.0f : expf(m[b] - top);
    weight[b] = e;
    denom += l[b] * e;
  }
  denom = warp_sum(denom);
  if (lane == 0) warp_denom[warp] = denom;
  __syncthreads();
  denom = sink == -INFINITY ? 0.0f : expf(sink - top);
  for (int w = 0; w < kBlockWarps; ++w) denom += warp_denom[w];
  for (int b = threadIdx.x; b < used; b += kBlockThreads) weight[b] = denom > 0.0f ? weight[b] / denom : 0.0f;
  __syncthreads();
}

}  // namespace qrt::kernels
