// Quantizers of IQ4_NL (32-element blocks) and IQ4_XS (256-element super-blocks of 8 sub-blocks with 6-bit
// scales): the algorithm llama-quantize runs, with or without an importance matrix (ggml's quantize_iq4_nl /
// quantize_iq4_xs, search over 15 trial scales), re-implemented from its description with the same float32
// operations in the same order, so that the bytes match ggml's (checked against vectors recorded from ggml,
// tests/oracle/iquants and tests/oracle/quant/ggml_vectors).
#pragma once

#include <cstdint>

namespace qrt::quant {

// One IQ4_NL block (18 bytes: f16 d, 16 bytes of nibbles) from 32 values.
void quantize_iq4_nl_block(const float* x, uint8_t* block);
// One IQ4_XS block (136 bytes: f16 d, scales_h, scales_l[4], qs[128]) from 256 values.
void quantize_iq4_xs_block(const float* x, uint8_t* block);

// One row of n values into its blocks at dst (n a multiple of 32 for IQ4_NL, 256 for IQ4_XS). importance: n
// per-column weights (an imatrix column's mean squared activations), or nullptr for the unweighted behaviour of the
// block functions above, whose bytes are then identical.
void quantize_row_iq4_nl(const float* x, int64_t n, const float* importance, uint8_t* dst);
void quantize_row_iq4_xs(const float* x, int64_t n, const float* importance, uint8_t* dst);

}  // namespace qrt::quant
