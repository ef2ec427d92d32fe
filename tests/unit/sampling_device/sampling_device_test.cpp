// sample_with_uniform against the sampler as it was before the draw became separable (kept verbatim below), and
// CpuBackend::sample against Sampler on fresh random logits for many parameter combinations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <unordered_map>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "kernels/cpu/sampler.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

// The sampler before the refactor, unchanged apart from names: the reference for "same ids as before".
class OldSampler {
 public:
  explicit OldSampler(const SamplingParams& p) : params_(p), rng_(p.seed) {}

  int sample(std::span<const float> logits, std::span<const int> history) {
    work_.assign(logits.begin(), logits.end());
    old_penalties(work_, history);
    const int vocab = static_cast<int>(work_.size());
    if (params_.temperature == 0.0f)
      return static_cast<int>(std::max_element(work_.begin(), work_.end()) - work_.begin());
    candidates_.clear();
    for (int i = 0; i < vocab; ++i)
      if (!std::isnan(work_[static_cast<size_t>(i)])) candidates_.push_back(i);
    if (candidates_.empty()) return 0;
    auto by_logit = [&](int a, int b) {
      return work_[static_cast<size_t>(a)] > work_[static_cast<size_t>(b)] ||
             (work_[static_cast<size_t>(a)] == work_[static_cast<size_t>(b)] && a < b);
    };
    size_t keep = candidates_.size();
    if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
      keep = static_cast<size_t>(params_.top_k);
      std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(keep), candidates_.end(),
                        by_logit);
      candidates_.resize(keep);
    } else {
      std::sort(candidates_.begin(), candidates_.end(), by_logit);
    }
    const double inv_t = 1.0 / params_.temperature;
    const double top = work_[static_cast<size_t>(candidates_[0])];
    probs_.resize(candidates_.size());
    double sum = 0.0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      probs_[i] = std::exp((work_[static_cast<size_t>(candidates_[i])] - top) * inv_t);
      sum += probs_[i];
    }
    for (double& q : probs_) q /= sum;
    if (params_.top_p < 1.0f) {
      double cum = 0.0;
      size_t n = 0;
      while (n < probs_.size()) {
        cum += probs_[n++];
        if (cum >= params_.top_p) break;
      }
      probs_.resize(n);
      candidates_.resize(n);
    }
    if (params_.min_p > 0.0f) {
      const double floor = params_.min_p * probs_[0];
      size_t n = 1;
      while (n < probs_.size() && probs_[n] >= floor) ++n;
      probs_.resize(n);
      candidates_.resize(n);
    }
    const double mass = std::accumulate(probs_.begin(), probs_.end(), 0.0);
    std::uniform_real_distribution<double> u(0.0, mass);
    const double r = u(rng_);
    double cum = 0.0;
    for (size_t i = 0; i < probs_.size(); ++i) {
      cum += probs_[i];
      if (r < cum) return candidates_[i];
    }
    return candidates_.back();
  }

 private:
  void old_penalties(std::span<float> logits, std::span<const int> history) const {
    const SamplingParams& p = params_;
    if (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
    size_t start = 0;
    if (p.penalty_last_n >= 0 && history.size() > static_cast<size_t>(p.penalty_last_n))
      start = history.size() - static_cast<size_t>(p.penalty_last_n);
    std::unordered_map<int, int> counts;
    for (size_t i = start; i < history.size(); ++i)
      if (history[i] >= 0 && static_cast<size_t>(history[i]) < logits.size()) ++counts[history[i]];
    for (auto [tok, n] : counts) {
      float& l = logits[static_cast<size_t>(tok)];
      l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
      l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(n);
    }
  }

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> work_;
  std::vector<int> candidates_;
  std::vector<double> probs_;
};

SamplingParams make_params(float t, int k, float top_p, float min_p, float rep = 1.0f, float presence = 0.0f,
                           float frequency = 0.0f, uint64_t seed = 1) {
  SamplingParams p;
  p.temperature = t;
  p.top_k = k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repetition_penalty = rep;
  p.presence_penalty = presence;
  p.frequency_penalty = frequency;
  p.seed = seed;
  return p;
}

// The parameter grid both tests walk: greedy, plain temperature, each filter alone and together, penalties.
std::vector<SamplingParams> parameter_grid() {
  return {make_params(0.0f, 0, 1.0f, 0.0f),
          make_params(0.0f, 0, 1.0f, 0.0f, 1.3f, 0.2f, 0.1f),
          make_params(1.0f, 0, 1.0f, 0.0f),
          make_params(0.7f, 40, 1.0f, 0.0f),
          make_params(1.3f, 0, 0.9f, 0.0f),
          make_params(0.8f, 0, 1.0f, 0.05f),
          make_params(0.9f, 50, 0.95f, 0.02f),
          make_params(1.0f, 1, 1.0f, 0.0f),
          make_params(2.5f, 1000, 0.5f, 0.0f),
          make_params(1.0f, 7, 1.0f, 0.0f, 1.5f, 0.5f, 0.25f),
          make_params(0.6f, 0, 0.8f, 0.1f, 0.8f, -0.3f, 0.4f)};
}

// Logits with the awkward values planted: NaN, exact ties, -0 and +0, -inf, and (sometimes) +inf.
std::vector<float> awkward_logits(size_t vocab, uint64_t seed, bool plant) {
  std::vector<float> l = test::random_normal(vocab, seed, 2.0f);
  if (!plant || vocab < 16) return l;
  std::mt19937_64 g(seed ^ 0x9e3779b97f4a7c15ULL);
  auto at = [&] { return static_cast<size_t>(g() % vocab); };
  l[at()] = std::numeric_limits<float>::quiet_NaN();
  l[at()] = std::numeric_limits<float>::quiet_NaN();
  const float tie = l[at()];
  l[at()] = tie;
  l[at()] = tie;
  l[at()] = 0.0f;
  l[at()] = -0.0f;
  l[at()] = -std::numeric_limits<float>::infinity();
  if (seed % 7 == 0) l[0] = std::numeric_limits<float>::quiet_NaN();  // the greedy slot-0 NaN case
  return l;
}

std::vector<int> random_history(size_t vocab, size_t n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<int> h(n);
  for (int& t : h) t = static_cast<int>(g() % (vocab / 4 + 1));  // a small range so tokens repeat
  return h;
}

TEST(SampleWithUniform, DistributionDrawIsCanonicalTimesMass) {
  std::mt19937_64 a(123), b(123);
  std::mt19937_64 masses(7);
  for (int i = 0; i < 20000; ++i) {
    const double mass = 0.5 + static_cast<double>(masses() % 1000) / 1000.0;
    std::uniform_real_distribution<double> u(0.0, mass);
    const double want = u(a);
    const double got = std::generate_canonical<double, std::numeric_limits<double>::digits>(b) * mass;
    ASSERT_EQ(want, got) << "draw " << i;
  }
}

TEST(SampleWithUniform, SamplerGivesTheSameIdsAsBeforeTheRefactor) {
  int compared = 0;
  for (size_t vocab : {size_t{5}, size_t{64}, size_t{1000}}) {
    for (const SamplingParams& base : parameter_grid()) {
      for (uint64_t seed = 0; seed < 24; ++seed) {
        SamplingParams p = base;
        p.seed = seed * 1000003 + vocab;
        auto created = Sampler::create(p);
        ASSERT_TRUE(created.ok());
        Sampler now = std::move(created).value();
        OldSampler before(p);
        std::vector<int> history = random_history(vocab, 20, seed + 5);
        // Several steps per sampler, so the engine state is carried over as in generation.
        for (int step = 0; step < 6; ++step) {
          const auto logits = awkward_logits(vocab, seed * 31 + static_cast<uint64_t>(step) + vocab, step % 2 == 1);
          const int want = before.sample(logits, history);
          const int got = now.sample(logits, history);
          ASSERT_EQ(got, want) << "vocab " << vocab << " seed " << p.seed << " step " << step << " T "
                               << p.temperature << " k " << p.top_k << " p " << p.top_p << " min_p " << p.min_p;
          history.push_back(got);
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 1000);
}

TEST(SampleWithUniform, PenaltyCountsMatchApplyPenalties) {
  const SamplingParams p = make_params(1.0f, 0, 1.0f, 0.0f, 1.4f, 0.3f, 0.2f);
  const auto logits = test::random_normal(300, 99, 3.0f);
  const auto history = random_history(300, 100, 4);
  std::vector<float> a = logits, b = logits;
  apply_penalties(a, history, p);
  const auto counts = count_penalty_tokens(history, b.size(), p);
  ASSERT_FALSE(counts.empty());
  for (size_t i = 1; i < counts.size(); ++i) ASSERT_LT(counts[i - 1].token, counts[i].token);
  apply_penalty_counts(b, counts, p);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
  // Only the last penalty_last_n tokens count.
  int in_window = 0;
  for (const PenaltyCount& c : counts) in_window += c.count;
  EXPECT_EQ(in_window, p.penalty_last_n);
  EXPECT_TRUE(count_penalty_tokens(history, 300, make_params(1.0f, 0, 1.0f, 0.0f)).empty());
}

TEST(SampleWithUniform, DrawPicksTheFirstCumulativeAbove) {
  // Three candidates with probabilities exp(0), exp(-1), exp(-2) normalized: u01 just below and above each
  // cumulative boundary picks the neighbouring candidates.
  const std::vector<float> logits = {-2.0f, 0.0f, -1.0f};
  const SamplingParams p = make_params(1.0f, 0, 1.0f, 0.0f);
  const double e0 = 1.0, e1 = std::exp(-1.0), e2 = std::exp(-2.0), s = e0 + e1 + e2;
  SampleScratch scratch;
  EXPECT_EQ(sample_with_uniform(logits, p, 0.0, scratch), 1);
  EXPECT_EQ(sample_with_uniform(logits, p, e0 / s * 0.999999, scratch), 1);
  EXPECT_EQ(sample_with_uniform(logits, p, e0 / s * 1.000001, scratch), 2);
  EXPECT_EQ(sample_with_uniform(logits, p, (e0 + e1) / s * 1.000001, scratch), 0);
  EXPECT_EQ(sample_with_uniform(logits, p, 0.9999999999, scratch), 0);
  const std::vector<float> nan_row(4, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(sample_with_uniform(nan_row, p, 0.5, scratch), 0);
}

// Uploads host values into a fresh CPU "device" allocation.
template <class T>
DeviceView<T> host_view(CpuBackend& be, std::vector<ScopedBuffer>& keep, const std::vector<T>& v, int64_t rows,
                        int64_t cols) {
  auto buf = allocate_scoped(be, v.size() * sizeof(T));
  EXPECT_TRUE(buf.ok());
  keep.push_back(std::move(buf).value());
  DeviceView<T> view = keep.back().view<T>(rows, cols);
  EXPECT_TRUE(be.upload(v.data(), view.data, v.size() * sizeof(T)).ok());
  return view;
}

TEST(CpuBackendSample, EqualsSamplerRowByRow) {
  CpuBackend be;
  int compared = 0;
  for (int64_t vocab : {int64_t{17}, int64_t{1000}, int64_t{5000}}) {
    for (const SamplingParams& base : parameter_grid()) {
      for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{8}}) {
        std::vector<ScopedBuffer> keep;
        std::vector<float> logits;
        SampleStep step;
        step.params = base;
        step.penalty_offsets.push_back(0);
        std::vector<int> want(static_cast<size_t>(rows));
        for (int64_t r = 0; r < rows; ++r) {
          const uint64_t seed = static_cast<uint64_t>(vocab * 100 + rows * 10 + r) + base.top_k;
          const auto row = awkward_logits(static_cast<size_t>(vocab), seed, r % 2 == 0);
          logits.insert(logits.end(), row.begin(), row.end());
          const auto history = random_history(static_cast<size_t>(vocab), 40, seed + 1);
          SamplingParams p = base;
          p.seed = seed;
          auto sampler = Sampler::create(p);
          ASSERT_TRUE(sampler.ok());
          want[static_cast<size_t>(r)] = sampler.value().sample(row, history);
          // The same draw the sampler made (only when it draws at all), from an engine with the same seed.
          std::mt19937_64 rng(seed);
          step.u01.push_back(p.temperature > 0.0f ? std::generate_canonical<double, 53>(rng) : 0.25);
          for (const PenaltyCount& c : count_penalty_tokens(history, static_cast<size_t>(vocab), p))
            step.penalties.push_back(c);
          step.penalty_offsets.push_back(static_cast<int32_t>(step.penalties.size()));
        }
        const auto lv = host_view<float>(be, keep, logits, rows, vocab);
        const auto ids = host_view<int32_t>(be, keep, std::vector<int32_t>(static_cast<size_t>(rows), -7), rows, 1);
        ASSERT_TRUE(be.sample(lv, step, ids).ok());
        for (int64_t r = 0; r < rows; ++r) {
          EXPECT_EQ(ids.data[r], want[static_cast<size_t>(r)])
              << "vocab " << vocab << " rows " << rows << " row " << r << " T " << base.temperature << " k "
              << base.top_k;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 300);
}

TEST(CpuBackendSample, RejectsBadSteps) {
  CpuBackend be;
  std::vector<ScopedBuffer> keep;
  const auto lv = host_view<float>(be, keep, test::random_normal(2 * 50, 3), 2, 50);
  const auto ids = host_view<int32_t>(be, keep, std::vector<int32_t>(2, -1), 2, 1);
  SampleStep good;
  good.params = make_params(1.0f, 10, 0.9f, 0.0f, 1.2f);
  good.u01 = {0.1, 0.9};
  good.penalty_offsets = {0, 1, 3};
  good.penalties = {{4, 2}, {4, 1}, {49, 1}};
  ASSERT_TRUE(be.sample(lv, good, ids).ok());
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(ids.data[r] >= 0 && ids.data[r] < 50);

  auto expect_error = [&](SampleStep s, const char* what) {
    const Status st = be.sample(lv, s, ids);
    EXPECT_FALSE(st.ok()) << what;
  };
  SampleStep s = good;
  s.u01 = {0.1};
  expect_error(s, "too few draws");
  s = good;
  s.u01 = {0.1, 1.0};
  expect_error(s, "u01 = 1");
  s = good;
  s.u01 = {std::nan(""), 0.2};
  expect_error(s, "u01 NaN");
  s = good;
  s.params.temperature = -1.0f;
  expect_error(s, "negative temperature");
  s = good;
  s.params.top_p = 0.0f;
  expect_error(s, "top_p 0");
  s = good;
  s.penalties[2].token = 50;
  expect_error(s, "token outside the vocabulary");
  s = good;
  s.penalties[1].token = 49;
  expect_error(s, "a token twice in one row");
  s = good;
  s.penalties[0].count = 0;
  expect_error(s, "count 0");
  s = good;
  s.penalty_offsets = {0, 3, 1};
  s.penalties = {{4, 2}, {5, 1}, {6, 1}};
  expect_error(s, "decreasing offsets");
  s = good;
  s.penalty_offsets = {0, 5, 3};
  expect_error(s, "offsets past the penalties");
  s = good;
  s.penalty_offsets = {0, 1};
  expect_error(s, "offsets of the wrong length");
  s = good;
  s.penalty_offsets.clear();
  expect_error(s, "penalties without offsets");
  const auto wrong_ids = host_view<int32_t>(be, keep, std::vector<int32_t>(3, -1), 3, 1);
  EXPECT_FALSE(be.sample(lv, good, wrong_ids).ok());
}

}  // namespace
}  // namespace qrt
