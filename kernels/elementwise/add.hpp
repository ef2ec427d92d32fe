// Elementwise adds: the residual add and a bias broadcast over rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/status.hpp"

namespace qrt::kernels {

// out = a + b.  a, b, out: [n] device pointers; out may alias a or b exactly.
Status add(const float* a, const float* b, int64_t n, float* out, cudaStream_t stream);

// y[r, c] += bias[c].  y: [rows, cols]; bias: [cols].
Status add_bias_rows(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace qrt::kernels
