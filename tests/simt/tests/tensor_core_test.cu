// nvcuda::wmma in the SIMT layer (mma.h): D = A · B + C for half and bf16 inputs, every load layout (row- and
// column-major A and B, the accumulator loaded and stored both ways, leading dimensions wider than the tile), against
// a double product of the same rounded inputs; two warps of a block working on their own tiles; and a warp where
// one lane does not call the collective is a fault, as on a GPU it is undefined.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>

#include <cmath>
#include <random>
#include <vector>

#include "simt_test_util.hpp"

namespace qrt::simt::test {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int kLd = 24;  // leading dimension of every tile in memory: wider than 16

// Warp w computes tile w: d[w] = a[w] · b[w] + c[w], with A and B read in the layouts named by the template and C
// loaded and D stored in `acc_layout`.
template <class T, class LayoutA, class LayoutB>
__global__ void mma_tiles(const T* a, const T* b, const float* c, float* d, wmma::layout_t acc_layout) {
  const int w = threadIdx.x / 32;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::load_matrix_sync(fa, a + w * 16 * kLd, kLd);
  wmma::load_matrix_sync(fb, b + w * 16 * kLd, kLd);
  wmma::load_matrix_sync(acc, c + w * 16 * kLd, kLd, acc_layout);
  wmma::mma_sync(acc, fa, fb, acc);
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= 2.0f;  // a uniform elementwise op on the fragment
  wmma::store_matrix_sync(d + w * 16 * kLd, acc, kLd, acc_layout);
}

__global__ void mma_with_a_missing_lane(const __half* a, float* d) {
  if (threadIdx.x == 5) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a, 16);
  d[threadIdx.x] = static_cast<float>(fa.x[0]);
}

template <class T>
void check_every_layout() {
  const int warps = 2, n = warps * 16 * kLd;
  std::mt19937_64 g(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<T> a(n), b(n);
  std::vector<float> c(n);
  for (int i = 0; i < n; ++i) {
    a[i] = T(dist(g));
    b[i] = T(dist(g));
    c[i] = dist(g);
  }
  DeviceArray<T> da(a), db(b);
  DeviceArray<float> dc(c);
  // Element (r, k) of tile w of a matrix stored row- or column-major with leading dimension kLd.
  auto at = [](const std::vector<T>& m, int w, int r, int k, bool col) {
    const T& e = col ? m[w * 16 * kLd + k * kLd + r] : m[w * 16 * kLd + r * kLd + k];
    return static_cast<double>(static_cast<float>(e));
  };
  for (bool col_a : {false, true})
    for (bool col_b : {false, true})
      for (wmma::layout_t acc : {wmma::mem_row_major, wmma::mem_col_major}) {
        DeviceArray<float> dd(std::vector<float>(n, 0.0f));
        auto run = [&](auto kernel) { kernel<<<1, 64>>>(da.ptr, db.ptr, dc.ptr, dd.ptr, acc); };
        using Row = wmma::row_major;
        using Col = wmma::col_major;
        if (col_a && col_b) run(mma_tiles<T, Col, Col>);
        if (col_a && !col_b) run(mma_tiles<T, Col, Row>);
        if (!col_a && col_b) run(mma_tiles<T, Row, Col>);
        if (!col_a && !col_b) run(mma_tiles<T, Row, Row>);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const std::vector<float> got = dd.download();
        const bool col_c = acc == wmma::mem_col_major;
        for (int w = 0; w < warps; ++w)
          for (int i = 0; i < 16; ++i)
            for (int j = 0; j < 16; ++j) {
              const int at_c = w * 16 * kLd + (col_c ? j * kLd + i : i * kLd + j);
              double want = c[at_c];
              for (int k = 0; k < 16; ++k) want += at(a, w, i, k, col_a) * at(b, w, k, j, col_b);
              ASSERT_NEAR(got[at_c], 2.0 * want, 1e-4 * (1.0 + std::fabs(want)))
                  << "warp " << w << " (" << i << ", " << j << ") A " << (col_a ? "col" : "row") << " B "
                  << (col_b ? "col" : "row") << " C/D " << (col_c ? "col" : "row");
            }
        // Outside the tiles (columns 16..23 of each row) nothing was written.
        for (int r = 0; r < warps * 16; ++r)
          for (int k = 16; k < kLd; ++k) ASSERT_EQ(got[r * kLd + k], 0.0f) << "row " << r << " column " << k;
      }
}

TEST(SimtTensorCores, HalfMmaInEveryLayout) { check_every_layout<__half>(); }
TEST(SimtTensorCores, Bf16MmaInEveryLayout) { check_every_layout<__nv_bfloat16>(); }

TEST(SimtTensorCoresDeathTest, ALaneMissingFromTheCollectiveIsAFault) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DeviceArray<__half> a(std::vector<__half>(256, __half(1.0f)));
  DeviceArray<float> d(32);
  EXPECT_DEATH(
      {
        mma_with_a_missing_lane<<<1, 32>>>(a.ptr, d.ptr);
        (void)cudaDeviceSynchronize();
      },
      "__syncwarp.*(exited|exits)|(exited|exits).*__syncwarp");
}

}  // namespace
}  // namespace qrt::simt::test
