#include "runtime/src/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>

namespace qrt {

Result<Sampler> Sampler::create(const SamplingParams& p) {
  if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
    return invalid_argument("temperature must be >= 0, got " + std::to_string(p.temperature));
  if (p.top_k < 0) return invalid_argument("top-k must be >= 0, got " + std::to_string(p.top_k));
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) return invalid_argument("top-p must be in (0, 1], got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) return invalid_argument("min-p must be in [0, 1], got " + std::to_string(p.min_p));
  if (!(p.repetition_penalty > 0.0f))
    return invalid_argument("repetition penalty must be > 0, got " + std::to_string(p.repetition_penalty));
  return Sampler(p);
}

void apply_penalties(std::span<float> logits, std::span<const int> history, const SamplingParams& p) {
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

int Sampler::sample(std::span<const float> logits, std::span<const int> history) {
  work_.assign(logits.begin(), logits.end());
  apply_penalties(work_, history, params_);
  const int vocab = static_cast<int>(work_.size());
  if (params_.temperature == 0.0f) {
    // Greedy: the first maximum, as llama2.c and llama.cpp break ties.
    return static_cast<int>(std::max_element(work_.begin(), work_.end()) - work_.begin());
  }
  // Candidates sorted by logit (descending); NaN logits never survive.
  candidates_.clear();
  for (int i = 0; i < vocab; ++i)
    if (!std::isnan(work_[static_cast<size_t>(i)])) candidates_.push_back(i);
  if (candidates_.empty()) return 0;
  auto by_logit = [&](int a, int b) {
    return work_[static_cast<size_t>(a)] > work_[static_cast<size_t>(b)] || (work_[static_cast<size_t>(a)] ==
                                                                                 work_[static_cast<size_t>(b)] && a < b);
  };
  size_t keep = candidates_.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<long>(keep), candidates_.end(), by_logit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax of logit / T over the candidates, in double so tiny probabilities are not lost.
  const double inv_t = 1.0 / params_.temperature;
  const double top = work_[static_cast<size_t>(candidates_[0])];
  probs_.resize(candidates_.size());
  double sum = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    probs_[i] = std::exp((work_[static_cast<size_t>(candidates_[i])] - top) * inv_t);
    sum += probs_[i];
  }
  for (double& q : probs_) q /= sum;
  // top-p: the smallest prefix whose mass reaches top_p (always at least one token).
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
  // min-p: relative to the most likely token.
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

}  // namespace qrt
