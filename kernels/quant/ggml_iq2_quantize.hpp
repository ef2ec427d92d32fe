// Quantizers of IQ2_XXS, IQ2_XS and IQ2_S (256-element super-blocks; groups of 8 magnitudes from a lattice grid
// plus sign bits, 4-bit sub-block scales): the algorithm of ggml's quantize_iq2_xxs / quantize_iq2_xs /
// quantize_iq2_s, re-implemented from its description with the same float32 operations in the same order, so that
// the bytes match ggml's (checked against vectors recorded from ggml, tests/oracle/quant/ggml_vectors). Host-only;
// the grid search tables come from iq_grid_search.hpp.
#pragma once

#include <cstdint>

namespace qrt::quant {

// One row of n values (n a multiple of 256) into its n / 256 blocks at dst. importance: n per-column weights
// (never null for IQ2_XXS / IQ2_XS; null for IQ2_S means ggml's unweighted behaviour). Returns false where
// ggml would abort (no grid point found, e.g. for values whose squares overflow float32); the row's blocks are
// then all zero.
bool quantize_row_iq2_xxs(const float* x, int64_t n, const float* importance, uint8_t* dst);
bool quantize_row_iq2_xs(const float* x, int64_t n, const float* importance, uint8_t* dst);
bool quantize_row_iq2_s(const float* x, int64_t n, const float* importance, uint8_t* dst);

}  // namespace qrt::quant
