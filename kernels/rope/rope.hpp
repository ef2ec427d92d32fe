// Rotary position embedding, in place, with the frequencies computed on the host (models/rope.hpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/status.hpp"

namespace qrt::kernels {

struct RopeShape {
  int64_t tokens = 0;
  int heads = 0;
  int head_dim = 0;
  int rot_dim = 0;            // even, <= head_dim; the first rot_dim elements of each head rotate
  float attn_factor = 1.0f;   // multiplies cos and sin
  bool interleaved = false;   // pairs (2i, 2i+1) (GGUF llama); else (i, i + rot_dim/2) (HF / NEOX)
};

// x: [tokens, heads * head_dim] (in place); positions: [tokens]; inv_freq: [rot_dim / 2] (device pointers).
// Pair i of every head of token t turns by positions[t] * inv_freq[i], computed in double as the CPU reference
// does: a float angle would lose whole hundredths of a radian at positions in the tens of thousands.
Status rope(float* x, const int32_t* positions, const float* inv_freq, const RopeShape& shape, cudaStream_t stream);

}  // namespace qrt::kernels
