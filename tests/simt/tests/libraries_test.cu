// The libraries the SIMT layer stands in for: cuBLAS GEMMs against a plain double-precision product, CUB's radix
// sort against std::stable_sort, NCCL collectives across ranks that are threads (each on its own device), and the
// half/bfloat16 conversions against qrt's own decoders.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cub/device/device_radix_sort.cuh>
#include <random>
#include <thread>
#include <vector>

#include "kernels/quant/common.hpp"
#include "simt_test_util.hpp"

namespace qrt::simt::test {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// ---- cuBLAS ----------------------------------------------------------------------------------------------------

TEST(SimtCublas, SgemmEveryTransposeAgainstADoubleProduct) {
  const int m = 37, n = 11, k = 70;
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  for (cublasOperation_t ta : {CUBLAS_OP_N, CUBLAS_OP_T})
    for (cublasOperation_t tb : {CUBLAS_OP_N, CUBLAS_OP_T}) {
      const int lda = (ta == CUBLAS_OP_N ? m : k) + 3, ldb = (tb == CUBLAS_OP_N ? k : n) + 1, ldc = m + 2;
      const auto a = random_floats(static_cast<size_t>(lda) * (ta == CUBLAS_OP_N ? k : m), 1);
      const auto b = random_floats(static_cast<size_t>(ldb) * (tb == CUBLAS_OP_N ? n : k), 2);
      auto c0 = random_floats(static_cast<size_t>(ldc) * n, 3);
      DeviceArray<float> da(a), db(b), dc(c0);
      const float alpha = 0.75f, beta = -0.5f;
      ASSERT_EQ(cublasSgemm(h, ta, tb, m, n, k, &alpha, da.ptr, lda, db.ptr, ldb, &beta, dc.ptr, ldc),
                CUBLAS_STATUS_SUCCESS);
      const auto got = dc.download();
      for (int j = 0; j < n; ++j)
        for (int i = 0; i < m; ++i) {
          double acc = 0;
          for (int l = 0; l < k; ++l) {
            const double av = ta == CUBLAS_OP_N ? a[i + l * lda] : a[l + i * lda];
            const double bv = tb == CUBLAS_OP_N ? b[l + j * ldb] : b[j + l * ldb];
            acc += av * bv;
          }
          const double want = alpha * acc + beta * c0[i + j * ldc];
          ASSERT_NEAR(got[i + j * ldc], want, 1e-4 * (1 + std::fabs(want))) << ta << tb << " " << i << "," << j;
        }
      EXPECT_EQ(got[m], c0[m]) << "the padding between columns is not written";
    }
  cublasDestroy(h);
}

TEST(SimtCublas, BetaZeroIgnoresWhatCHeldAndGemmExTakesBf16) {
  const int m = 8, n = 4, k = 16;
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  const auto a = random_floats(m * k, 4), b = random_floats(k * n, 5);
  std::vector<__nv_bfloat16> ab(a.begin(), a.end()), bb(b.begin(), b.end());
  DeviceArray<__nv_bfloat16> da(ab), db(bb);
  DeviceArray<float> dc(m * n);  // poisoned: NaN
  const float alpha = 1.0f, beta = 0.0f;
  ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, da.ptr, CUDA_R_16BF, m, db.ptr, CUDA_R_16BF, k,
                         &beta, dc.ptr, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  const auto got = dc.download();
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      double want = 0;
      for (int l = 0; l < k; ++l) want += static_cast<double>(float(ab[i + l * m])) * float(bb[l + j * k]);
      ASSERT_NEAR(got[i + j * m], want, 1e-5 * (1 + std::fabs(want)));
    }
  float x = 0;
  EXPECT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &alpha, dc.ptr, m - 1, dc.ptr, k, &beta, dc.ptr, m),
            CUBLAS_STATUS_INVALID_VALUE)
      << "lda below m";
  (void)x;
  cublasDestroy(h);
}

// ---- CUB -------------------------------------------------------------------------------------------------------

TEST(SimtCub, RadixSortKeysIsStableOnTheChosenBits) {
  const int n = 20000;
  std::mt19937_64 g(9);
  std::vector<uint64_t> keys(n);
  for (auto& k : keys) k = g();
  DeviceArray<uint64_t> in(keys), out(n);
  const int begin_bit = 8, end_bit = 24;
  size_t bytes = 0;
  ASSERT_EQ(cub::DeviceRadixSort::SortKeys(nullptr, bytes, in.ptr, out.ptr, n, begin_bit, end_bit), cudaSuccess);
  ASSERT_GT(bytes, 0u);
  DeviceArray<uint8_t> temp(bytes);
  size_t too_small = bytes - 1;
  EXPECT_EQ(cub::DeviceRadixSort::SortKeys(temp.ptr, too_small, in.ptr, out.ptr, n, begin_bit, end_bit),
            cudaErrorInvalidValue);
  ASSERT_EQ(cub::DeviceRadixSort::SortKeys(temp.ptr, bytes, in.ptr, out.ptr, n, begin_bit, end_bit), cudaSuccess);
  std::vector<uint64_t> want = keys;
  std::stable_sort(want.begin(), want.end(), [](uint64_t a, uint64_t b) {
    return ((a >> 8) & 0xffff) < ((b >> 8) & 0xffff);
  });
  EXPECT_EQ(out.download(), want);
}

// ---- NCCL ------------------------------------------------------------------------------------------------------

// `ranks` threads, each on its own device, run `body(rank, comm, stream)`.
template <class Body>
void on_ranks(int ranks, Body body) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, ranks, id, r), ncclSuccess);
      cudaStream_t s;
      ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
      body(r, comm, s);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      cudaStreamDestroy(s);
      ncclCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(SimtNccl, AllReduceAllGatherAndBroadcastAcrossThreadRanks) {
  for (int ranks : {2, 4}) {
    const size_t n = (size_t{1} << 19) + 3;  // two steps of the layer's 1 MiB slots
    std::vector<std::vector<float>> sums(ranks), gathered(ranks), maxes(ranks);
    std::vector<std::vector<int32_t>> casts(ranks);
    auto data = [](int r, size_t i) { return static_cast<float>((i % 1000) * 0.25 + r); };
    on_ranks(ranks, [&](int r, ncclComm_t comm, cudaStream_t s) {
      std::vector<float> mine(n);
      for (size_t i = 0; i < n; ++i) mine[i] = data(r, i);
      DeviceArray<float> buf(mine), mx(mine), all(n * ranks);
      ASSERT_EQ(ncclAllReduce(buf.ptr, buf.ptr, n, ncclFloat32, ncclSum, comm, s), ncclSuccess);
      ASSERT_EQ(ncclAllReduce(mx.ptr, mx.ptr, n, ncclFloat32, ncclMax, comm, s), ncclSuccess);
      ASSERT_EQ(ncclAllGather(buf.ptr, all.ptr, n, ncclFloat32, comm, s), ncclSuccess);
      DeviceArray<int32_t> ids(std::vector<int32_t>{r == 1 ? 42 : -1, 7});
      ASSERT_EQ(ncclBroadcast(ids.ptr, ids.ptr, 2, ncclInt32, 1, comm, s), ncclSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      sums[r] = buf.download();
      maxes[r] = mx.download();
      gathered[r] = all.download();
      casts[r] = ids.download();
    });
    for (int r = 0; r < ranks; ++r) {
      for (size_t i = 0; i < n; i += 997) {
        float want = 0;
        for (int q = 0; q < ranks; ++q) want += data(q, i);
        ASSERT_EQ(sums[r][i], want) << ranks << " ranks, rank " << r << " i " << i;
        ASSERT_EQ(maxes[r][i], data(ranks - 1, i));
        ASSERT_EQ(gathered[r][static_cast<size_t>(ranks - 1) * n + i], want);
      }
      EXPECT_EQ(sums[r], sums[0]) << "every rank holds the same bits";
      EXPECT_EQ(casts[r], (std::vector<int32_t>{42, 7}));
    }
  }
}

TEST(SimtNccl, HostBuffersAreRefused) {
  on_ranks(1, [](int, ncclComm_t comm, cudaStream_t s) {
    std::vector<float> host(8, 1.0f);
    EXPECT_EQ(ncclAllReduce(host.data(), host.data(), 8, ncclFloat32, ncclSum, comm, s), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("not device memory"), std::string::npos);
  });
}

// ---- half and bfloat16 -------------------------------------------------------------------------------------------

TEST(SimtHalf, EveryHalfConvertsAsQrtsDecoderAndBack) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float want = quant::fp16_to_f32(static_cast<uint16_t>(h));
    const float got = __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      continue;
    }
    ASSERT_EQ(quant::f32_to_bits(got), quant::f32_to_bits(want)) << h;
    ASSERT_EQ(__half_as_ushort(__float2half(want)), h) << "round trip of " << h;
  }
  // Halfway cases round to even; overflow saturates to infinity.
  EXPECT_EQ(__half_as_ushort(__float2half(1.0f + 1.0f / 2048)), 0x3C00u);
  EXPECT_EQ(__half_as_ushort(__float2half(1.0f + 3.0f / 2048)), 0x3C02u);
  EXPECT_EQ(__half_as_ushort(__float2half(70000.0f)), 0x7C00u);
}

TEST(SimtHalf, Bfloat16RoundsToNearestEvenAsQrtsEncoder) {
  std::mt19937 g(3);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = g();
    const float f = quant::bits_to_f32(bits);
    const uint16_t want = quant::f32_to_bf16(f);
    const uint16_t got = __bfloat16_as_ushort(__float2bfloat16(f));
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(__bfloat162float(__float2bfloat16(f))));
      continue;
    }
    ASSERT_EQ(got, want) << std::hex << bits;
  }
}

}  // namespace
}  // namespace qrt::simt::test
