// The int8 tensor-core GEMM (kernels/linear/gemm_q8_mma.hpp):
//   * q8_to_mma_tiles puts every byte where the m16n8k32 B fragment wants it (the layout written out on the host
//     from the PTX ISA's fragment tables, independently of the kernel), zeros past the batch;
//   * gemm_q8_mma per format against cpu::matmul fed with the activations as the limbs hold them (relative L2 within
//     1e-5: the integer products are exact, only float sums differ), for quantizer output and random code bytes,
//     batches 1..64 through the small-batch block (one to four 8-row tiles per launch, a launch per 32 rows above;
//     Q2_K, Q3_K, Q6_K, NVFP4 and the grid i-quants two tiles per launch), 65..256 through the shared-memory one
//     (gemm_q8_mma_tall.cuh: two and four 64-row batch blocks, the last holding 1, 5 or 8 tiles, the last tile 1
//     to 8 rows; rounds of 256 columns, and a last round of 128 for the formats with steps of 64 or 128 columns), rows
//     that end inside a 16-row tile and a 32- or 64-row block, several steps per warp; outputs poisoned with NaN first,
//     and a second run equal bit for bit (the warps' sums meet in a fixed order);
//   * a NaN in x reaches exactly its batch row's outputs; gemm_q8_mma_applies refuses what it cannot run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gemv_test_weights.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "q8_test_support.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;
using namespace qrt::kernels;
using test::DevicePtr;
using test::HostQ8;
using test::quantize_on_device;
using test::quantize_on_host;

// x quantized on the device and rearranged into tiles; the tiles (device) and the quantization (host copy).
struct DeviceTiles {
  DevicePtr q8, tiles;
  HostQ8 host;
};
::testing::AssertionResult make_tiles(const std::vector<float>& x, int64_t m, int64_t cols, DeviceTiles* out) {
  ::testing::AssertionResult quantized = quantize_on_device(x, m, cols, &out->host, &out->q8);
  if (!quantized) return quantized;
  void* raw = nullptr;
  const uint64_t bytes = q8_mma_tile_bytes(m, cols);
  if (cudaMalloc(&raw, bytes) != cudaSuccess) return ::testing::AssertionFailure() << "cudaMalloc";
  out->tiles = DevicePtr(raw);
  cudaMemset(raw, 0x5A, bytes);  // every byte must be written
  const Q8Activations q = q8_activations_at(out->q8.get(), m, cols);
  const Status s = q8_to_mma_tiles({q.codes, q.scales}, m, cols, raw, nullptr);
  if (!s.ok()) return ::testing::AssertionFailure() << s.to_string();
  return ::testing::AssertionSuccess();
}

TEST(Q8MmaTiles, EveryLaneFindsItsFragmentBytes) {
  QRT_REQUIRE_GPU();
  const int64_t m = 11, cols = 96, blocks = cols / 32;  // two batch tiles, the second holding 3 rows
  const std::vector<float> x = test::random_normal(static_cast<size_t>(m * cols), 31);
  DeviceTiles d;
  ASSERT_TRUE(make_tiles(x, m, cols, &d));
  std::vector<uint8_t> got(q8_mma_tile_bytes(m, cols));
  ASSERT_EQ(cudaMemcpy(got.data(), d.tiles.get(), got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(got.size(), static_cast<size_t>(2 * blocks * kMmaTileBytes));
  for (int64_t nt = 0; nt < 2; ++nt)
    for (int64_t kb = 0; kb < blocks; ++kb) {
      const uint8_t* tile = got.data() + (nt * blocks + kb) * kMmaTileBytes;
      for (int lane = 0; lane < 32; ++lane) {
        // B fragment: b0 = B[4t .. 4t+3][g], b1 = B[16+4t .. 16+4t+3][g] with B[k][n] = code of column k, row n.
        const int g = lane / 4, t = lane % 4;
        const int64_t n = nt * 8 + g;
        for (int limb = 0; limb < 2; ++limb)
          for (int i = 0; i < 8; ++i) {
            const int k = (i < 4 ? 4 * t : 16 + 4 * t) + i % 4;
            const int8_t want = n < m ? d.host.codes[static_cast<size_t>((n * blocks + kb) * 64 + 32 * limb + k)] : 0;
            ASSERT_EQ(static_cast<int8_t>(tile[256 * limb + 8 * lane + i]), want)
                << "tile " << nt << "/" << kb << " lane " << lane << " limb " << limb << " byte " << i;
          }
      }
      for (int r = 0; r < 8; ++r) {
        const int64_t n = nt * 8 + r;
        float s[4];
        std::memcpy(s, tile + 512 + 16 * r, 16);
        for (int c = 0; c < 4; ++c)
          EXPECT_EQ(s[c], n < m ? d.host.scales[static_cast<size_t>((n * blocks + kb) * 4 + c)] : 0.0f)
              << "tile " << nt << "/" << kb << " row " << r << " scale " << c;
      }
    }
}

struct MmaCase {
  FormatId id;
  int64_t rows;
  int64_t cols;
  std::vector<int> batches;
};

std::string case_name(const testing::TestParamInfo<MmaCase>& info) {
  return std::string(format_name(info.param.id)) + "_" + std::to_string(info.param.rows) + "x" +
         std::to_string(info.param.cols);
}

std::vector<MmaCase> mma_cases() {
  std::vector<MmaCase> cases;
  for (FormatId id : {FormatId::kQ4_0, FormatId::kQ8_0, FormatId::kQ4_K, FormatId::kQ5_K, FormatId::kQ6_K,
                      FormatId::kIQ4_NL, FormatId::kMXFP4_GGML, FormatId::kMXFP4, FormatId::kQ3_K, FormatId::kQ4_1,
                      FormatId::kQ5_0, FormatId::kQ5_1, FormatId::kQ2_K, FormatId::kIQ4_XS, FormatId::kTQ2_0,
                      FormatId::kNVFP4, FormatId::kIQ2_XXS, FormatId::kIQ2_XS, FormatId::kIQ2_S, FormatId::kIQ3_XXS,
                      FormatId::kIQ3_S, FormatId::kIQ1_S, FormatId::kIQ1_M, FormatId::kAFQ2, FormatId::kAFQ3,
                      FormatId::kAFQ4, FormatId::kAFQ5, FormatId::kAFQ6, FormatId::kAFQ8, FormatId::kTQ1_0}) {
    cases.push_back({id, 1, 256, {1, 2, 8, 9}});
    cases.push_back({id, 37, 1280, {2, 3, 8, 9, 16, 17, 31, 32, 33, 64}});  // steps of 8 warps past the first
    cases.push_back({id, 70, 2304, {5, 40}});  // 9 steps: warp 0 takes two, the others one; 9 rounds
    cases.push_back({id, 4099, 256, {2}});     // the last 32-row block holds 3 rows
    cases.push_back({id, 67, 512, {65, 100}});  // the last 64-row block holds 3 rows, the last batch block 1 or 5 tiles
    cases.push_back({id, 40, 256, {kMmaMaxBatch}});  // the largest batch: a launch per 16, 24 or 32 rows
  }
  // A width that ends half-way through the shared-memory block's 256-column round.
  for (FormatId id : {FormatId::kQ8_0, FormatId::kQ4_1, FormatId::kQ5_0, FormatId::kQ5_1, FormatId::kAFQ4,
                      FormatId::kAFQ8})
    cases.push_back({id, 40, 384, {65}});
  return cases;
}

class GemmQ8Mma : public testing::TestWithParam<MmaCase> {};

TEST_P(GemmQ8Mma, MatchesTheCpuReference) {
  QRT_REQUIRE_GPU();
  const MmaCase& c = GetParam();
  const QuantParams p = test::gemv_test_params(c.id);
  for (test::WeightKind kind : {test::WeightKind::kQuantized, test::WeightKind::kRandomBytes}) {
    SCOPED_TRACE(test::weight_kind_name(kind));
    const uint64_t seed = static_cast<uint64_t>(c.rows * 131 + c.cols) * 2 + (kind == test::WeightKind::kQuantized);
    auto q = test::make_test_weights(c.id, c.rows, c.cols, p, kind, seed);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    const QuantView hv = cpu::view_of(*q, c.rows, c.cols, p);
    const test::DeviceWeights device = test::upload_weights(*q, hv);
    ASSERT_TRUE(device);
    const QuantView& dv = device.view;
    ASSERT_TRUE(gemm_q8_mma_applies(c.id, dv));
    for (int m : c.batches) {
      SCOPED_TRACE("batch " + std::to_string(m));
      const std::vector<float> x = test::random_normal(static_cast<size_t>(m * c.cols), seed + 17 * m);
      const HostQ8 limbs = quantize_on_host(x);
      std::vector<float> want(static_cast<size_t>(m * c.rows));
      ASSERT_TRUE(cpu::matmul(c.id, hv, limbs.values.data(), m, want.data()).ok());
      DeviceTiles d;
      ASSERT_TRUE(make_tiles(x, m, c.cols, &d));
      void* y_raw = nullptr;
      ASSERT_EQ(cudaMalloc(&y_raw, want.size() * 4), cudaSuccess);
      DevicePtr dy(y_raw);
      std::vector<float> first(want.size()), second(want.size());
      for (std::vector<float>* out : {&first, &second}) {
        ASSERT_EQ(cudaMemset(y_raw, 0xFF, want.size() * 4), cudaSuccess);  // NaN until written
        const Status s = gemm_q8_mma(c.id, dv, d.tiles.get(), m, static_cast<float*>(y_raw), nullptr);
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_EQ(cudaMemcpy(out->data(), y_raw, want.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      }
      for (size_t k = 0; k < first.size(); ++k)
        ASSERT_TRUE(std::isfinite(first[k])) << "y[" << k / c.rows << ", " << k % c.rows << "] = " << first[k];
      EXPECT_LT(test::relative_l2(first.data(), want.data(), want.size()), 1e-5) << "against the limbs' values";
      EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 4), 0) << "two runs differ: a race";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GemmQ8Mma, testing::ValuesIn(mma_cases()), case_name);

TEST(GemmQ8MmaInputs, ANanInXReachesExactlyItsBatchRow) {
  QRT_REQUIRE_GPU();
  const int64_t rows = 20, cols = 512;
  for (const int m : {12, 70}) {  // the small-batch block and the shared-memory one
    SCOPED_TRACE("batch " + std::to_string(m));
    const QuantParams p = test::gemv_test_params(FormatId::kQ4_K);
    auto q = test::make_test_weights(FormatId::kQ4_K, rows, cols, p, test::WeightKind::kQuantized, 5);
    ASSERT_TRUE(q.ok());
    const test::DeviceWeights device = test::upload_weights(*q, cpu::view_of(*q, rows, cols, p));
    const QuantView& dv = device.view;
    std::vector<float> x = test::random_normal(static_cast<size_t>(m * cols), 6);
    x[static_cast<size_t>(9 * cols + 300)] = std::numeric_limits<float>::quiet_NaN();
    DeviceTiles d;
    ASSERT_TRUE(make_tiles(x, m, cols, &d));
    void* y = nullptr;
    ASSERT_EQ(cudaMalloc(&y, m * rows * 4), cudaSuccess);
    DevicePtr dy(y);
    ASSERT_TRUE(gemm_q8_mma(FormatId::kQ4_K, dv, d.tiles.get(), m, static_cast<float*>(y), nullptr).ok());
    std::vector<float> out(static_cast<size_t>(m * rows));
    ASSERT_EQ(cudaMemcpy(out.data(), y, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < m; ++i)
      for (int64_t r = 0; r < rows; ++r)
        EXPECT_EQ(std::isnan(out[static_cast<size_t>(i * rows + r)]), i == 9) << "batch row " << i << ", row " << r;
  }
}

TEST(GemmQ8MmaInputs, AppliesOnlyWhereItCanRun) {
  alignas(16) static uint8_t fake[4096];
  QuantView w;
  w.data = fake;
  w.rows = 4;
  w.cols = 256;
  for (FormatId id : {FormatId::kQ4_0, FormatId::kQ8_0, FormatId::kQ4_K, FormatId::kQ5_K, FormatId::kQ6_K,
                      FormatId::kIQ4_NL, FormatId::kMXFP4_GGML, FormatId::kQ3_K, FormatId::kQ4_1, FormatId::kQ5_0,
                      FormatId::kQ5_1, FormatId::kQ2_K, FormatId::kIQ4_XS, FormatId::kTQ2_0, FormatId::kIQ2_XXS,
                      FormatId::kIQ2_XS, FormatId::kIQ2_S, FormatId::kIQ3_XXS, FormatId::kIQ3_S, FormatId::kIQ1_S,
                      FormatId::kIQ1_M, FormatId::kTQ1_0})
    EXPECT_TRUE(gemm_q8_mma_applies(id, w)) << format_name(id);
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kMXFP4, w)) << "OCP MXFP4 without its scale bytes";
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kNVFP4, w)) << "NVFP4 without its scale bytes";
  QuantView ocp = w;
  ocp.scales = fake + 3001;  // E8M0 or E4M3 bytes: any address
  EXPECT_TRUE(gemm_q8_mma_applies(FormatId::kMXFP4, ocp));
  EXPECT_TRUE(gemm_q8_mma_applies(FormatId::kNVFP4, ocp));
  for (FormatId id : {FormatId::kHQQ4, FormatId::kF16, FormatId::kFP8})
    EXPECT_FALSE(gemm_q8_mma_applies(id, w)) << format_name(id) << ": no policy";
  QuantView afq = w;  // AFQ: its scales and biases, groups of a power of two from 32
  afq.params.group_size = 64;
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kAFQ4, afq)) << "AFQ without its scales and biases";
  afq.scales = fake + 2048;
  afq.biases = fake + 3072;
  EXPECT_TRUE(gemm_q8_mma_applies(FormatId::kAFQ4, afq));
  afq.params.group_size = 16;
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kAFQ4, afq)) << "groups of 16";
  afq.params.group_size = 64;  // scales and biases are read one aligned element at a time
  afq.params.scale_type = quant::ScalarType::kBF16;
  afq.biases = fake + 3073;
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kAFQ4, afq)) << "BF16 biases at an odd address";
  afq.biases = fake + 3074;
  EXPECT_TRUE(gemm_q8_mma_applies(FormatId::kAFQ4, afq));
  afq.params.scale_type = quant::ScalarType::kF32;
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kAFQ4, afq)) << "F32 biases 2 bytes past a 4-byte boundary";
  afq.params.scale_type = quant::ScalarType::kI8;
  afq.biases = fake + 3072;
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kAFQ4, afq)) << "scales that are not F32, F16 or BF16";
  QuantView narrow = w;
  narrow.cols = 128;  // Q8_0's step; not Q4_0's
  EXPECT_TRUE(gemm_q8_mma_applies(FormatId::kQ8_0, narrow));
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kQ4_0, narrow));
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kIQ3_S, narrow)) << "a grid i-quant's step, half a super-block";
  QuantView misaligned = w;
  misaligned.data = fake + 2;
  EXPECT_FALSE(gemm_q8_mma_applies(FormatId::kQ8_0, misaligned));
  const Status bad_batch = gemm_q8_mma(FormatId::kQ8_0, w, fake, kMmaMaxBatch + 1, reinterpret_cast<float*>(fake),
                                       nullptr);
  EXPECT_NE(bad_batch.to_string().find("batch 257 outside 1..256"), std::string::npos) << bad_batch.to_string();
  const Status bad_shape = gemm_q8_mma(FormatId::kQ4_0, narrow, fake, 2, reinterpret_cast<float*>(fake), nullptr);
  EXPECT_NE(bad_shape.to_string().find("gemm_q8_mma q4_0: no tensor-core kernel for [4, 128]"), std::string::npos)
      << bad_shape.to_string();
  EXPECT_FALSE(q8_to_mma_tiles({}, 2, 256, fake, nullptr).ok());
  const Status wide = q8_to_mma_tiles({reinterpret_cast<const int8_t*>(fake), reinterpret_cast<const float*>(fake)},
                                      kMmaMaxBatch + 1, 256, fake, nullptr);
  EXPECT_NE(wide.to_string().find("needs 1 to 256 rows"), std::string::npos) << wide.to_string();
}

}  // namespace
}  // namespace qrt
