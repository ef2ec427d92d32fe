// How RoPE pairs the elements of a head: part of the rope op's contract, so it lives with the op (the backends and
// models/model_config.hpp both name it).
#pragma once

namespace qrt {

enum class RopeLayout {
  kInterleaved,  // GGUF `llama`: rotate adjacent pairs (2i, 2i+1); Q/K rows were permuted by the converter
  kHalfSplit,    // HF / NEOX: rotate element i with i + rot_dim/2
};

}  // namespace qrt
