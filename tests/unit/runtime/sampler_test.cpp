#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "kernels/cpu/sampler.hpp"

namespace qrt {
namespace {

TEST(Sampler, GreedyTakesTheFirstMaximum) {
  auto s = Sampler::create({});
  ASSERT_TRUE(s.ok());
  const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  EXPECT_EQ(s->sample(logits, {}), 1);
}

TEST(Sampler, RejectsBadParameters) {
  SamplingParams p;
  p.temperature = -1.0f;
  EXPECT_EQ(Sampler::create(p).status().code(), ErrorCode::kInvalidArgument);
  p = {};
  p.top_p = 0.0f;
  EXPECT_FALSE(Sampler::create(p).ok());
  p = {};
  p.min_p = 1.5f;
  EXPECT_FALSE(Sampler::create(p).ok());
  p = {};
  p.top_k = -3;
  EXPECT_FALSE(Sampler::create(p).ok());
}

// Draws many samples and compares frequencies with the analytically filtered distribution.
std::map<int, double> frequencies(const SamplingParams& p, const std::vector<float>& logits, int n) {
  auto s = Sampler::create(p);
  std::map<int, double> f;
  for (int i = 0; i < n; ++i) f[s->sample(logits, {})] += 1.0 / n;
  return f;
}

TEST(Sampler, TemperatureFollowsTheSoftmax) {
  SamplingParams p;
  p.temperature = 0.5f;
  p.seed = 42;
  const std::vector<float> logits = {1.0f, 0.0f, -0.5f};
  // softmax(logits / 0.5)
  std::vector<double> e = {std::exp(2.0), std::exp(0.0), std::exp(-1.0)};
  const double z = e[0] + e[1] + e[2];
  auto f = frequencies(p, logits, 40000);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(f[i], e[i] / z, 0.01) << "token " << i;
}

TEST(Sampler, TopKTopPAndMinPCutTheTail) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  p.top_k = 2;  // {0.5, 0.3} renormalized
  auto f = frequencies(p, logits, 20000);
  EXPECT_NEAR(f[0], 0.625, 0.015);
  EXPECT_EQ(f.count(2) + f.count(3), 0u);
  p.top_k = 0;
  p.top_p = 0.9f;  // 0.5 + 0.3 + 0.15 reaches 0.95 >= 0.9: three tokens
  f = frequencies(p, logits, 20000);
  EXPECT_EQ(f.count(3), 0u);
  EXPECT_NEAR(f[2], 0.15 / 0.95, 0.015);
  p.top_p = 1.0f;
  p.min_p = 0.5f;  // keep p >= 0.25: tokens 0 and 1
  f = frequencies(p, logits, 20000);
  EXPECT_EQ(f.count(2) + f.count(3), 0u);
  EXPECT_NEAR(f[1], 0.375, 0.015);
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 99;
  const std::vector<float> logits = {0.1f, 0.2f, 0.3f, 0.0f, -0.2f};
  auto a = Sampler::create(p), b = Sampler::create(p);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(a->sample(logits, {}), b->sample(logits, {}));
}

TEST(Sampler, PenaltiesFollowLlamaCppConventions) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  std::vector<float> logits = {4.0f, -4.0f, 1.0f};
  const std::vector<int> history = {0, 1, 1, 7 /* out of vocab: ignored */};
  apply_penalties(logits, history, p);
  EXPECT_FLOAT_EQ(logits[0], 4.0f / 2 - 0.5f - 0.25f);
  EXPECT_FLOAT_EQ(logits[1], -4.0f * 2 - 0.5f - 0.5f);
  EXPECT_FLOAT_EQ(logits[2], 1.0f);
  p.penalty_last_n = 1;  // only the last token (1) counts
  logits = {4.0f, -4.0f, 1.0f};
  apply_penalties(logits, history, p);
  EXPECT_FLOAT_EQ(logits[0], 4.0f);
}

}  // namespace
}  // namespace qrt
