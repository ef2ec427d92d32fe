// ggml's importance-weighted quantizers (what llama-quantize runs when given an imatrix) for the legacy blocks
// Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K .. Q6_K, re-implemented with the same float32 operations in the same
// order so that the bytes match ggml's (checked against vectors recorded from ggml,
// tests/oracle/quant/ggml_vectors/weighted). Host-only and stateless, so safe to call from several threads.
//
// They work a row at a time because some of them weight each element by the spread of the whole row (the legacy
// types) rather than of its block. Every function takes:
//   x           one row of n values (finite; callers check, as quantize_ggml_blocks does)
//   n           the row length, a positive multiple of the format's block size (32, or 256 for the K-quants)
//   importance  n per-column weights, e.g. an imatrix's mean squared activations (never null)
//   dst         n / block_elems blocks of the format's layout (block_* structs in ggml_legacy.hpp /
//               ggml_kquants.hpp), written in full
#pragma once

#include <cstdint>

namespace qrt::quant {

void quantize_row_q4_0_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst);
void quantize_row_q4_1_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst);
void quantize_row_q5_0_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst);
void quantize_row_q5_1_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst);
void quantize_row_q2_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst);
void quantize_row_q3_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst);
void quantize_row_q4_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst);
void quantize_row_q5_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst);
void quantize_row_q6_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst);

}  // namespace qrt::quant
