// Turns one position's logits into a token id. The order of operations follows llama.cpp's default chain:
// penalties, then top-k, top-p, min-p on the temperature-scaled distribution, then a seeded draw.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "qrt/sampling.hpp"
#include "qrt/status.hpp"

namespace qrt {

class Sampler {
 public:
  static Result<Sampler> create(const SamplingParams& params);

  // logits: [vocab]; `history` is every token so far (prompt and generated), for the penalties.
  int sample(std::span<const float> logits, std::span<const int> history);

  const SamplingParams& params() const { return params_; }

 private:
  explicit Sampler(const SamplingParams& p) : params_(p), rng_(p.seed) {}
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> work_;          // [vocab] penalized logits
  std::vector<int> candidates_;      // surviving token ids
  std::vector<double> probs_;        // their probabilities
};

// Applies repetition/presence/frequency penalties to `logits` in place (exposed for tests).
void apply_penalties(std::span<float> logits, std::span<const int> history, const SamplingParams& p);

}  // namespace qrt
