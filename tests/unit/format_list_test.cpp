// Properties every format in the list must have; iterates the list, so new formats are covered automatically.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "kernels/cpu/quant_reference.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;

class EveryFormat : public testing::TestWithParam<FormatId> {};

TEST(FormatList, NamesAndGgmlIdsAreUnique) {
  std::set<std::string_view> names;
  std::set<int> ggml_ids;
  for (FormatId id : kAllFormats) {
    const FormatInfo info = format_info(id);
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    if (info.ggml_type >= 0) {
      EXPECT_TRUE(ggml_ids.insert(info.ggml_type).second) << info.name;
      EXPECT_EQ(format_from_ggml_type(info.ggml_type), id);
    }
    EXPECT_EQ(format_from_name(info.name), id);
  }
  EXPECT_EQ(static_cast<int>(names.size()), kFormatCount);
}

TEST_P(EveryFormat, BlockGeometryIsSane) {
  const FormatInfo info = format_info(GetParam());
  EXPECT_GE(info.block_elems, 0);
  EXPECT_LE(info.block_elems, kMaxBlockElems);
  EXPECT_GT(info.bits_per_weight, 0.5);
  EXPECT_LE(info.bits_per_weight, 32.0);
}

// Quantize Gaussian data, dequantize, and check the error is small relative to the format's bit budget; the
// dense formats must be (nearly) exact. The recorded per-format bounds live in the round-trip error test.
TEST_P(EveryFormat, QuantizeDequantizeRoundTrip) {
  const FormatId id = GetParam();
  const FormatInfo info = format_info(id);
  if (!info.has_quantizer) GTEST_SKIP() << info.name << " has no quantizer";
  const int64_t rows = 4, cols = 512;
  QuantParams p;
  p.group_size = info.block_elems == 0 ? 64 : 0;
  p.scale_type = ScalarType::kF16;
  const auto x = test::random_normal(rows * cols, 1234);
  auto q = cpu::quantize(id, x.data(), rows, cols, p);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  auto sizes = cpu::part_sizes(id, rows, cols, p);
  ASSERT_TRUE(sizes.ok());
  EXPECT_EQ(q->data.size(), sizes->data);
  EXPECT_EQ(q->scales.size(), sizes->scales);
  EXPECT_EQ(q->biases.size(), sizes->biases);
  std::vector<float> back(rows * cols, NAN);
  ASSERT_TRUE(cpu::dequantize(id, cpu::view_of(*q, rows, cols, p), back.data()).ok());
  const double err = test::relative_l2(back.data(), x.data(), back.size());
  // A catch-all for broken decoders (which give errors near 1): loose enough for every format's bit budget. The
  // tight, recorded per-format bounds are in the round-trip error table test.
  const double bound = std::min(0.8, 8.0 * std::exp2(-std::min(info.bits_per_weight, 8.0)));
  EXPECT_LT(err, bound) << info.name;
}

// CPU matmul against dequantize-then-multiply by hand.
TEST_P(EveryFormat, MatmulMatchesDequantizedProduct) {
  const FormatId id = GetParam();
  const FormatInfo info = format_info(id);
  if (!info.has_quantizer) GTEST_SKIP() << info.name << " has no quantizer";
  const int64_t rows = 3, cols = 256, m = 2;
  QuantParams p;
  p.group_size = info.block_elems == 0 ? 64 : 0;
  p.scale_type = ScalarType::kF16;
  const auto w = test::random_normal(rows * cols, 7);
  const auto x = test::random_normal(m * cols, 8);
  auto q = cpu::quantize(id, w.data(), rows, cols, p);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  const QuantView v = cpu::view_of(*q, rows, cols, p);
  std::vector<float> wd(rows * cols), y(m * rows, NAN);
  ASSERT_TRUE(cpu::dequantize(id, v, wd.data()).ok());
  ASSERT_TRUE(cpu::matmul(id, v, x.data(), m, y.data()).ok());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      double ref = 0.0;
      for (int64_t c = 0; c < cols; ++c) ref += static_cast<double>(x[i * cols + c]) * wd[r * cols + c];
      EXPECT_NEAR(y[i * rows + r], ref, 1e-4 * (1.0 + std::fabs(ref)));
    }
}

INSTANTIATE_TEST_SUITE_P(Formats, EveryFormat, testing::ValuesIn(kAllFormats), test::format_test_name);

}  // namespace
}  // namespace qrt
