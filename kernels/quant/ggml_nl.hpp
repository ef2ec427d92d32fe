// GGML 32-element blocks with a non-linear 4-bit code book: IQ4_NL (type 20) and GGML's MXFP4 (type 39, the
// 17-byte block of gpt-oss), spec/ggml.md §2.2. Decode only.
//
// Both share Q4_0's nibble placement: byte j's low nibble is element j, its high nibble element j + 16. The code
// book (kvalues_iq4nl / kvalues_mxfp4) lives in iquant_tables.hpp so the device reads it from constant memory.
// Each output is one float32 product (scale · level), the same expression gguf-py evaluates, so decoding is
// bit-exact against gguf.quants.dequantize.
#pragma once

#include <cstddef>

#include "kernels/quant/format_list.hpp"
#include "kernels/quant/ggml_iq4_quantize.hpp"
#include "kernels/quant/ggml_legacy.hpp"
#include "kernels/quant/iquant_tables.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

struct block_iq4_nl {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // 32 nibbles: indices into kvalues_iq4nl
};
static_assert(sizeof(block_iq4_nl) == 18, "IQ4_NL block is 18 bytes");

// Named apart from the OCP/UQFF MXFP4 family ("mxfp4"), whose layout keeps scales in a separate part.
struct block_mxfp4_ggml {
  uint8_t e;       // E8M0 shared exponent
  uint8_t qs[16];  // 32 nibbles: E2M1 codes
};
static_assert(sizeof(block_mxfp4_ggml) == 17, "GGML MXFP4 block is 17 bytes");

template <>
struct FormatTraits<FormatId::kIQ4_NL> : GgmlBlockBase<32, sizeof(block_iq4_nl)> {
  static constexpr int ggml_type = 20;
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    if (p.importance != nullptr)
      return quantize_weighted_rows<FormatTraits>("iq4_nl", x, rows, cols, p, out, quantize_row_iq4_nl);
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, quantize_iq4_nl_block);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_iq4_nl, d));
    const uint8_t* qs = b + offsetof(block_iq4_nl, qs);
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(iq_tables::kvalues_iq4nl(qs[j] & 0x0Fu));
      out[j + 16] = d * static_cast<float>(iq_tables::kvalues_iq4nl(qs[j] >> 4));
    }
  }
};

template <>
struct FormatTraits<FormatId::kMXFP4_GGML> : GgmlBlockBase<32, sizeof(block_mxfp4_ggml)> {
  static constexpr int ggml_type = 39;
  static constexpr bool has_quantizer = true;

  // ggml's reference quantizer: the shared exponent puts the block's largest magnitude in E2M1's top binade
  // (e = floor(log2(amax)) - 2 + 127), then every element takes the nearest doubled E2M1 value, the first of
  // equally near ones in table order.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, [](const float* xb, uint8_t* dst) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
      const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127) : 0;
      const float d = e8m0_to_f32_half(e);
      auto nearest = [&](float v) {
        int best = 0;
        float best_err = std::fabs(d * static_cast<float>(iq_tables::kvalues_mxfp4(0)) - v);
        for (int k = 1; k < 16; ++k) {
          const float err = std::fabs(d * static_cast<float>(iq_tables::kvalues_mxfp4(k)) - v);
          if (err < best_err) {
            best = k;
            best_err = err;
          }
        }
        return static_cast<uint8_t>(best);
      };
      dst[offsetof(block_mxfp4_ggml, e)] = e;
      uint8_t* qs = dst + offsetof(block_mxfp4_ggml, qs);
      for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(nearest(xb[j]) | (nearest(xb[j + 16]) << 4));
    });
  }

  // 2^(e - 128) as float32: half the OCP E8M0 value, because kvalues_mxfp4 holds the E2M1 values doubled.
  // e = 0 and 1 give the subnormals 2^-128 and 2^-127; e = 0xFF (the OCP NaN code) is 2^127, as in ggml.
  QRT_HD static float e8m0_to_f32_half(uint8_t e) {
    const uint32_t bits = e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23);
    return bits_to_f32(bits);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = e8m0_to_f32_half(b[offsetof(block_mxfp4_ggml, e)]);
    const uint8_t* qs = b + offsetof(block_mxfp4_ggml, qs);
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(iq_tables::kvalues_mxfp4(qs[j] & 0x0Fu));
      out[j + 16] = d * static_cast<float>(iq_tables::kvalues_mxfp4(qs[j] >> 4));
    }
  }
};

}  // namespace qrt::quant
