// The row order of Q and K weights (and biases) in llama-family GGUF files. llama.cpp's converter interleaves each
// head's rows so that GGUF's interleaved RoPE rotates the pairs Hugging Face's half-split RoPE rotates: the head's row
// i + half * d/2 (i < d/2, half 0 or 1) moves to row 2i + half. Whole rows move, so any row-major encoding (GGML
// blocks, floats; a bias is rows of one element) is reordered without decoding.
#pragma once

#include <cstdint>
#include <cstring>

namespace qrt::convert {

// `in` and `out`: rows * row_bytes bytes, not overlapping; rows a multiple of heads, each head's rows even.
// inverse = false: Hugging Face order -> GGUF; true: back.
inline void reorder_rope_rows(const uint8_t* in, uint8_t* out, int64_t rows, uint64_t row_bytes, int heads,
                              bool inverse) {
  const int64_t per_head = rows / heads, half = per_head / 2;
  for (int h = 0; h < heads; ++h)
    for (int64_t r = 0; r < per_head; ++r) {
      const int64_t hf = h * per_head + r, gguf = h * per_head + (r % half) * 2 + r / half;
      std::memcpy(out + (inverse ? hf : gguf) * row_bytes, in + (inverse ? gguf : hf) * row_bytes, row_bytes);
    }
}

}  // namespace qrt::convert
