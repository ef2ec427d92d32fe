// CudaBackend::sample against CpuBackend::sample (sample_with_uniform, the CPU sampler) on fresh random logits
// with NaN, ties, -0/+0 and infinities planted, for vocabularies of 1000, 32000 and 128256, 1-8 rows and the
// parameter grid below; the GPU ids are poisoned first. The device's exp and softmax sum round differently from
// the CPU's (kernels/sampling/sample.cu), so where the ids differ the draw must lie at a cumulative boundary:
// moving u01 by 1e-12 on the CPU must give the GPU's id.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu_backend.hpp"
#include "backend/make_cuda_backend.hpp"
#include "kernels/cpu/sampler.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

SamplingParams make_params(float t, int k, float top_p, float min_p, float rep = 1.0f, float presence = 0.0f,
                           float frequency = 0.0f) {
  SamplingParams p;
  p.temperature = t;
  p.top_k = k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repetition_penalty = rep;
  p.presence_penalty = presence;
  p.frequency_penalty = frequency;
  return p;
}

std::string describe(const SamplingParams& p) {
  return "T " + std::to_string(p.temperature) + " k " + std::to_string(p.top_k) + " p " + std::to_string(p.top_p) +
         " min_p " + std::to_string(p.min_p) + " rep " + std::to_string(p.repetition_penalty) + " pres " +
         std::to_string(p.presence_penalty) + " freq " + std::to_string(p.frequency_penalty);
}

std::vector<float> planted_logits(size_t vocab, uint64_t seed) {
  std::vector<float> l = test::random_normal(vocab, seed, 2.5f);
  std::mt19937_64 g(seed * 7 + 1);
  auto at = [&] { return static_cast<size_t>(g() % vocab); };
  for (int i = 0; i < 3; ++i) l[at()] = std::numeric_limits<float>::quiet_NaN();
  // A tie at the very top (the lower id must come first) and one in the middle.
  float best = l[0];
  for (float v : l)
    if (!std::isnan(v) && v > best) best = v;
  l[at()] = best + 1.0f;
  l[at()] = best + 1.0f;
  const float mid = l[at()];
  l[at()] = mid;
  l[at()] = 0.0f;
  l[at()] = -0.0f;
  l[at()] = -std::numeric_limits<float>::infinity();
  if (seed % 5 == 0) l[0] = std::numeric_limits<float>::quiet_NaN();  // greedy's slot-0 NaN rule
  return l;
}

class GpuSample : public testing::Test {
 protected:
  void SetUp() override {
    QRT_REQUIRE_GPU();
    auto made = make_cuda_backend(0);
    ASSERT_TRUE(made.ok()) << made.status().message();
    gpu_ = std::move(made).value();
  }

  template <class T>
  DeviceView<T> put(Backend& be, const std::vector<T>& v, int64_t rows, int64_t cols) {
    auto buf = allocate_scoped(be, v.size() * sizeof(T));
    EXPECT_TRUE(buf.ok());
    keep_.push_back(std::move(buf).value());
    DeviceView<T> view = keep_.back().view<T>(rows, cols);
    EXPECT_TRUE(be.upload(v.data(), view.data, v.size() * sizeof(T)).ok());
    return view;
  }

  // One step on both backends; returns how many rows gave the CPU's id exactly (the others, if any, were checked
  // to lie at a cumulative boundary).
  int compare(int64_t vocab, int64_t rows, const SamplingParams& params, uint64_t seed, bool penalties) {
    SampleStep step;
    step.params = params;
    std::vector<float> logits;
    std::mt19937_64 rng(seed);
    if (penalties) step.penalty_offsets.push_back(0);
    for (int64_t r = 0; r < rows; ++r) {
      const auto row = planted_logits(static_cast<size_t>(vocab), seed * 131 + static_cast<uint64_t>(r));
      logits.insert(logits.end(), row.begin(), row.end());
      step.u01.push_back(std::generate_canonical<double, 53>(rng));
      if (penalties) {
        std::vector<int> history(80);
        for (int& t : history) t = static_cast<int>(rng() % static_cast<uint64_t>(vocab / 8 + 1));
        for (const PenaltyCount& c : count_penalty_tokens(history, static_cast<size_t>(vocab), params))
          step.penalties.push_back(c);
        step.penalty_offsets.push_back(static_cast<int32_t>(step.penalties.size()));
      }
    }
    const auto cpu_logits = put<float>(cpu_, logits, rows, vocab);
    const auto cpu_ids = put<int32_t>(cpu_, std::vector<int32_t>(static_cast<size_t>(rows), -3), rows, 1);
    const auto gpu_logits = put<float>(*gpu_, logits, rows, vocab);
    const auto gpu_ids = put<int32_t>(*gpu_, std::vector<int32_t>(static_cast<size_t>(rows), -7), rows, 1);
    const std::string where = "vocab " + std::to_string(vocab) + " rows " + std::to_string(rows) + " " +
                              describe(params) + (penalties ? " with penalties" : "");
    EXPECT_TRUE(cpu_.sample(cpu_logits, step, cpu_ids).ok()) << where;
    const Status st = gpu_->sample(gpu_logits, step, gpu_ids);
    EXPECT_TRUE(st.ok()) << where << ": " << st.message();
    std::vector<int32_t> got(static_cast<size_t>(rows), -1);
    EXPECT_TRUE(gpu_->download(gpu_ids.data, got.data(), got.size() * sizeof(int32_t)).ok()) << where;
    // The logits are an input: the op must not change them.
    std::vector<float> after(logits.size());
    EXPECT_TRUE(gpu_->download(gpu_logits.data, after.data(), after.size() * sizeof(float)).ok());
    EXPECT_EQ(std::memcmp(after.data(), logits.data(), after.size() * sizeof(float)), 0) << where;
    int exact = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t want = cpu_ids.data[r], have = got[static_cast<size_t>(r)];
      if (want == have) {
        ++exact;
        continue;
      }
      // Only a draw at a cumulative boundary may differ: the CPU with u01 moved by 1e-12 must agree.
      std::vector<float> row(logits.begin() + r * vocab, logits.begin() + (r + 1) * vocab);
      if (penalties)
        apply_penalty_counts(row,
                             std::span<const PenaltyCount>(step.penalties.begin() + step.penalty_offsets[r],
                                                           step.penalties.begin() + step.penalty_offsets[r + 1]),
                             params);
      SampleScratch scratch;
      const double u = step.u01[static_cast<size_t>(r)];
      const bool at_boundary = sample_with_uniform(row, params, std::max(0.0, u - 1e-12), scratch) == have ||
                               sample_with_uniform(row, params, std::min(0.999999999999, u + 1e-12), scratch) == have;
      EXPECT_TRUE(at_boundary) << where << " row " << r << ": gpu " << have << ", cpu " << want << " (u01 " << u
                               << ")";
    }
    return exact;
  }

  CpuBackend cpu_;
  std::unique_ptr<Backend> gpu_;
  std::vector<ScopedBuffer> keep_;  // declared after the backends: freed first
};

TEST_F(GpuSample, MatchesCpuAcrossVocabulariesAndParameters) {
  const std::vector<SamplingParams> grid = {
      make_params(0.0f, 0, 1.0f, 0.0f),    make_params(1.0f, 0, 1.0f, 0.0f),   make_params(0.7f, 40, 1.0f, 0.0f),
      make_params(1.2f, 0, 0.9f, 0.0f),    make_params(0.8f, 0, 1.0f, 0.05f),  make_params(0.9f, 50, 0.95f, 0.02f),
      make_params(1.0f, 1, 1.0f, 0.0f),    make_params(3.0f, 1024, 0.7f, 0.0f), make_params(1.5f, 2000, 1.0f, 0.0f),
      make_params(0.5f, 200000, 1.0f, 0.01f)};
  int rows_total = 0, exact = 0;
  uint64_t seed = 1;
  for (int64_t vocab : {int64_t{1000}, int64_t{32000}, int64_t{128256}})
    for (const SamplingParams& p : grid)
      for (int64_t rows : {int64_t{1}, int64_t{3}, int64_t{8}}) {
        exact += compare(vocab, rows, p, seed++, false);
        rows_total += static_cast<int>(rows);
      }
  // A draw within ~1e-15 of a boundary has that probability: with random draws essentially every row is exact, so
  // more than one row in a hundred at a boundary means the device's probabilities are off, not rounded.
  EXPECT_GE(exact * 100, rows_total * 99) << exact << " of " << rows_total << " rows gave the CPU's id";
}

TEST_F(GpuSample, PenaltiesMatchCpu) {
  const std::vector<SamplingParams> grid = {make_params(0.0f, 0, 1.0f, 0.0f, 1.3f, 0.2f, 0.1f),
                                            make_params(1.0f, 0, 1.0f, 0.0f, 1.1f, 0.0f, 0.0f),
                                            make_params(0.8f, 40, 0.9f, 0.0f, 1.5f, 0.5f, 0.25f),
                                            make_params(1.0f, 0, 1.0f, 0.05f, 0.8f, -0.3f, 0.4f)};
  uint64_t seed = 1000;
  int rows_total = 0, exact = 0;
  for (int64_t vocab : {int64_t{1000}, int64_t{32000}})
    for (const SamplingParams& p : grid)
      for (int64_t rows : {int64_t{1}, int64_t{5}}) {
        exact += compare(vocab, rows, p, seed++, true);
        rows_total += static_cast<int>(rows);
      }
  EXPECT_GE(exact * 100, rows_total * 99) << exact << " of " << rows_total << " rows gave the CPU's id";
}

// Rows of only NaN give 0 on both; +inf logits make the CPU's probabilities NaN, which the device reproduces.
TEST_F(GpuSample, AllNanAndInfiniteRows) {
  for (const SamplingParams& p : {make_params(0.0f, 0, 1.0f, 0.0f), make_params(1.0f, 0, 1.0f, 0.0f),
                                  make_params(1.0f, 10, 0.9f, 0.1f)}) {
    for (int kind = 0; kind < 2; ++kind) {
      const int64_t vocab = 3000;
      std::vector<float> logits = test::random_normal(static_cast<size_t>(vocab), 77 + kind);
      if (kind == 0) logits.assign(logits.size(), std::numeric_limits<float>::quiet_NaN());
      else logits[1234] = logits[2345] = std::numeric_limits<float>::infinity();
      SampleStep step;
      step.params = p;
      step.u01 = {0.37};
      const auto cl = put<float>(cpu_, logits, 1, vocab);
      const auto ci = put<int32_t>(cpu_, {-3}, 1, 1);
      const auto gl = put<float>(*gpu_, logits, 1, vocab);
      const auto gi = put<int32_t>(*gpu_, {-7}, 1, 1);
      ASSERT_TRUE(cpu_.sample(cl, step, ci).ok());
      ASSERT_TRUE(gpu_->sample(gl, step, gi).ok());
      int32_t got = -1;
      ASSERT_TRUE(gpu_->download(gi.data, &got, sizeof got).ok());
      EXPECT_EQ(got, ci.data[0]) << "kind " << kind << " " << describe(p);
    }
  }
}

// Greedy steps read a row in up to 64 slices (argmax_rows_split) and merge the slices' winners: equal maxima on
// both sides of a slice boundary (the lower id wins), the maximum in the last entry, a row whose only numbers are in
// one slice, a vocabulary of one entry and vocabularies around one block's pass (1024 entries) and the 128k one.
TEST_F(GpuSample, GreedyFindsTheFirstMaximumAcrossSlices) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const int64_t vocab : {int64_t{1}, int64_t{1023}, int64_t{1024}, int64_t{1025}, int64_t{50000},
                              int64_t{128256}}) {
    // The slice length argmax_rows_split picks: at least 1024 entries, at most 64 slices.
    const int64_t slices = std::min<int64_t>(64, (vocab + 1023) / 1024);
    const int64_t slice = (vocab + slices - 1) / slices;
    const int64_t rows = 4;
    std::vector<float> logits;
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> row = test::random_normal(static_cast<size_t>(vocab), 900 + vocab + r, 2.0f);
      if (vocab > 1) {
        if (r == 0 && slice < vocab) row[static_cast<size_t>(slice - 1)] = row[static_cast<size_t>(slice)] = 50.0f;
        if (r == 1) row[static_cast<size_t>(vocab - 1)] = 50.0f;
        if (r == 2) {
          for (float& v : row) v = nan;
          for (int64_t j = vocab / 2; j < std::min(vocab, vocab / 2 + 7); ++j) row[static_cast<size_t>(j)] = -float(j);
        }
      }
      logits.insert(logits.end(), row.begin(), row.end());
    }
    SampleStep step;
    step.params = make_params(0.0f, 0, 1.0f, 0.0f);
    step.u01.assign(static_cast<size_t>(rows), 0.5);
    const auto cl = put<float>(cpu_, logits, rows, vocab);
    const auto ci = put<int32_t>(cpu_, std::vector<int32_t>(static_cast<size_t>(rows), -3), rows, 1);
    const auto gl = put<float>(*gpu_, logits, rows, vocab);
    const auto gi = put<int32_t>(*gpu_, std::vector<int32_t>(static_cast<size_t>(rows), -7), rows, 1);
    ASSERT_TRUE(cpu_.sample(cl, step, ci).ok());
    const Status st = gpu_->sample(gl, step, gi);
    ASSERT_TRUE(st.ok()) << st.message();
    std::vector<int32_t> got(static_cast<size_t>(rows), -1);
    ASSERT_TRUE(gpu_->download(gi.data, got.data(), got.size() * sizeof(int32_t)).ok());
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_EQ(got[static_cast<size_t>(r)], ci.data[r]) << "vocab " << vocab << " row " << r;
    if (vocab > 1 && slice < vocab) EXPECT_EQ(got[0], slice - 1) << "vocab " << vocab << ": the lower of two maxima";
    if (vocab > 1) EXPECT_EQ(got[1], vocab - 1) << "vocab " << vocab << ": the last entry";
  }
}

TEST_F(GpuSample, RejectsBadStepsWithoutLaunching) {
  const auto gl = put<float>(*gpu_, test::random_normal(2 * 100, 5), 2, 100);
  const auto gi = put<int32_t>(*gpu_, {-7, -7}, 2, 1);
  SampleStep step;
  step.params = make_params(1.0f, 0, 1.0f, 0.0f);
  step.u01 = {0.5};
  EXPECT_FALSE(gpu_->sample(gl, step, gi).ok());
  step.u01 = {0.5, 0.5};
  step.penalty_offsets = {0, 1, 1};
  step.penalties = {{100, 1}};
  EXPECT_FALSE(gpu_->sample(gl, step, gi).ok());
  EXPECT_TRUE(gpu_->synchronize().ok());
}

}  // namespace
}  // namespace qrt
