// GenerateOptions::logprobs: the log-softmax helper on crafted logits (values against a double computation here,
// ordering, ties, NaN, clamping), and generation on stories260K: greedy tokens are their step's most likely token,
// the full distribution sums to 1, the callback order, and sampled tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "runtime/src/logprobs.hpp"
#include "stories_fixture.hpp"

namespace qrt {
namespace {

TEST(TokenLogprobs, LogSoftmaxOrderAndTies) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, nan, -inf, 0.0f};
  const double lse = std::log(std::exp(1.0) + 2 * std::exp(3.0) + std::exp(0.0));
  const TokenLogprobs t = api_detail::token_logprobs(logits, 2, 100);
  EXPECT_EQ(t.token, 2);
  EXPECT_NEAR(t.logprob, 3.0 - lse, 1e-6);
  ASSERT_EQ(t.top.size(), 6u);  // clamped to the vocabulary
  const std::vector<int32_t> order = {1, 2, 0, 5, 3, 4};  // equal values by id; NaN counts as -inf
  for (size_t k = 0; k < order.size(); ++k) EXPECT_EQ(t.top[k].first, order[k]) << k;
  EXPECT_NEAR(t.top[2].second, 1.0 - lse, 1e-6);
  EXPECT_NEAR(t.top[3].second, 0.0 - lse, 1e-6);
  EXPECT_EQ(t.top[4].second, -inf);
  EXPECT_EQ(t.top[5].second, -inf);
  EXPECT_TRUE(api_detail::token_logprobs(logits, 0, 0).top.empty());
  EXPECT_EQ(api_detail::token_logprobs(logits, 6, 1).logprob, -inf);  // an id past the vocabulary
  // Large logits do not overflow: the maximum is subtracted first.
  const TokenLogprobs big = api_detail::token_logprobs(std::vector<float>{1000.0f, 1000.0f}, 0, 2);
  EXPECT_NEAR(big.logprob, -std::log(2.0), 1e-6);
}

class StoriesLogprobs : public test::StoriesTest {
 protected:
  // stories260K with "Once upon a time" in a fresh session.
  void open_with_prompt() {
    auto m = Model::open(test::stories_gguf(data_));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model.emplace(std::move(*m));
    auto s = model->new_session();
    ASSERT_TRUE(s.ok());
    session.emplace(std::move(*s));
    ASSERT_TRUE(session->add_prompt("Once upon a time").ok());
  }
  std::optional<Model> model;
  std::optional<Session> session;
};

TEST_F(StoriesLogprobs, GreedyTokensAreTheirStepsMostLikelyAndTheDistributionSumsToOne) {
  open_with_prompt();
  ASSERT_FALSE(HasFatalFailure());
  auto& s = session;
  GenerateOptions g;
  g.max_tokens = 30;
  g.logprobs = model->info().vocab_size;  // every token: the whole distribution
  std::vector<std::string> events;
  g.on_logprobs = [&](const TokenLogprobs& t) { events.push_back("lp " + std::to_string(t.token)); };
  auto r = s->generate(g, [&](int32_t id, std::string_view) {
    events.push_back("cb " + std::to_string(id));
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->tokens, test::first_n(golden_.generated, 30));
  ASSERT_EQ(r->logprobs.size(), r->tokens.size());
  for (size_t i = 0; i < r->tokens.size(); ++i) {
    const TokenLogprobs& t = r->logprobs[i];
    EXPECT_EQ(t.token, r->tokens[i]);
    ASSERT_EQ(t.top.size(), static_cast<size_t>(model->info().vocab_size));
    EXPECT_EQ(t.top[0].first, t.token) << "step " << i;  // greedy picks the most likely token
    EXPECT_EQ(t.top[0].second, t.logprob);
    EXPECT_LE(t.logprob, 0.0f);
    double total = 0.0;
    for (size_t k = 0; k < t.top.size(); ++k) {
      total += std::exp(static_cast<double>(t.top[k].second));
      if (k > 0) EXPECT_LE(t.top[k].second, t.top[k - 1].second);
    }
    EXPECT_NEAR(total, 1.0, 1e-5) << "step " << i;
    ASSERT_EQ(events.size(), 2 * r->tokens.size());
    EXPECT_EQ(events[2 * i], "lp " + std::to_string(t.token));
    EXPECT_EQ(events[2 * i + 1], "cb " + std::to_string(t.token));
  }
}

TEST_F(StoriesLogprobs, SampledTokensAndOffByDefault) {
  open_with_prompt();
  ASSERT_FALSE(HasFatalFailure());
  auto& s = session;
  GenerateOptions g;
  g.max_tokens = 20;
  auto off = s->generate(g);
  ASSERT_TRUE(off.ok());
  EXPECT_TRUE(off->logprobs.empty());

  s->reset();
  ASSERT_TRUE(s->add_prompt("Once upon a time").ok());
  g.sampling.temperature = 1.5f;
  g.sampling.seed = 11;
  g.logprobs = 3;
  auto r = s->generate(g);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(r->logprobs.size(), r->tokens.size());
  int not_first = 0;
  for (const TokenLogprobs& t : r->logprobs) {
    ASSERT_EQ(t.top.size(), 3u);
    EXPECT_LE(t.logprob, t.top[0].second);
    EXPECT_TRUE(std::isfinite(t.logprob));
    for (const auto& [id, lp] : t.top)
      if (id == t.token) EXPECT_EQ(lp, t.logprob);
    not_first += t.top[0].first != t.token;
  }
  EXPECT_GT(not_first, 0) << "at temperature 1.5 some sampled token should not be the most likely one";
}

}  // namespace
}  // namespace qrt
