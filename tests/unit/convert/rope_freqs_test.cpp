// Llama 3 RoPE scaling between config.json's parameters and GGUF's rope_freqs divisors (tools/convert/rope_freqs):
// Llama 3.1's own parameters survive the round trip, the divisors match the frequencies models/rope.cpp derives
// from the parameters, and divisors from any other rule are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/rope.hpp"
#include "tools/convert/rope_freqs.hpp"

namespace qrt::convert {
namespace {

RopeConfig llama31() {
  RopeConfig r;
  r.theta = 500000.0f;
  r.scaling = RopeScaling::kLlama3;
  r.factor = 8.0f;
  r.low_freq_factor = 1.0f;
  r.high_freq_factor = 4.0f;
  r.original_context = 8192;
  return r;
}

TEST(RopeFreqs, Llama31ParametersSurviveTheRoundTrip) {
  const std::vector<float> divisors = llama3_rope_divisors(llama31(), 128);
  ASSERT_EQ(divisors.size(), 64u);
  EXPECT_EQ(divisors.front(), 1.0f);
  EXPECT_EQ(divisors.back(), 8.0f);
  int blended = 0;
  for (float d : divisors) blended += d > 1.0f && d < 8.0f;
  EXPECT_GT(blended, 0) << "some pairs lie in the blended band";

  RopeConfig back;
  back.theta = 500000.0f;
  ASSERT_TRUE(llama3_rope_from_divisors(divisors, 128, &back).ok());
  EXPECT_EQ(back.scaling, RopeScaling::kLlama3);
  EXPECT_EQ(back.factor, 8.0f);
  EXPECT_EQ(back.low_freq_factor, 1.0f);
  EXPECT_EQ(back.high_freq_factor, 4.0f);
  EXPECT_EQ(back.original_context, 8192);

  // The unscaled frequencies divided by the divisors are the scaled ones models/rope.cpp computes.
  RopeConfig plain = llama31();
  plain.scaling = RopeScaling::kNone;
  auto scaled = make_rope_table(llama31(), 128, nullptr);
  auto divided = make_rope_table(plain, 128, &divisors);
  ASSERT_TRUE(scaled.ok() && divided.ok());
  for (size_t i = 0; i < divisors.size(); ++i)
    EXPECT_NEAR(divided->inv_freq[i], scaled->inv_freq[i], 1e-6 * scaled->inv_freq[i]) << "pair " << i;
}

TEST(RopeFreqs, OnesMeanNoScalingAndOtherRulesAreRefused) {
  RopeConfig r;
  r.theta = 500000.0f;
  ASSERT_TRUE(llama3_rope_from_divisors(std::vector<float>(64, 1.0f), 128, &r).ok());
  EXPECT_EQ(r.scaling, RopeScaling::kNone);

  std::vector<float> divisors = llama3_rope_divisors(llama31(), 128);
  divisors[40] *= 1.01f;  // one pair off the rule
  Status s = llama3_rope_from_divisors(divisors, 128, &r);
  EXPECT_EQ(s.code(), ErrorCode::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("does not follow Llama 3's rule"), std::string::npos) << s.to_string();
  EXPECT_EQ(r.scaling, RopeScaling::kNone) << "unchanged on refusal";
  EXPECT_FALSE(llama3_rope_from_divisors(std::vector<float>(63, 1.0f), 128, &r).ok()) << "one value per pair";
  EXPECT_FALSE(llama3_rope_from_divisors(std::vector<float>(64, 0.5f), 128, &r).ok()) << "divisors below 1";
}

}  // namespace
}  // namespace qrt::convert
