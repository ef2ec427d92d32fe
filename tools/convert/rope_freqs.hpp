// Llama 3.x RoPE scaling as GGUF carries it. A GGUF file has no keys for it: llama.cpp's converter writes a
// rope_freqs tensor of one divisor per rotary pair instead, which a reader applies to the unscaled frequencies.
// Hugging Face's config.json has the rule's parameters (factor, low/high_freq_factor, the original context). These
// turn one into the other, both ways.
#pragma once

#include <vector>

#include "models/model_config.hpp"
#include "qrt/status.hpp"

namespace qrt::convert {

// The divisors of the llama3 rule for `rope` (theta, rot_dim or head_dim, factor, low/high_freq_factor,
// original_context): pairs of wavelength below original_context / high_freq_factor keep their frequency (1), above
// original_context / low_freq_factor are interpolated by `factor`, and the band between blends the two.
std::vector<float> llama3_rope_divisors(const RopeConfig& rope, int head_dim);

// The llama3 parameters that reproduce `divisors` (a rope_freqs tensor) for `rope`'s theta and rotary dims: factor
// from the largest divisor, the original context from a pair in the blended band, the band's edges at Llama 3's
// low/high_freq_factor of 1 and 4. Refused when no such parameters give every divisor back within 1e-5 (a tensor
// from another rule, which config.json cannot express). On success `rope` has scaling kLlama3; all divisors 1 leave
// it unscaled.
Status llama3_rope_from_divisors(const std::vector<float>& divisors, int head_dim, RopeConfig* rope);

}  // namespace qrt::convert
