// DeepSeek-V2/V3 routing parameters (Backend::moe_route_grouped; the CPU reference and the CUDA kernel).
#pragma once

namespace qrt {

struct MoeRouting {
  bool sigmoid = false;                // scores by sigmoid instead of softmax
  const float* choice_bias = nullptr;  // [experts] (device memory), added to the scores for choosing only; or null
  int groups = 1;                      // equal groups of experts (1: no group limit)
  int groups_used = 1;                 // the best groups whose experts take part
  bool group_top2 = false;             // a group's score: the sum of its two best choice scores, else its best
  bool renormalize = false;            // the chosen weights divided by their sum
  float scale = 1.0f;                  // then multiplied by this
};

}  // namespace qrt
