// GGML ternary 256-element blocks: TQ1_0 (type 34, base-3 packed) and TQ2_0 (type 35, 2 bits per weight),
// spec/ggml.md §2.4. Decode only. Every output is d · (q − 1) in float32, which is what gguf-py computes, so the
// decoders are bit-exact against gguf.quants.dequantize.
#pragma once

#include <cstddef>

#include "kernels/quant/format_list.hpp"
#include "kernels/quant/ggml_legacy.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

struct block_tq1_0 {
  uint8_t qs[48];  // 5 trits per byte: elements 0..239
  uint8_t qh[4];   // 4 trits per byte: elements 240..255
  uint16_t d;      // f16 scale
};
static_assert(sizeof(block_tq1_0) == 54, "TQ1_0 block is 54 bytes");

struct block_tq2_0 {
  uint8_t qs[64];  // 4 two-bit codes per byte, q - 1 in {-1, 0, 1, 2}
  uint16_t d;      // f16 scale
};
static_assert(sizeof(block_tq2_0) == 66, "TQ2_0 block is 66 bytes");

template <>
struct FormatTraits<FormatId::kTQ1_0> : GgmlBlockBase<256, sizeof(block_tq1_0)> {
  static constexpr int ggml_type = 34;
  static constexpr bool has_quantizer = false;

  // A byte holds trits t0..t4 as the fixed-point fraction ceil(256 · 0.t0t1t2t3t4 (base 3)). Multiplying by 3^n
  // (mod 256) shifts trit n to the front; (t · 3) >> 8 reads it.
  QRT_HD static float trit(uint8_t byte, uint8_t pow3, float d) {
    const uint8_t shifted = static_cast<uint8_t>(byte * pow3);
    const int t = (static_cast<uint16_t>(shifted) * 3u) >> 8;
    return d * static_cast<float>(t - 1);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const uint8_t* qs = b + offsetof(block_tq1_0, qs);
    const uint8_t* qh = b + offsetof(block_tq1_0, qh);
    const float d = load_f16(b + offsetof(block_tq1_0, d));
    // Trit-major order: trit n of bytes 0..31 is elements 32n..32n+31, then trit n of bytes 32..47 is
    // elements 160+16n.., then trit n of the 4 qh bytes is elements 240+4n...
    uint8_t pow3 = 1;
    for (int n = 0; n < 5; ++n, pow3 = static_cast<uint8_t>(pow3 * 3)) {
      for (int m = 0; m < 32; ++m) out[32 * n + m] = trit(qs[m], pow3, d);
      for (int m = 0; m < 16; ++m) out[160 + 16 * n + m] = trit(qs[32 + m], pow3, d);
      if (n < 4)
        for (int j = 0; j < 4; ++j) out[240 + 4 * n + j] = trit(qh[j], pow3, d);
    }
  }
};

template <>
struct FormatTraits<FormatId::kTQ2_0> : GgmlBlockBase<256, sizeof(block_tq2_0)> {
  static constexpr int ggml_type = 35;
  static constexpr bool has_quantizer = false;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const uint8_t* qs = b + offsetof(block_tq2_0, qs);
    const float d = load_f16(b + offsetof(block_tq2_0, d));
    // Element 128c + 32l + m is bits 2l..2l+1 of qs[32c + m].
    for (int c = 0; c < 2; ++c)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) {
          const int q = (qs[32 * c + m] >> (2 * l)) & 3;
          out[128 * c + 32 * l + m] = d * static_cast<float>(q - 1);
        }
  }
};

}  // namespace qrt::quant
