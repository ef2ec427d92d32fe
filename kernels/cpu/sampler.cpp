#include "kernels/cpu/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>

namespace qrt {

Status validate_sampling_params(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return invalid_argument("temperature must be >= 0, got " + std::to_string(p.temperature));
  if (p.top_k < 0) return invalid_argument("top-k must be >= 0, got " + std::to_string(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return invalid_argument("top-p must be in (0, 1], got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return invalid_argument("min-p must be in [0, 1], got " + std::to_string(p.min_p));
  if (!(p.repetition_penalty > 0.0f))
    return invalid_argument("repetition penalty must be > 0, got " + std::to_string(p.repetition_penalty));
  return ok_status();
}

Result<Sampler> Sampler::create(const SamplingParams& p) {
  QRT_TRY(validate_sampling_params(p));
  return Sampler(p);
}

std::vector<PenaltyCount> count_penalty_tokens(std::span<const int> history, size_t vocab, const SamplingParams& p) {
  std::vector<PenaltyCount> out;
  if (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return out;
  size_t start = 0;
  if (p.penalty_last_n >= 0 && history.size() > static_cast<size_t>(p.penalty_last_n))
    start = history.size() - static_cast<size_t>(p.penalty_last_n);
  std::unordered_map<int, int> counts;
  for (size_t i = start; i < history.size(); ++i)
    if (history[i] >= 0 && static_cast<size_t>(history[i]) < vocab) ++counts[history[i]];
  out.reserve(counts.size());
  for (auto [tok, n] : counts) out.push_back({tok, n});
  std::sort(out.begin(), out.end(), [](const PenaltyCount& a, const PenaltyCount& b) { return a.token < b.token; });
  return out;
}

void apply_penalty_counts(std::span<float> logits, std::span<const PenaltyCount> counts, const SamplingParams& p) {
  for (const PenaltyCount& c : counts) {
    float& l = logits[static_cast<size_t>(c.token)];
    l = l > 0.0f ? l / p.repetition_penalty : l * p.repetition_penalty;
    l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(c.count);
  }
}

void apply_penalties(std::span<float> logits, std::span<const int> history, const SamplingParams& p) {
  const std::vector<PenaltyCount> counts = count_penalty_tokens(history, logits.size(), p);
  apply_penalty_counts(logits, counts, p);
}

namespace {

// The sampling chain after the penalties. `draw` gives u01 in [0, 1) and is called only when a draw is needed
// (temperature > 0 and some logit is not NaN), so Sampler consumes its engine exactly as it always has.
template <class Draw>
int sample_penalized(std::span<const float> work, const SamplingParams& params, Draw&& draw, SampleScratch& s) {
  const int vocab = static_cast<int>(work.size());
  if (params.temperature == 0.0f) {
    // Greedy: the first maximum, as llama2.c and llama.cpp break ties.
    return static_cast<int>(std::max_element(work.begin(), work.end()) - work.begin());
  }
  std::vector<int>& candidates = s.candidates;
  std::vector<double>& probs = s.probs;
  // Candidates sorted by logit (descending); NaN logits never survive.
  candidates.clear();
  for (int i = 0; i < vocab; ++i)
    if (!std::isnan(work[static_cast<size_t>(i)])) candidates.push_back(i);
  if (candidates.empty()) return 0;
  auto by_logit = [&](int a, int b) {
    const float la = work[static_cast<size_t>(a)], lb = work[static_cast<size_t>(b)];
    return la > lb || (la == lb && a < b);
  };
  size_t keep = candidates.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = static_cast<size_t>(params.top_k);
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<long>(keep), candidates.end(), by_logit);
    candidates.resize(keep);
  } else {
    std::sort(candidates.begin(), candidates.end(), by_logit);
  }
  // Softmax of logit / T over the candidates, in double so tiny probabilities are not lost.
  const double inv_t = 1.0 / params.temperature;
  const double top = work[static_cast<size_t>(candidates[0])];
  probs.resize(candidates.size());
  double sum = 0.0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    probs[i] = std::exp((work[static_cast<size_t>(candidates[i])] - top) * inv_t);
    sum += probs[i];
  }
  for (double& q : probs) q /= sum;
  // top-p: the smallest prefix whose mass reaches top_p (always at least one token).
  if (params.top_p < 1.0f) {
    double cum = 0.0;
    size_t n = 0;
    while (n < probs.size()) {
      cum += probs[n++];
      if (cum >= params.top_p) break;
    }
    probs.resize(n);
    candidates.resize(n);
  }
  // min-p: relative to the most likely token.
  if (params.min_p > 0.0f) {
    const double floor = params.min_p * probs[0];
    size_t n = 1;
    while (n < probs.size() && probs[n] >= floor) ++n;
    probs.resize(n);
    candidates.resize(n);
  }
  const double mass = std::accumulate(probs.begin(), probs.end(), 0.0);
  // std::uniform_real_distribution<double>(0, mass) is generate_canonical * (mass - 0) + 0: the same value.
  const double r = draw() * mass;
  double cum = 0.0;
  for (size_t i = 0; i < probs.size(); ++i) {
    cum += probs[i];
    if (r < cum) return candidates[i];
  }
  return candidates.back();
}

}  // namespace

int sample_with_uniform(std::span<const float> penalized_logits, const SamplingParams& p, double u01,
                        SampleScratch& scratch) {
  return sample_penalized(penalized_logits, p, [u01] { return u01; }, scratch);
}

int Sampler::sample(std::span<const float> logits, std::span<const int> history) {
  work_.assign(logits.begin(), logits.end());
  apply_penalties(work_, history, params_);
  auto draw = [this] { return std::generate_canonical<double, std::numeric_limits<double>::digits>(rng_); };
  return sample_penalized(work_, params_, draw, scratch_);
}

}  // namespace qrt
