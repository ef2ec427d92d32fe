// MXFP4 between UQFF's layout (tag 6: per row, nibble pairs of consecutive elements, element k in the low nibble of
// byte k/2, and a separate E8M0 scale per 32 elements) and GGUF's type 39 (per 32 elements a 17-byte block: the E8M0
// byte, then 16 bytes whose low nibbles hold elements 0..15 and high nibbles 16..31). The 4-bit codes and the
// exponent byte mean the same in both (E2M1 · 2^(e - 127); GGUF keeps doubled E2M1 values and 2^(e - 128)), so
// moving them is lossless both ways (spec/uqff.md §3.3, spec/ggml.md).
#pragma once

#include <cstdint>
#include <vector>

namespace qrt::convert {

// weight: [rows, cols / 2] bytes; scales: [rows, cols / 32]; returns [rows, cols / 32 * 17] bytes. cols % 32 == 0.
std::vector<uint8_t> mxfp4_uqff_to_gguf(const uint8_t* weight, const uint8_t* scales, int64_t rows, int64_t cols);

// The inverse: blocks [rows, cols / 32 * 17] bytes into *weight and *scales (resized).
void mxfp4_gguf_to_uqff(const uint8_t* blocks, int64_t rows, int64_t cols, std::vector<uint8_t>* weight,
                        std::vector<uint8_t>* scales);

}  // namespace qrt::convert
