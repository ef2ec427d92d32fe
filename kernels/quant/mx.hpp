// Microscaling float formats: OCP MXFP4 (UQFF tag 6, Ollama mxfp4), Ollama/MLX MXFP8 and NVFP4
// (spec/uqff.md §3.3, spec/ollama.md §2.5–2.6 and §3.2–3.3), plus the small-float codecs they share with the FP8
// family: E2M1 (FP4), E4M3FN (FP8) and E8M0 (power-of-two scale).
//
// All three store one row as a byte stream along cols (Ollama views the same bytes as u32 words):
//   mxfp4: data [rows, cols/2] two E2M1 codes per byte, even element in the low nibble; scales [rows, cols/32] E8M0
//   mxfp8: data [rows, cols]   one E4M3FN per byte;                                   scales [rows, cols/32] E8M0
//   nvfp4: data [rows, cols/2] as mxfp4;                                             scales [rows, cols/16] E4M3FN
//          times QuantParams::global_scale (Ollama's `.global_scale`, the ModelOpt dequant multiplier; 1 if absent)
#pragma once

#include <cmath>
#include <string>

#include "kernels/quant/family_common.hpp"
#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

// ---- Decoders (exact in float32; host and device) ----

// E2M1: sign bit 3, exponent bits 2..1 (bias 1), mantissa bit 0. Codes 0..7 -> 0, .5, 1, 1.5, 2, 3, 4, 6;
// codes 8..15 are their negations (8 is -0). Only the low 4 bits of `code` are read.
QRT_HD float e2m1_to_f32(uint32_t code) {
  const uint32_t sign = (code & 0x8u) << 28;
  const uint32_t e = (code >> 1) & 0x3u;
  const uint32_t m = code & 0x1u;
  // Exponent 0 is the subnormal 0 or 0.5 (= 2^-1); otherwise (1 + m/2)·2^(e-1), built from the bits.
  const uint32_t mag = e == 0 ? (m ? 0x3F000000u : 0u) : (((e + 126u) << 23) | (m << 22));
  return bits_to_f32(sign | mag);
}

// E4M3FN: sign bit 7, exponent bits 6..3 (bias 7), mantissa bits 2..0; exponent 0 is subnormal m/8·2^-6; no
// infinities; 0x7F and 0xFF are NaN (MLX's own decoder returns ±480 for them; its encoders never emit them).
QRT_HD float e4m3_to_f32(uint32_t byte) {
  const uint32_t sign = (byte & 0x80u) << 24;
  const uint32_t e = (byte >> 3) & 0xFu;
  const uint32_t m = byte & 0x7u;
  if (e == 0xF && m == 0x7) return bits_to_f32(sign | 0x7FC00000u);
  if (e == 0) {
    // m·2^-9 is exact; the sign is applied through the bits so that 0x80 decodes to -0.
    return bits_to_f32(sign | f32_to_bits(static_cast<float>(m) * 0.001953125f));
  }
  return bits_to_f32(sign | ((e + 120u) << 23) | (m << 20));
}

// E8M0: 2^(s-127). s = 0 is 2^-127 (a float32 subnormal), s = 255 is NaN (OCP; MLX decodes it as +inf and its
// encoders never emit it).
QRT_HD float e8m0_to_f32(uint32_t s) {
  s &= 0xFFu;
  if (s == 0xFF) return bits_to_f32(0x7FC00000u);
  return bits_to_f32(s == 0 ? 0x00400000u : (s << 23));
}

// ---- Encoders (host; what the quantizers use) ----

// Round-to-nearest-even into E2M1 with saturation to ±6 (PTX cvt.rn.satfinite, CUTLASS float_e2m1_t): for |x|
// the thresholds are 0.25 (tie to 0), 0.75 (-> 1), 1.25 (-> 1), 1.75 (-> 2), 2.5 (-> 2), 3.5 (-> 4), 5 (-> 4).
// The sign bit of x is kept, so small negatives give -0 (code 8). NaN gives 0.
inline uint8_t f32_to_e2m1(float x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  const float a = std::fabs(x);
  uint8_t c;
  if (a <= 0.25f) c = 0;
  else if (a < 0.75f) c = 1;
  else if (a <= 1.25f) c = 2;
  else if (a < 1.75f) c = 3;
  else if (a <= 2.5f) c = 4;
  else if (a < 3.5f) c = 5;
  else if (a <= 5.0f) c = 6;
  else c = 7;
  return static_cast<uint8_t>(sign | c);
}

// Round-to-nearest-even into E4M3FN with saturation to ±448 (cvt.rn.satfinite); NaN gives 0x7F.
inline uint8_t f32_to_e4m3(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  if (a >= 448.0f) return static_cast<uint8_t>(sign | 0x7E);
  uint32_t code;
  if (a < 0.015625f) {
    // Subnormal range (below 2^-6): multiples of 2^-9. rint rounds half to even; 8·2^-9 = 2^-6 becomes code 8,
    // which is exactly the smallest normal.
    code = static_cast<uint32_t>(std::nearbyint(a * 512.0f));
  } else {
    const uint32_t bits = f32_to_bits(a);
    const uint32_t exp = (bits >> 23) - 127 + 7;  // 1..15 here
    const uint32_t mant = bits & 0x7FFFFFu;
    uint32_t top = mant >> 20;
    const uint32_t rest = mant & 0xFFFFFu;
    if (rest > 0x80000u || (rest == 0x80000u && (top & 1u))) ++top;  // a carry into the exponent is correct
    code = (exp << 3) + top;
    if (code > 0x7E) code = 0x7E;
  }
  return static_cast<uint8_t>(sign | code);
}

// The smallest E8M0 scale >= x (x >= 0), capped at 2^127: the MX scale rule of current MLX (Metal's
// mx_scale_round_up, and CUTLASS float_ue8m0_t on CUDA). Rounding up keeps amax/scale within the element range,
// so no element saturates. 0 (an all-zero group) gives byte 0. NaN gives 255.
inline uint8_t e8m0_round_up(float x) {
  if (std::isnan(x)) return 0xFF;
  if (!(x > 0.0f)) return 0;
  const uint32_t bits = f32_to_bits(x);
  const uint32_t e = bits >> 23, mant = bits & 0x7FFFFFu;
  if (e == 0) return mant <= 0x400000u ? 0 : 1;  // subnormal x: at most 2^-127, or below 2^-126
  const uint32_t s = e + (mant != 0 ? 1u : 0u);
  return static_cast<uint8_t>(s > 254 ? 254 : s);
}

// ---- Formats ----

// ElemBits 4: E2M1 pairs; 8: E4M3. ScaleIsE8M0: E8M0 scale, else E4M3 scale (times params.global_scale).
template <int BlockElems, int ElemBits, bool ScaleIsE8M0>
struct MicroscaledTraitsBase {
  static constexpr int ggml_type = -1;
  static constexpr int block_elems = BlockElems;
  static constexpr int block_bytes = BlockElems * ElemBits / 8;
  static constexpr double bits_per_weight = ElemBits + 8.0 / BlockElems;
  static constexpr bool has_quantizer = true;
  static constexpr float kElemMax = ElemBits == 4 ? 6.0f : 448.0f;

  QRT_HD static float block_scale(const QuantView& v, int64_t row, int64_t block) {
    const uint8_t s = v.scales[row * (v.cols / BlockElems) + block];
    if constexpr (ScaleIsE8M0) {
      return e8m0_to_f32(s);
    } else {
      return e4m3_to_f32(s) * v.params.global_scale;
    }
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const float scale = block_scale(v, row, block);
    const uint8_t* p = v.data + (row * (v.cols / BlockElems) + block) * block_bytes;
    if constexpr (ElemBits == 4) {
      for (int i = 0; i < BlockElems / 2; ++i) {
        out[2 * i] = e2m1_to_f32(p[i] & 0xFu) * scale;
        out[2 * i + 1] = e2m1_to_f32(p[i] >> 4) * scale;
      }
    } else {
      for (int i = 0; i < BlockElems; ++i) out[i] = e4m3_to_f32(p[i]) * scale;
    }
  }

  static Status check_params(int64_t rows, int64_t cols, const QuantParams& p) {
    QRT_TRY(check_matrix_dims(rows, cols, "microscaled fp"));
    if (cols % BlockElems != 0)
      return invalid_argument("row length " + std::to_string(cols) + " is not a multiple of the scale block " +
                              std::to_string(BlockElems));
    if (!ScaleIsE8M0 && !std::isfinite(p.global_scale))
      return invalid_argument("nvfp4: global scale must be finite, found " + std::to_string(p.global_scale));
    return ok_status();
  }

  static PartSizes part_sizes(int64_t rows, int64_t cols, const QuantParams&) {
    const uint64_t r = static_cast<uint64_t>(rows), c = static_cast<uint64_t>(cols);
    return {r * c * ElemBits / 8, r * (c / BlockElems), 0};
  }

  // MLX's fp_quantize (spec/ollama.md §3.3): amax of the block over the element maximum (6 or 448) gives the
  // scale; E8M0 scales round up (see e8m0_round_up), E4M3 scales round to nearest even with saturation; each
  // element is w · (1/decoded scale) rounded to nearest even into the element type (multiplier 0 when the scale
  // decodes to 0). NVFP4 folds a global scale G = params.global_scale (the stored dequant multiplier, Ollama's
  // convention) in the way MLX's global_scale argument does: scale = E4M3(amax/6 · (1/G)), multiplier =
  // (1/G)/decoded. With G = 1 this is exactly Ollama's own quantizer.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    QRT_TRY(check_params(rows, cols, p));
    float enc = 1.0f;
    if constexpr (!ScaleIsE8M0) {
      if (!(p.global_scale > 0.0f))
        return invalid_argument("nvfp4: quantizing needs a positive global scale, found " +
                                std::to_string(p.global_scale));
      enc = 1.0f / p.global_scale;
    }
    const PartSizes sizes = part_sizes(rows, cols, p);
    out->data.assign(sizes.data, 0);
    out->scales.assign(sizes.scales, 0);
    out->biases.clear();
    const int64_t nblocks = rows * cols / BlockElems;
    for (int64_t b = 0; b < nblocks; ++b) {
      const float* w = x + b * BlockElems;
      float amax = 0.0f;
      for (int i = 0; i < BlockElems; ++i) amax = std::fmax(amax, std::fabs(w[i]));
      float decoded;
      if constexpr (ScaleIsE8M0) {
        const uint8_t s = e8m0_round_up(amax / kElemMax);
        out->scales[static_cast<size_t>(b)] = s;
        decoded = e8m0_to_f32(s);
      } else {
        const uint8_t s = f32_to_e4m3(amax / kElemMax * enc);
        out->scales[static_cast<size_t>(b)] = s;
        decoded = e4m3_to_f32(s);
      }
      const float mult = decoded == 0.0f ? 0.0f : enc / decoded;
      uint8_t* dst = out->data.data() + b * block_bytes;
      if constexpr (ElemBits == 4) {
        for (int i = 0; i < BlockElems / 2; ++i)
          dst[i] = static_cast<uint8_t>(f32_to_e2m1(w[2 * i] * mult) | (f32_to_e2m1(w[2 * i + 1] * mult) << 4));
      } else {
        for (int i = 0; i < BlockElems; ++i) dst[i] = f32_to_e4m3(w[i] * mult);
      }
    }
    return ok_status();
  }
};

template <>
struct FormatTraits<FormatId::kMXFP4> : MicroscaledTraitsBase<32, 4, true> {
  static constexpr Family family = Family::kMxfp4;
};
template <>
struct FormatTraits<FormatId::kMXFP8> : MicroscaledTraitsBase<32, 8, true> {
  static constexpr Family family = Family::kMxfp8;
};
template <>
struct FormatTraits<FormatId::kNVFP4> : MicroscaledTraitsBase<16, 4, false> {
  static constexpr Family family = Family::kNvfp4;
};

}  // namespace qrt::quant
