// Quantizers of IQ1_S and IQ1_M, the 1.56- and 1.75-bit i-quants: ggml's quantize_iq1_s / quantize_iq1_m (the
// algorithm llama-quantize runs), re-implemented from its description with the same float32 operations in the same
// order, so that the bytes match ggml's (checked against vectors recorded from ggml, tests/oracle/quant).
//
// Both formats code each group of 8 values as one of the 2048 points of the IQ1 grid, a subset of the ternary
// lattice (levels -1, 0, +1, all shifted by +1/8 or -1/8). IQ1_S: 32-value sub-blocks, each with one 3-bit scale
// and one shift. IQ1_M: 16-value sub-blocks with a 3-bit scale each and a shift per group of 8. Host-only.
#pragma once

#include <cstdint>

namespace qrt::quant {

// One row of n values (n a multiple of 256) into its n / 256 blocks at dst (50 bytes each for IQ1_S, 56 for
// IQ1_M). importance: n per-column weights (never null for IQ1_S, which ggml refuses to quantize without them; null
// for IQ1_M means ggml's unweighted behaviour, weights x^2). Returns false where ggml would abort (no grid point
// found, or a NaN scale, as with values whose squares overflow); dst then holds no meaningful bytes.
bool quantize_row_iq1_s(const float* x, int64_t n, const float* importance, uint8_t* dst);
bool quantize_row_iq1_m(const float* x, int64_t n, const float* importance, uint8_t* dst);

}  // namespace qrt::quant
