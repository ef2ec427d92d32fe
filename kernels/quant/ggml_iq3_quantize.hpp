// Quantizers of IQ3_XXS (98-byte super-blocks) and IQ3_S (110-byte super-blocks): the algorithm llama-quantize
// runs (ggml's quantize_iq3_xxs / quantize_iq3_s), with or without an importance matrix, re-implemented from its
// description with the same float32 operations in the same order, so that the bytes match ggml's (checked against
// vectors recorded from ggml, tests/oracle/quant/ggml_vectors). Host-only.
#pragma once

#include <cstdint>

namespace qrt::quant {

// One row of n values (n a multiple of 256) into its n / 256 blocks at dst. importance: n per-column weights (an
// imatrix column's mean squared activations), or nullptr for ggml's unweighted behaviour. Returns false where ggml
// would abort (a group for which no grid point can be chosen, e.g. when squares of the values overflow); the row's
// bytes are then all zero.
bool quantize_row_iq3_xxs(const float* x, int64_t n, const float* importance, uint8_t* dst);
bool quantize_row_iq3_s(const float* x, int64_t n, const float* importance, uint8_t* dst);

}  // namespace qrt::quant
