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

// Checks the ranges Sampler::create and the backends' sample op accept.
Status validate_sampling_params(const SamplingParams& p);

// How often a token occurs in the window the penalties look at.
struct PenaltyCount {
  int32_t token = 0;
  int32_t count = 0;
};

// Reusable buffers of sample_with_uniform (so a decode loop does not allocate per token).
struct SampleScratch {
  std::vector<int> candidates;  // surviving token ids, best first
  std::vector<double> probs;    // their probabilities
};

class Sampler {
 public:
  static Result<Sampler> create(const SamplingParams& params);

  // logits: [vocab]; `history` is every token so far (prompt and generated), for the penalties.
  int sample(std::span<const float> logits, std::span<const int> history);

  const SamplingParams& params() const { return params_; }

  // The draw sample() would take for its next token, consumed: for backends that sample on the device (with
  // sample_with_uniform's convention). Only a temperature above 0 draws.
  double next_uniform() { return std::generate_canonical<double, 53>(rng_); }

 private:
  explicit Sampler(const SamplingParams& p) : params_(p), rng_(p.seed) {}
  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<float> work_;  // [vocab] penalized logits
  SampleScratch scratch_;
};

// Applies repetition/presence/frequency penalties to `logits` in place (exposed for tests); the same as
// apply_penalty_counts(logits, count_penalty_tokens(history, logits.size(), p), p).
void apply_penalties(std::span<float> logits, std::span<const int> history, const SamplingParams& p);

// The distinct tokens of the last penalty_last_n entries of `history` that lie in [0, vocab), with their counts,
// sorted by token. Empty when every penalty is off (repetition 1, presence 0, frequency 0).
std::vector<PenaltyCount> count_penalty_tokens(std::span<const int> history, size_t vocab, const SamplingParams& p);

// The penalty formula for each (token, count): l = l > 0 ? l / repetition : l * repetition, then
// l -= presence + frequency * count (all in float). Tokens must be distinct and inside `logits`.
void apply_penalty_counts(std::span<float> logits, std::span<const PenaltyCount> counts, const SamplingParams& p);

// Sampler::sample after the penalties, with the random draw given: r = u01 * mass, where u01 in [0, 1) is what
// std::uniform_real_distribution<double> takes from the engine (std::generate_canonical<double, 53>).
//   Temperature 0: the first maximum (std::max_element; a NaN in slot 0 makes it 0). Otherwise the candidates
//   are the non-NaN logits sorted by logit descending, ties to the lower id; top-k keeps the first k; the
//   probabilities are softmax((logit - top) / T) in double; top-p keeps the shortest prefix whose mass reaches
//   top_p; min-p keeps the prefix with probability >= min_p * best; the result is the first candidate i with
//   r < probs[0] + ... + probs[i] (the last one if none). A row of NaN gives 0.
// The seed in `p` is not used.
int sample_with_uniform(std::span<const float> penalized_logits, const SamplingParams& p, double u01,
                        SampleScratch& scratch);

}  // namespace qrt
