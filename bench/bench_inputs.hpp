// What the CPU format benchmarks share: a Gaussian test matrix and the quantization parameters of a format.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/quant/formats.hpp"

namespace qrt::bench {

inline std::vector<float> gaussian_matrix(int64_t rows, int64_t cols, unsigned seed, float sigma) {
  std::vector<float> x(static_cast<size_t>(rows * cols));
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, sigma);
  for (float& v : x) v = dist(gen);
  return x;
}

// Group-scaled formats (AFQ, HQQ) in groups of 64 with `scale_type` scales; the others need no parameters.
inline quant::QuantParams bench_params(quant::FormatId id, quant::ScalarType scale_type) {
  quant::QuantParams p;
  p.group_size = quant::format_info(id).block_elems == 0 ? 64 : 0;
  p.scale_type = scale_type;
  return p;
}

}  // namespace qrt::bench
