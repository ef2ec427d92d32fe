// Importance-weighted quantization (QuantParams::importance, what an imatrix feeds) and the grid-searching
// i-quant quantizers: properties that hold whatever the bytes (the bytes themselves are compared with ggml's in
// tests/oracle/quant/test_recorded_quants.py).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;

// Every format whose ggml quantizer reads an importance matrix.
constexpr FormatId kWeighted[] = {
    FormatId::kQ4_0,   FormatId::kQ4_1,   FormatId::kQ5_0,  FormatId::kQ5_1,    FormatId::kQ2_K,
    FormatId::kQ3_K,   FormatId::kQ4_K,   FormatId::kQ5_K,  FormatId::kQ6_K,    FormatId::kIQ4_NL,
    FormatId::kIQ4_XS, FormatId::kIQ2_XXS, FormatId::kIQ2_XS, FormatId::kIQ2_S, FormatId::kIQ3_XXS,
    FormatId::kIQ3_S,  FormatId::kIQ1_S,  FormatId::kIQ1_M,
};

constexpr int64_t kRows = 16, kCols = 512;

std::vector<float> decode(FormatId id, const QuantBuffers& q, int64_t rows, int64_t cols) {
  std::vector<float> back(static_cast<size_t>(rows * cols), NAN);
  EXPECT_TRUE(cpu::dequantize(id, cpu::view_of(q, rows, cols, QuantParams{}), back.data()).ok());
  return back;
}

double weighted_error(const std::vector<float>& x, const std::vector<float>& back, const std::vector<float>& w) {
  double e = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(back[i]) - x[i];
    e += w[i % w.size()] * d * d;
  }
  return e;
}

class Importance : public testing::TestWithParam<FormatId> {};

// The point of an imatrix: columns that matter more are reconstructed better. With one column in eight weighted
// 100 times the rest, the importance-weighted error must drop well below the unweighted quantizer's.
TEST_P(Importance, LowersTheErrorItWeighs) {
  const FormatId id = GetParam();
  const auto x = test::random_normal(static_cast<size_t>(kRows * kCols), 31);
  std::vector<float> w(static_cast<size_t>(kCols), 1.0f);
  for (size_t c = 0; c < w.size(); c += 8) w[c] = 100.0f;
  QuantParams weighted;
  weighted.importance = w.data();
  auto plain = cpu::quantize(id, x.data(), kRows, kCols, QuantParams{});
  auto with = cpu::quantize(id, x.data(), kRows, kCols, weighted);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  ASSERT_TRUE(with.ok()) << with.status().to_string();
  const double e_plain = weighted_error(x, decode(id, *plain, kRows, kCols), w);
  const double e_with = weighted_error(x, decode(id, *with, kRows, kCols), w);
  EXPECT_LT(e_with, 0.9 * e_plain) << format_name(id) << ": weighted " << e_with << ", unweighted " << e_plain;
}

TEST_P(Importance, NegativeOrNonFiniteImportanceIsRefusedNamingTheColumn) {
  const FormatId id = GetParam();
  const auto x = test::random_normal(static_cast<size_t>(kCols), 32);
  for (float bad : {-1.0f, NAN, INFINITY}) {
    std::vector<float> w(static_cast<size_t>(kCols), 1.0f);
    w[300] = bad;
    QuantParams p;
    p.importance = w.data();
    auto q = cpu::quantize(id, x.data(), 1, kCols, p);
    ASSERT_FALSE(q.ok()) << format_name(id) << " accepted importance " << bad;
    EXPECT_NE(q.status().message().find("column 300"), std::string::npos) << q.status().message();
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Importance, testing::ValuesIn(kWeighted), test::format_test_name);

// Formats whose ggml quantizer ignores the matrix give the same bytes with and without it.
TEST(Importance, IgnoredWhereGgmlIgnoresIt) {
  const auto x = test::random_normal(static_cast<size_t>(kRows * kCols), 33);
  const auto w = test::random_normal(static_cast<size_t>(kCols), 34);
  std::vector<float> positive(w.size());
  for (size_t i = 0; i < w.size(); ++i) positive[i] = std::fabs(w[i]) + 0.01f;
  QuantParams p;
  p.importance = positive.data();
  for (FormatId id : {FormatId::kQ8_0, FormatId::kQ8_1, FormatId::kQ8_K, FormatId::kTQ1_0, FormatId::kTQ2_0}) {
    auto a = cpu::quantize(id, x.data(), kRows, kCols, QuantParams{});
    auto b = cpu::quantize(id, x.data(), kRows, kCols, p);
    ASSERT_TRUE(a.ok() && b.ok()) << format_name(id);
    EXPECT_EQ(a->data, b->data) << format_name(id);
  }
}

// ggml aborts (GGML_ASSERT in its grid search) on values whose squares overflow; qrt refuses them, naming the row.
TEST(IquantQuantizers, ValuesTooLargeForTheGridSearchAreRefusedByRow) {
  for (FormatId id : {FormatId::kIQ2_S, FormatId::kIQ3_XXS, FormatId::kIQ3_S, FormatId::kIQ1_M}) {
    auto x = test::random_normal(static_cast<size_t>(2 * 256), 35);
    for (size_t i = 256; i < x.size(); ++i) x[i] *= 1e30f;
    auto q = cpu::quantize(id, x.data(), 2, 256, QuantParams{});
    ASSERT_FALSE(q.ok()) << format_name(id);
    EXPECT_NE(q.status().message().find("row 1 cannot be quantized"), std::string::npos) << q.status().message();
  }
}

// IQ3_S with one all-zero sub-block: the other sub-blocks must decode to their values. ggml (d99724f2) shifts the
// later sub-blocks' indices and signs by one slot there, so its blocks decode wrongly; qrt keeps the layout.
TEST(IquantQuantizers, Iq3sSubBlockAfterAZeroOneDecodesInPlace) {
  auto x = test::random_normal(256, 36);
  for (int j = 64; j < 96; ++j) x[static_cast<size_t>(j)] = 0.0f;  // sub-block 2
  auto q = cpu::quantize(FormatId::kIQ3_S, x.data(), 1, 256, QuantParams{});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  const auto back = decode(FormatId::kIQ3_S, *q, 1, 256);
  for (int sub = 3; sub < 8; ++sub) {
    const double err = test::relative_l2(back.data() + 32 * sub, x.data() + 32 * sub, 32);
    EXPECT_LT(err, 0.35) << "sub-block " << sub;
  }
}

// IQ2_XXS, IQ2_XS and IQ1_S, which ggml quantizes only with an importance matrix, use uniform importance without
// one: the same bytes as ones given explicitly.
TEST(IquantQuantizers, ImatrixOnlyTypesUseOnesWithoutOne) {
  const auto x = test::random_normal(static_cast<size_t>(4 * 256), 37);
  const std::vector<float> ones(256, 1.0f);
  QuantParams p;
  p.importance = ones.data();
  for (FormatId id : {FormatId::kIQ2_XXS, FormatId::kIQ2_XS, FormatId::kIQ1_S}) {
    auto a = cpu::quantize(id, x.data(), 4, 256, QuantParams{});
    auto b = cpu::quantize(id, x.data(), 4, 256, p);
    ASSERT_TRUE(a.ok() && b.ok()) << format_name(id);
    EXPECT_EQ(a->data, b->data) << format_name(id);
  }
}

}  // namespace
}  // namespace qrt
