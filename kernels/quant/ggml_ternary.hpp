// GGML ternary 256-element blocks: TQ1_0 (type 34, base-3 packed) and TQ2_0 (type 35, 2 bits per weight),
// spec/ggml.md §2.4. Every output is d · (q − 1) in float32, which is what gguf-py computes, so the decoders are
// bit-exact against gguf.quants.dequantize. The quantizers are ggml's reference ones (quantize_row_tq{1,2}_0_ref):
// d = the block's largest magnitude, each element rounded to the nearest of -d, 0, d.
#pragma once

#include <cstddef>

#include "kernels/quant/format_list.hpp"
#include "kernels/quant/ggml_legacy.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

// The ternary code of x in a block of scale 1/id: round(x · id) + 1, in {0, 1, 2} (ggml's lroundf, half away).
inline int ternary_code(float x, float id) { return static_cast<int>(round_half_away(x * id)) + 1; }

// A 256-element block's scale, d = its largest magnitude (*amax), and the 1/d ternary_code takes (0 for a zero block).
inline float ternary_scale(const float* xb, float* amax) {
  *amax = 0.0f;
  for (int j = 0; j < 256; ++j) *amax = std::fmax(*amax, std::fabs(xb[j]));
  return *amax != 0.0f ? 1.0f / *amax : 0.0f;
}

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
  static constexpr bool has_quantizer = true;

  // Five codes c0..c4 (c0 first) as the base-3 number c0 c1 c2 c3 c4, stored as the byte ceil(256 · n / 243).
  static uint8_t pack_trits(const int* c, int n) {
    int q = 0;
    for (int i = 0; i < n; ++i) q = q * 3 + c[i];
    for (int i = n; i < 5; ++i) q *= 3;  // fewer than five: the first code still in the leading trit
    return static_cast<uint8_t>((q * 256 + 242) / 243);
  }

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, [](const float* xb, uint8_t* dst) {
      float amax;
      const float id = ternary_scale(xb, &amax);
      uint8_t* qs = dst + offsetof(block_tq1_0, qs);
      uint8_t* qh = dst + offsetof(block_tq1_0, qh);
      int c[5];
      // The same trit-major order decode_block reads: bytes 0..31 hold elements m + 32n, bytes 32..47 elements
      // 160 + m + 16n, the qh bytes elements 240 + j + 4n.
      for (int m = 0; m < 32; ++m) {
        for (int n = 0; n < 5; ++n) c[n] = ternary_code(xb[m + 32 * n], id);
        qs[m] = pack_trits(c, 5);
      }
      for (int m = 0; m < 16; ++m) {
        for (int n = 0; n < 5; ++n) c[n] = ternary_code(xb[160 + m + 16 * n], id);
        qs[32 + m] = pack_trits(c, 5);
      }
      for (int j = 0; j < 4; ++j) {
        for (int n = 0; n < 4; ++n) c[n] = ternary_code(xb[240 + j + 4 * n], id);
        qh[j] = pack_trits(c, 4);
      }
      store_f16(dst + offsetof(block_tq1_0, d), amax);
    });
  }

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
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, [](const float* xb, uint8_t* dst) {
      float amax;
      const float id = ternary_scale(xb, &amax);
      uint8_t* qs = dst + offsetof(block_tq2_0, qs);
      for (int c = 0; c < 2; ++c)
        for (int m = 0; m < 32; ++m) {
          int q = 0;
          for (int l = 0; l < 4; ++l) q |= ternary_code(xb[128 * c + 32 * l + m], id) << (2 * l);
          qs[32 * c + m] = static_cast<uint8_t>(q);
        }
      store_f16(dst + offsetof(block_tq2_0, d), amax);
    });
  }

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
