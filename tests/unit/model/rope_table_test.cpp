// RoPE frequency tables: the base frequencies, each scaling rule's defining property, and bad parameters.
// (The full Llama 3 / YaRN formulas are checked against the numpy reference in tests/oracle/model.)
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "models/rope.hpp"

namespace qrt {
namespace {

TEST(RopeTable, BaseLinearLlama3Yarn) {
  RopeConfig r;
  r.theta = 10000.0f;
  auto base = make_rope_table(r, 16);
  ASSERT_TRUE(base.ok());
  ASSERT_EQ(base->inv_freq.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(base->inv_freq[i], static_cast<float>(std::pow(10000.0, -2.0 * i / 16)));
  EXPECT_EQ(base->rot_dim, 16);

  r.scaling = RopeScaling::kLinear;
  r.factor = 4.0f;
  auto lin = make_rope_table(r, 16);
  ASSERT_TRUE(lin.ok());
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(lin->inv_freq[i], base->inv_freq[i] / 4.0f);

  // Llama 3: wavelengths shorter than original_context / high_freq_factor keep their frequency, longer than
  // original_context / low_freq_factor are divided by the factor.
  r.scaling = RopeScaling::kLlama3;
  r.factor = 8.0f;
  r.low_freq_factor = 1.0f;
  r.high_freq_factor = 4.0f;
  r.original_context = 64;
  auto l3 = make_rope_table(r, 16);
  ASSERT_TRUE(l3.ok());
  for (int i = 0; i < 8; ++i) {
    const double wavelen = 2 * std::numbers::pi / base->inv_freq[i];
    if (wavelen < 16) {
      EXPECT_FLOAT_EQ(l3->inv_freq[i], base->inv_freq[i]);
    }
    if (wavelen > 64) {
      EXPECT_FLOAT_EQ(l3->inv_freq[i], base->inv_freq[i] / 8.0f);
    }
    EXPECT_LE(l3->inv_freq[i], base->inv_freq[i]);
    EXPECT_GE(l3->inv_freq[i], base->inv_freq[i] / 8.0f * 0.999999f);
  }

  // YaRN: the fastest pair extrapolates (unchanged), the slowest interpolates (divided by the factor).
  r.scaling = RopeScaling::kYarn;
  r.factor = 4.0f;
  r.original_context = 32;
  auto y = make_rope_table(r, 16);
  ASSERT_TRUE(y.ok());
  EXPECT_FLOAT_EQ(y->inv_freq[0], base->inv_freq[0]);
  EXPECT_FLOAT_EQ(y->inv_freq[7], base->inv_freq[7] / 4.0f);

  // GGUF rope_freqs divide each frequency.
  r.scaling = RopeScaling::kNone;
  std::vector<float> factors = {1, 2, 4, 8, 1, 1, 1, 1};
  auto f = make_rope_table(r, 16, &factors);
  ASSERT_TRUE(f.ok());
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(f->inv_freq[i], base->inv_freq[i] / factors[i]);
}

TEST(RopeTable, RejectsBadParameters) {
  RopeConfig r;
  EXPECT_FALSE(make_rope_table(r, 0).ok());
  r.rot_dim = 7;
  EXPECT_FALSE(make_rope_table(r, 16).ok());
  r.rot_dim = 32;
  EXPECT_FALSE(make_rope_table(r, 16).ok());
  r.rot_dim = 8;
  auto partial = make_rope_table(r, 16);
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->inv_freq.size(), 4u);
  EXPECT_FLOAT_EQ(partial->inv_freq[1], static_cast<float>(std::pow(10000.0, -2.0 / 8)));  // exponent over rot_dim
  r.rot_dim = 0;
  r.theta = 0.0f;
  EXPECT_FALSE(make_rope_table(r, 16).ok());
  r.theta = 10000.0f;
  r.scaling = RopeScaling::kLlama3;  // no original context
  EXPECT_FALSE(make_rope_table(r, 16).ok());
  r.scaling = RopeScaling::kYarn;
  EXPECT_FALSE(make_rope_table(r, 16).ok());
  r.scaling = RopeScaling::kNone;
  std::vector<float> bad = {1, 0, 1, 1, 1, 1, 1, 1};
  EXPECT_FALSE(make_rope_table(r, 16, &bad).ok());
  std::vector<float> short_list = {1, 1};
  EXPECT_FALSE(make_rope_table(r, 16, &short_list).ok());
}

}  // namespace
}  // namespace qrt
