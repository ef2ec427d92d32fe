// RoPE frequencies from a RopeConfig: the one place that knows the scaling rules (linear, Llama 3.x, YaRN,
// LongRoPE) and
// GGUF's rope_freqs factors. The result is uploaded once; the rope op only multiplies positions by it.
#pragma once

#include <cstdint>
#include <vector>

#include "models/model_config.hpp"
#include "qrt/status.hpp"

namespace qrt {

struct RopeTable {
  RopeLayout layout = RopeLayout::kHalfSplit;
  int head_dim = 0;
  int rot_dim = 0;
  float attn_factor = 1.0f;    // cos/sin multiplier
  std::vector<float> inv_freq;  // [rot_dim / 2]: pair i turns by position * inv_freq[i]
};

// freq_factors, when given (GGUF `rope_freqs`, [rot_dim / 2]), divide each pair's frequency as llama.cpp does.
// Computed in double as Hugging Face's rope initialisers compute them, then rounded to float.
// `context`: the longest context the model serves, which picks LongRoPE's long factors when above its original
// context (other scalings ignore it).
Result<RopeTable> make_rope_table(const RopeConfig& rope, int head_dim,
                                  const std::vector<float>* freq_factors = nullptr, int64_t context = 0);

}  // namespace qrt
