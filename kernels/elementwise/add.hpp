// Elementwise ops (the residual add, a bias broadcast over rows, scaling and soft-capping) and the row gather
// before the output head.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/status.hpp"

namespace qrt::kernels {

// out = a + b.  a, b, out: [n] device pointers; out may alias a or b exactly.
Status add(const float* a, const float* b, int64_t n, float* out, cudaStream_t stream);

// out = s * x (Gemma's embedding scale).  x, out: [n]; out may alias x exactly.
Status scale(const float* x, float s, int64_t n, float* out, cudaStream_t stream);

// out = cap * tanh(x / cap) (Gemma 2's final logit soft-capping).  x, out: [n]; out may alias x exactly.
Status softcap(const float* x, float cap, int64_t n, float* out, cudaStream_t stream);

// y[r, :] += table[ids[r], :] for r < rows (expert biases); an id outside [0, table_rows) adds nothing (the ids come
// from the router on the device).  y: [rows, cols]; table: [table_rows, cols]; ids: [rows].
Status add_indexed_rows(float* y, const float* table, int64_t table_rows, const int32_t* ids, int64_t rows,
                        int64_t cols, cudaStream_t stream);

// out[r, :] = [a[r, :] | b[r, :]].  a: [rows, a_cols]; b: [rows, b_cols]; out: [rows, a_cols + b_cols], overlapping
// neither.
Status concat_cols(const float* a, int64_t a_cols, const float* b, int64_t b_cols, int64_t rows, float* out,
                   cudaStream_t stream);

// y[r, c] += bias[c].  y: [rows, cols]; bias: [cols].
Status add_bias_rows(float* y, const float* bias, int64_t rows, int64_t cols, cudaStream_t stream);

// out[i, :] = x[rows[i], :] for i < k; a row index outside [0, x_rows) leaves out row i unwritten (the host checks
// them; a kernel cannot report).  x: [x_rows, cols]; rows: [k] (device values); out: [k, cols].
Status gather_rows(const float* x, int64_t x_rows, int64_t cols, const int32_t* rows, int64_t k, float* out,
                   cudaStream_t stream);

}  // namespace qrt::kernels
