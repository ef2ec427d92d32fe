// The split decode kernels' view of their query rows (attention_split.cu, attention_latent.cu): each row's key
// count and block table (its own when the rows are many sequences of one pool, AttentionShape::table_stride), and
// the keys of each split for the current count.
#pragma once

#include <cstdint>

#include "kernels/attention/attention.hpp"

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

}  // namespace qrt::kernels
