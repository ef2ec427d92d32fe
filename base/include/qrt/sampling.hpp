// Sampling parameters, shared by the public API and the samplers (CPU here; the CUDA sampler reads the same).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace qrt {

struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax)
  int top_k = 0;             // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;        // nucleus: smallest set with cumulative probability >= top_p; 1 = off
  float min_p = 0.0f;        // drop tokens whose probability < min_p * max probability; 0 = off
  float repetition_penalty = 1.0f;  // llama.cpp/HF style: divide positive logits, multiply negative ones
  float presence_penalty = 0.0f;    // subtract once for any token already present
  float frequency_penalty = 0.0f;   // subtract per occurrence
  int penalty_last_n = 64;          // how many recent tokens the penalties look at (-1 = all)
  uint64_t seed = 0;
};

}  // namespace qrt
