// The integer-dot decode GEMV (kernels/linear/gemv_dp4a.hpp) and its activation quantizer:
//   * quantize_q8_activations equals the host definition (quantize_q8_block) bit for bit, on Gaussian rows of
//     several magnitudes, an all-zero block, denormals, and blocks holding NaN or infinity;
//   * gemv_dp4a per format (AFQ with groups of 32/64/128 and F16/BF16/F32 scales) against cpu::matmul fed with
//     the activations as the two limbs hold them (within 1e-5, i.e. the integer products are exact and only the
//     float sums differ) and against the float x (each output within Σ |W| · |limbs - x|, what the limbs' error
//     can move it), for quantizer output and random code bytes, batch 1..8, rows that select one and two rows per
//     block, rows ending at odd 2-byte offsets (Q4_0, Q8_0, Q3_K, Q6_K), long rows; outputs
//     poisoned with NaN before each run and a second run equal bit for bit;
//   * a NaN in x reaches exactly the outputs of its batch row; gemv_dp4a_applies refuses what it cannot run.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gemv_test_weights.hpp"
#include "q8_test_support.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/linear/gemv_dp4a.hpp"
#include "kernels/linear/q8_activations.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;
using namespace qrt::kernels;

using test::DevicePtr;
using test::HostQ8;
using test::quantize_on_device;
using test::quantize_on_host;

TEST(Q8Activations, DeviceQuantizerEqualsTheHostDefinitionBitForBit) {
  QRT_REQUIRE_GPU();
  const int64_t m = 3, cols = 640;
  std::vector<float> x = test::random_normal(static_cast<size_t>(m * cols), 11);
  for (int64_t j = 0; j < cols; ++j) x[static_cast<size_t>(cols + j)] *= 1e3f;     // row 1 large
  for (int64_t j = 0; j < cols; ++j) x[static_cast<size_t>(2 * cols + j)] *= 1e-3f;  // row 2 small
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(32 + j)] = 0.0f;               // an all-zero block
  for (int j = 0; j < 32; ++j) x[static_cast<size_t>(64 + j)] = 1e-41f * static_cast<float>(j - 16);  // denormals
  x[100] = std::numeric_limits<float>::quiet_NaN();
  x[200] = -std::numeric_limits<float>::infinity();
  HostQ8 got;
  ASSERT_TRUE(quantize_on_device(x, m, cols, &got));
  const HostQ8 want = quantize_on_host(x);
  EXPECT_EQ(std::memcmp(got.codes.data(), want.codes.data(), want.codes.size()), 0);
  for (size_t i = 0; i < want.scales.size(); ++i) {
    if (std::isnan(want.scales[i])) {
      EXPECT_TRUE(std::isnan(got.scales[i])) << "scale " << i;
    } else {
      EXPECT_EQ(got.scales[i], want.scales[i]) << "scale " << i;
    }
  }
  // The host definition itself: limbs within max|x| / 64516 of x, NaN scale for the blocks with NaN or infinity.
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f;
    bool finite = true;
    for (int j = 0; j < 32; ++j) {
      finite = finite && std::isfinite(x[b * 32 + j]);
      amax = std::max(amax, std::fabs(x[b * 32 + j]));
    }
    if (!finite) {
      EXPECT_TRUE(std::isnan(want.scales[b * 4])) << "block " << b;
      continue;
    }
    if (amax < 1e-30f) continue;  // denormal scales lose the bound; the bit-for-bit comparison above still holds
    for (int j = 0; j < 32; ++j)
      EXPECT_LE(std::fabs(want.values[b * 32 + j] - x[b * 32 + j]), amax / 64000.0f) << b << " " << j;
  }
}

struct Dp4aCase {
  FormatId id;
  int64_t rows;
  int64_t cols;
  bool all_batches;
  int group_size = 64;                         // AFQ
  ScalarType scale_type = ScalarType::kBF16;  // AFQ
};

std::string case_name(const testing::TestParamInfo<Dp4aCase>& info) {
  const Dp4aCase& c = info.param;
  std::string s = std::string(format_name(c.id)) + "_" + std::to_string(c.rows) + "x" + std::to_string(c.cols);
  if (format_info(c.id).block_elems == 0)
    s += "_g" + std::to_string(c.group_size) + "_" + std::string(scalar_type_name(c.scale_type));
  return s;
}

std::vector<Dp4aCase> dp4a_cases() {
  std::vector<Dp4aCase> cases;
  for (FormatId id : {FormatId::kQ4_0, FormatId::kQ4_1, FormatId::kQ5_0, FormatId::kQ5_1, FormatId::kQ8_0,
                      FormatId::kQ2_K, FormatId::kQ3_K, FormatId::kQ4_K, FormatId::kQ5_K, FormatId::kQ6_K,
                      FormatId::kIQ4_NL, FormatId::kIQ4_XS, FormatId::kTQ2_0, FormatId::kIQ2_XXS, FormatId::kIQ2_XS,
                      FormatId::kIQ2_S, FormatId::kIQ3_XXS, FormatId::kIQ3_S, FormatId::kIQ1_S, FormatId::kIQ1_M,
                      FormatId::kTQ1_0, FormatId::kMXFP4_GGML, FormatId::kMXFP4, FormatId::kNVFP4}) {
    // 32 or 256 columns (NVFP4's 16-column scale blocks: 32, the kernel's item)
    const int64_t unit = std::max<int64_t>(32, format_info(id).block_elems);
    cases.push_back({id, 1, unit, true});
    cases.push_back({id, 37, 5 * unit, true});  // an odd block count: rows start at odd 2-byte offsets
    cases.push_back({id, 133, 4096, true});
    cases.push_back({id, 4099, unit * 2, false});  // two rows per block, the last block half past the end
    cases.push_back({id, 67, 14336, false});
  }
  for (FormatId id : {FormatId::kAFQ4, FormatId::kAFQ8}) {
    for (int g : {32, 64, 128})
      for (ScalarType st : {ScalarType::kF16, ScalarType::kBF16, ScalarType::kF32})
        cases.push_back({id, 37, 3 * 128, true, g, st});
    cases.push_back({id, 4099, 256, false, 64, ScalarType::kBF16});
    cases.push_back({id, 67, 14336, false, 64, ScalarType::kF16});
  }
  return cases;
}

class GemvDp4a : public testing::TestWithParam<Dp4aCase> {};

TEST_P(GemvDp4a, MatchesTheCpuReference) {
  QRT_REQUIRE_GPU();
  const Dp4aCase& c = GetParam();
  const QuantParams p = test::gemv_test_params(c.id, c.group_size, c.scale_type);
  for (test::WeightKind kind : {test::WeightKind::kQuantized, test::WeightKind::kRandomBytes}) {
    SCOPED_TRACE(test::weight_kind_name(kind));
    if (kind == test::WeightKind::kQuantized && !format_info(c.id).has_quantizer) continue;  // TQ2_0: random only
    const uint64_t seed = static_cast<uint64_t>(c.rows * 131 + c.cols) * 2 + (kind == test::WeightKind::kQuantized);
    auto q = test::make_test_weights(c.id, c.rows, c.cols, p, kind, seed);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    const QuantView hv = cpu::view_of(*q, c.rows, c.cols, p);
    const test::DeviceWeights device = test::upload_weights(*q, hv);
    ASSERT_TRUE(device);
    const QuantView& dv = device.view;
    ASSERT_TRUE(kernels::gemv_dp4a_applies(c.id, dv));
    std::vector<float> dense(static_cast<size_t>(c.rows * c.cols));
    ASSERT_TRUE(cpu::dequantize(c.id, hv, dense.data()).ok());

    const std::vector<int> batches = c.all_batches ? std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}
                                                   : std::vector<int>{1, 3, 8};
    for (int m : batches) {
      SCOPED_TRACE("batch " + std::to_string(m));
      const std::vector<float> x = test::random_normal(static_cast<size_t>(m * c.cols), seed + 17 * m);
      const HostQ8 limbs = quantize_on_host(x);
      std::vector<float> want(static_cast<size_t>(m * c.rows)), want_float(want.size());
      ASSERT_TRUE(cpu::matmul(c.id, hv, limbs.values.data(), m, want.data()).ok());
      ASSERT_TRUE(cpu::matmul(c.id, hv, x.data(), m, want_float.data()).ok());

      DevicePtr dq;
      HostQ8 unused;
      ASSERT_TRUE(quantize_on_device(x, m, c.cols, &unused, &dq));
      const Q8Activations qa = q8_activations_at(dq.get(), m, c.cols);
      void* y_raw = nullptr;
      ASSERT_EQ(cudaMalloc(&y_raw, want.size() * 4), cudaSuccess);
      DevicePtr dy(y_raw);
      std::vector<float> first(want.size()), second(want.size());
      for (std::vector<float>* out : {&first, &second}) {
        ASSERT_EQ(cudaMemset(y_raw, 0xFF, want.size() * 4), cudaSuccess);  // NaN until written
        const Status s = kernels::gemv_dp4a(c.id, dv, {qa.codes, qa.scales}, m, static_cast<float*>(y_raw), nullptr);
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_EQ(cudaMemcpy(out->data(), y_raw, want.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      }
      for (size_t k = 0; k < first.size(); ++k)
        ASSERT_TRUE(std::isfinite(first[k])) << "y[" << k / c.rows << ", " << k % c.rows << "] = " << first[k];
      EXPECT_LT(test::relative_l2(first.data(), want.data(), want.size()), 1e-5) << "against the limbs' values";
      // Against the float x, each output within what the limbs' own error can move it: Σ |W| · |limbs - x|, plus
      // float rounding of the sums.
      for (int i = 0; i < m; ++i)
        for (int64_t r = 0; r < c.rows; ++r) {
          double bound = 0.0, magnitude = 0.0;
          for (int64_t k = 0; k < c.cols; ++k) {
            const size_t xi = static_cast<size_t>(i * c.cols + k);
            const double wv = std::fabs(dense[static_cast<size_t>(r * c.cols + k)]);
            bound += wv * std::fabs(static_cast<double>(limbs.values[xi]) - x[xi]);
            magnitude += wv * std::fabs(x[xi]);
          }
          const size_t yi = static_cast<size_t>(i * c.rows + r);
          ASSERT_LE(std::fabs(static_cast<double>(first[yi]) - want_float[yi]), bound + 1e-5 * magnitude)
              << "y[" << i << ", " << r << "] against the float x";
        }
      EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 4), 0) << "two runs differ: a race";
      // The rows per block forced (gemv_dp4a_rows), and for one row a grid of 3 blocks looping over the row groups: a
      // thread's items and the reduction order depend on neither.
      for (int rows_per_block : m == 1 ? std::vector<int>{1, 2, 4, 8} : std::vector<int>{1, 2})
        for (int64_t max_blocks : m == 1 ? std::vector<int64_t>{0, 3} : std::vector<int64_t>{0}) {
          ASSERT_EQ(cudaMemset(y_raw, 0xFF, want.size() * 4), cudaSuccess);
          const Status s = kernels::gemv_dp4a_rows(c.id, dv, {qa.codes, qa.scales}, m, static_cast<float*>(y_raw),
                                                   nullptr, rows_per_block, max_blocks);
          ASSERT_TRUE(s.ok()) << s.to_string();
          ASSERT_EQ(cudaMemcpy(second.data(), y_raw, want.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
          EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 4), 0)
              << rows_per_block << " rows per block, at most " << max_blocks << " blocks";
        }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GemvDp4a, testing::ValuesIn(dp4a_cases()), case_name);

TEST(GemvDp4aInputs, ANanInXReachesExactlyItsBatchRow) {
  QRT_REQUIRE_GPU();
  const int64_t rows = 9, cols = 512;
  const int m = 3;
  const QuantParams p = test::gemv_test_params(FormatId::kQ4_K);
  auto q = test::make_test_weights(FormatId::kQ4_K, rows, cols, p, test::WeightKind::kQuantized, 3);
  ASSERT_TRUE(q.ok());
  const test::DeviceWeights device = test::upload_weights(*q, cpu::view_of(*q, rows, cols, p));
  const QuantView& dv = device.view;
  std::vector<float> x = test::random_normal(static_cast<size_t>(m * cols), 4);
  x[static_cast<size_t>(cols + 300)] = std::numeric_limits<float>::quiet_NaN();
  DevicePtr dq;
  HostQ8 unused;
  ASSERT_TRUE(quantize_on_device(x, m, cols, &unused, &dq));
  const Q8Activations qa = q8_activations_at(dq.get(), m, cols);
  void* y = nullptr;
  ASSERT_EQ(cudaMalloc(&y, m * rows * 4), cudaSuccess);
  DevicePtr dy(y);
  ASSERT_TRUE(kernels::gemv_dp4a(FormatId::kQ4_K, dv, {qa.codes, qa.scales}, m, static_cast<float*>(y), nullptr).ok());
  std::vector<float> out(static_cast<size_t>(m * rows));
  ASSERT_EQ(cudaMemcpy(out.data(), y, out.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int i = 0; i < m; ++i)
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_EQ(std::isnan(out[static_cast<size_t>(i * rows + r)]), i == 1) << "batch row " << i << ", row " << r;
}

// What the integer-dot kernel cannot run is refused up front (the backend then takes the float GEMV).
TEST(GemvDp4aInputs, AppliesOnlyWhereItCanRun) {
  alignas(16) static uint8_t fake[4096];
  QuantView w;
  w.data = fake;
  w.rows = 4;
  w.cols = 256;
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kQ4_K, w));
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kQ6_K, w));
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kQ2_K, w));
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kQ3_K, w));
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kIQ2_XXS, w));
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kTQ1_0, w));
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kMXFP4_GGML, w));
  EXPECT_FALSE(kernels::gemv_dp4a_applies(FormatId::kMXFP4, w));  // OCP MXFP4 without its scale bytes
  QuantView ocp = w;
  ocp.scales = fake + 2049;  // E8M0 bytes: any address
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kMXFP4, ocp));
  EXPECT_FALSE(kernels::gemv_dp4a_applies(FormatId::kNVFP4, w));  // without its scale bytes
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kNVFP4, ocp));
  EXPECT_FALSE(kernels::gemv_dp4a_applies(FormatId::kAFQ4, w));   // AFQ without its scales and biases
  QuantView afq = w;
  afq.params.group_size = 64;
  afq.params.scale_type = ScalarType::kF16;
  afq.scales = fake + 2048;
  afq.biases = fake + 3072;
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kAFQ4, afq));
  QuantView odd_scales = afq;
  odd_scales.scales = fake + 2049;
  EXPECT_FALSE(kernels::gemv_dp4a_applies(FormatId::kAFQ4, odd_scales));
  QuantView wide_group = afq;
  wide_group.params.group_size = 256;
  EXPECT_FALSE(kernels::gemv_dp4a_applies(FormatId::kAFQ8, wide_group));
  EXPECT_FALSE(kernels::gemv_dp4a_applies(FormatId::kMXFP8, ocp));  // no policy
  EXPECT_FALSE(kernels::gemv_dp4a_applies(FormatId::kF16, w));
  QuantView misaligned = w;
  misaligned.data = fake + 2;
  EXPECT_FALSE(kernels::gemv_dp4a_applies(FormatId::kQ8_0, misaligned));
  QuantView partial = w;
  partial.cols = 96;  // not whole super-blocks
  EXPECT_FALSE(kernels::gemv_dp4a_applies(FormatId::kQ4_K, partial));
  EXPECT_TRUE(kernels::gemv_dp4a_applies(FormatId::kQ8_0, partial));
  const Status s = kernels::gemv_dp4a(FormatId::kQ4_K, partial, {}, 1, nullptr, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("gemv_dp4a q4_k"), std::string::npos) << s.to_string();
  EXPECT_FALSE(kernels::gemv_dp4a(FormatId::kQ8_0, w, {}, 9, nullptr, nullptr).ok());  // batch past 8
  const Status four_rows = kernels::gemv_dp4a_rows(FormatId::kQ8_0, w, {}, 2, nullptr, nullptr, 4);
  EXPECT_NE(four_rows.to_string().find("4 rows per block at batch 2"), std::string::npos) << four_rows.to_string();
  const Status negative = kernels::gemv_dp4a_rows(FormatId::kQ8_0, w, {}, 1, nullptr, nullptr, 0, -1);
  EXPECT_NE(negative.to_string().find("at most -1 blocks"), std::string::npos) << negative.to_string();
  const Status looping_batch = kernels::gemv_dp4a_rows(FormatId::kQ8_0, w, {}, 2, nullptr, nullptr, 0, 4);
  EXPECT_NE(looping_batch.to_string().find("looping blocks at batch 2"), std::string::npos)
      << looping_batch.to_string();

  // One launch over several matrices: same width and group parameters, 1 to 3 of them, each with an output.
  float* y = reinterpret_cast<float*>(fake + 2048);  // never written: every call below is refused
  const int8_t* codes = reinterpret_cast<const int8_t*>(fake);
  const float* scales = reinterpret_cast<const float*>(fake + 1024);
  const kernels::GemvPart narrow{partial, y}, full{w, y}, no_output{w, nullptr};
  const kernels::GemvPart mixed[] = {full, narrow};
  const Status widths = kernels::gemv_dp4a_parts(FormatId::kQ8_0, mixed, {codes, scales}, 1, nullptr);
  EXPECT_FALSE(widths.ok());
  EXPECT_NE(widths.to_string().find("differ in width"), std::string::npos) << widths.to_string();
  const kernels::GemvPart four[] = {full, full, full, full};
  const Status many = kernels::gemv_dp4a_parts(FormatId::kQ8_0, four, {codes, scales}, 1, nullptr);
  EXPECT_NE(many.to_string().find("4 matrices in one launch"), std::string::npos) << many.to_string();
  EXPECT_FALSE(kernels::gemv_dp4a_parts(FormatId::kQ8_0, {}, {codes, scales}, 1, nullptr).ok());
  const kernels::GemvPart unwritten[] = {full, no_output};
  EXPECT_FALSE(kernels::gemv_dp4a_parts(FormatId::kQ8_0, unwritten, {codes, scales}, 1, nullptr).ok());
}

}  // namespace
}  // namespace qrt
