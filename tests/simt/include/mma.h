// SIMT layer: the nvcuda::wmma subset qrt's tensor-core kernels use (m16n16k16, half and bf16 inputs, float
// accumulators). CUDA leaves the mapping of a tile's elements to the lanes' fragment elements unspecified, so here
// every lane holds the whole tile (row-major [rows][cols] in x[]): code that treats x[] uniformly (fill, scale,
// convert) behaves as on a GPU, and code that assumed a particular lane mapping would not be portable anyway. The
// *_sync functions are warp collectives: every lane of the warp must call them (a __syncwarp checks it), as CUDA
// requires. Each lane computes the whole product, in float with products of the exact inputs.
#pragma once

#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "simt/device.hpp"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K>
struct tile_shape;
template <int M, int N, int K>
struct tile_shape<matrix_a, M, N, K> {
  static constexpr int rows = M, cols = K;
};
template <int M, int N, int K>
struct tile_shape<matrix_b, M, N, K> {
  static constexpr int rows = K, cols = N;
};
template <int M, int N, int K>
struct tile_shape<accumulator, M, N, K> {
  static constexpr int rows = M, cols = N;
};

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the SIMT layer models the m16n16k16 shape only");
  static constexpr int rows = tile_shape<Use, M, N, K>::rows;
  static constexpr int cols = tile_shape<Use, M, N, K>::cols;
  static constexpr int num_elements = rows * cols;
  T x[num_elements];
};

template <class Use, int M, int N, int K, class T, class Layout>
inline void fill_fragment(fragment<Use, M, N, K, T, Layout>& f, T value) {
  for (T& e : f.x) e = value;
}

namespace detail {
template <class F, class P>
inline void load(F& f, const P* p, unsigned ldm, bool col, std::source_location where) {
  __syncwarp(0xffffffffu, where);
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c) f.x[r * F::cols + c] = col ? p[c * ldm + r] : p[r * ldm + c];
}
}  // namespace detail

// matrix_a / matrix_b: the layout is the fragment's type; ldm counts elements between rows (row_major) or columns.
template <class Use, int M, int N, int K, class T, class Layout>
inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout>& f, const T* p, unsigned ldm,
                             std::source_location where = std::source_location::current()) {
  static_assert(!std::is_same_v<Use, accumulator>, "an accumulator load names its memory layout");
  detail::load(f, p, ldm, std::is_same_v<Layout, col_major>, where);
}
template <int M, int N, int K, class T>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T>& f, const T* p, unsigned ldm, layout_t layout,
                             std::source_location where = std::source_location::current()) {
  detail::load(f, p, ldm, layout == mem_col_major, where);
}

template <int M, int N, int K, class T>
inline void store_matrix_sync(T* p, const fragment<accumulator, M, N, K, T>& f, unsigned ldm, layout_t layout,
                              std::source_location where = std::source_location::current()) {
  using F = fragment<accumulator, M, N, K, T>;
  __syncwarp(0xffffffffu, where);
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c) {
      T& dst = layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
      dst = f.x[r * F::cols + c];
    }
  __syncwarp(0xffffffffu, where);  // every lane's copy lands before any lane goes on (they are the same values)
}

// d = a · b + c over the 16x16x16 tile.
template <int M, int N, int K, class TI, class LA, class LB>
inline void mma_sync(fragment<accumulator, M, N, K, float>& d, const fragment<matrix_a, M, N, K, TI, LA>& a,
                     const fragment<matrix_b, M, N, K, TI, LB>& b, const fragment<accumulator, M, N, K, float>& c,
                     std::source_location where = std::source_location::current()) {
  __syncwarp(0xffffffffu, where);
  float out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float s = c.x[i * N + j];
      for (int k = 0; k < K; ++k) s += static_cast<float>(a.x[i * K + k]) * static_cast<float>(b.x[k * N + j]);
      out[i * N + j] = s;
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = out[i];
}

}  // namespace nvcuda::wmma
