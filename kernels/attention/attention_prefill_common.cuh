// What the two prompt-attention kernels (attention_prefill_tc.cu, attention_prefill_mma.cu) share: the range of a
// block's query positions; and, for the shared-memory kernel, which keys of a tile some query of the block may see
// and the copy of a K/V tile into shared memory (the register kernel stages its tiles a tile ahead with cp.async).
#pragma once

#include <climits>
#include <cstdint>

#include "kernels/attention/attention.hpp"
#include "kernels/attention/kv_element.cuh"

namespace qrt::kernels {

// The least and greatest of positions pos[first .. last) (INT_MAX and INT_MIN when the range is empty).
__device__ __forceinline__ void position_range(const int32_t* pos, int first, int last, int32_t* lo, int32_t* hi) {
  int32_t a = INT_MAX, b = INT_MIN;
  for (int r = first; r < last; ++r) {
    a = pos[r] < a ? pos[r] : a;
    b = pos[r] > b ? pos[r] : b;
  }
  *lo = a;
  *hi = b;
}

// Threads 0 .. Keys - 1 read the positions of keys j0 .. j0 + n - 1 into key_pos_s and mark in key_live those that a
// query at a position in [q_min, q_max] may see (causal, inside the window); returns the thread's mark, for the
// block's __syncthreads_or.
template <int Keys>
__device__ __forceinline__ int mark_tile_keys(const int32_t* __restrict__ key_pos, const AttentionShape& s, int64_t j0,
                                              int n, int64_t q_min, int64_t q_max, int32_t* key_pos_s,
                                              unsigned char* key_live) {
  const int tid = static_cast<int>(threadIdx.x);
  if (tid >= Keys) return 0;
  const int32_t kp = tid < n ? key_pos[kv_row(s.pages, j0 + tid)] : 0;
  const int useful = tid < n && kp <= q_max && (s.sliding_window <= 0 || kp > q_min - s.sliding_window);
  key_pos_s[tid] = kp;
  key_live[tid] = static_cast<unsigned char>(useful);
  return useful;
}

// Copies one tile of Keys K and V rows (head offset kv_off, d columns) into shared memory, row c at c · row_stride
// elements (d, or more to pad rows apart in the banks), zeroing the rows no query of the block can see (unwritten
// slots may hold NaN, and 0 · NaN would poison the products). 16-byte vectors of 8 elements where the cache is
// 16-byte aligned (kv_stride, kv_off, d and row_stride are multiples of 8), four of them per thread loaded before
// any is stored, so a thread has eight loads in flight: with the element-wise loop before, each load waited for the
// previous one and a tile took about 70 µs on an H100.
template <int Keys, int Threads, class T>
__device__ __forceinline__ void load_kv_tile(const T* __restrict__ k, const T* __restrict__ v, int64_t j0,
                                             int64_t kv_stride, int64_t kv_off, int d, int row_stride,
                                             const KvPages& pages, const unsigned char* key_live, T* k_s, T* v_s) {
  constexpr int kUnroll = 4;
  const int tid = threadIdx.x;
  if (reinterpret_cast<uintptr_t>(k) % 16 == 0 && reinterpret_cast<uintptr_t>(v) % 16 == 0) {
    const int vectors = Keys * d / 8;
    for (int i0 = tid; i0 < vectors; i0 += kUnroll * Threads) {
      uint4 kr[kUnroll], vr[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * Threads;
        kr[u] = vr[u] = make_uint4(0u, 0u, 0u, 0u);  // +0.0 in both 16-bit types
        if (i < vectors) {
          const int c = 8 * i / d;
          if (key_live[c] != 0) {
            const int64_t at = kv_row(pages, j0 + c) * kv_stride + kv_off + (8 * i) % d;
            kr[u] = *reinterpret_cast<const uint4*>(k + at);
            vr[u] = *reinterpret_cast<const uint4*>(v + at);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * Threads;
        if (i < vectors) {
          const int at = (8 * i / d) * row_stride + (8 * i) % d;
          *reinterpret_cast<uint4*>(k_s + at) = kr[u];
          *reinterpret_cast<uint4*>(v_s + at) = vr[u];
        }
      }
    }
    return;
  }
  for (int i = tid; i < Keys * d; i += Threads) {
    const int c = i / d;
    const int64_t at = kv_row(pages, j0 + c) * kv_stride + kv_off + i % d;
    const bool live = key_live[c] != 0;
    k_s[c * row_stride + i % d] = live ? k[at] : kv_from_float<T>(0.0f);
    v_s[c * row_stride + i % d] = live ? v[at] : kv_from_float<T>(0.0f);
  }
}

}  // namespace qrt::kernels
