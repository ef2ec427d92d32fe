// GGML i-quants with 256-element super-blocks: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_XS
// (spec/ggml.md §2.5). Quantizers: ggml's (ggml_iq1/2/3/4_quantize.hpp), bit-exact against bytes recorded from it;
// IQ2_XXS, IQ2_XS and IQ1_S, which ggml quantizes only with an importance matrix, take uniform importance when none
// is given (llama-quantize refuses them without one; the tools do too, uqff_layers.hpp).
//
// Every super-block is 8 sub-blocks of 32 elements = 32 groups of 8. Most formats store, per group, an index
// into a grid of 8 (or 2 × 4) magnitudes plus 8 sign bits, and per sub-block a small scale. The grids are in
// iquant_tables.hpp (generated from gguf-py); the accessors there read constant memory on the device.
//
// Exactness: each output is computed with the same float32 operations in the same order as gguf-py's numpy
// dequantizers (e.g. IQ2: (d · (0.5 + s)) · 0.25, then · grid, then the sign), so results are bit-exact, signed
// zeros included. No expression has a multiply feeding an add, so nvcc's FMA contraction cannot change a result.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/quant/format_list.hpp"
#include "kernels/quant/ggml_iq1_quantize.hpp"
#include "kernels/quant/ggml_iq2_quantize.hpp"
#include "kernels/quant/ggml_iq3_quantize.hpp"
#include "kernels/quant/ggml_iq4_quantize.hpp"
#include "kernels/quant/ggml_legacy.hpp"
#include "kernels/quant/iquant_tables.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

// The grid-searching quantizers work a row at a time (quantize_ggml_rows); Uniform: the ones ggml runs only with
// importance get ones when none is given.
template <class Traits, bool Uniform>
Status quantize_iq_rows(const char* type_name, const float* x, int64_t rows, int64_t cols, const QuantParams& p,
                        QuantBuffers* out, bool (*row)(const float*, int64_t, const float*, uint8_t*)) {
  if (!Uniform || p.importance != nullptr) return quantize_ggml_rows<Traits>(type_name, x, rows, cols, p, out, row);
  const std::vector<float> ones(cols > 0 ? static_cast<size_t>(cols) : 0, 1.0f);
  QuantParams with_ones = p;
  with_ones.importance = ones.data();
  return quantize_ggml_rows<Traits>(type_name, x, rows, cols, with_ones, out, row);
}

struct block_iq2_xxs {
  uint16_t d;       // f16 super-scale
  uint16_t qs[32];  // per sub-block two u32: 4 grid indices (bytes), then 4 × 7-bit sign indices + 4-bit scale
};
static_assert(sizeof(block_iq2_xxs) == 66, "IQ2_XXS block is 66 bytes");

struct block_iq2_xs {
  uint16_t d;
  uint16_t qs[32];     // per group: 9-bit grid index | 7-bit sign index << 9
  uint8_t scales[8];   // per sub-block: low nibble groups 0-1, high nibble groups 2-3
};
static_assert(sizeof(block_iq2_xs) == 74, "IQ2_XS block is 74 bytes");

struct block_iq2_s {
  uint16_t d;
  uint8_t qs[64];     // [0, 32): low 8 bits of each group's grid index; [32, 64): each group's sign byte
  uint8_t qh[8];      // per sub-block: bits 2g..2g+1 = index bits 8-9 of group g
  uint8_t scales[8];  // as IQ2_XS
};
static_assert(sizeof(block_iq2_s) == 82, "IQ2_S block is 82 bytes");

struct block_iq3_xxs {
  uint16_t d;
  uint8_t qs[96];  // [0, 64): grid indices, 4 elements each; [64, 96): per sub-block u32 sign indices + scale
};
static_assert(sizeof(block_iq3_xxs) == 98, "IQ3_XXS block is 98 bytes");

struct block_iq3_s {
  uint16_t d;
  uint8_t qs[64];     // low 8 bits of 9-bit grid indices, 4 elements each
  uint8_t qh[8];      // per sub-block: bit k = index bit 8 of its k-th grid index
  uint8_t signs[32];  // one sign byte per group
  uint8_t scales[4];  // one nibble per sub-block (low: even, high: odd)
};
static_assert(sizeof(block_iq3_s) == 110, "IQ3_S block is 110 bytes");

struct block_iq1_s {
  uint16_t d;
  uint8_t qs[32];   // low 8 bits of 11-bit grid indices
  uint16_t qh[8];   // per sub-block: 4 × 3 index bits, 3-bit scale (bits 12-14), delta sign (bit 15)
};
static_assert(sizeof(block_iq1_s) == 50, "IQ1_S block is 50 bytes");

struct block_iq1_m {
  uint8_t qs[32];      // low 8 bits of 11-bit grid indices
  uint8_t qh[16];      // per pair of groups: nibble = 3 index bits + delta sign (bit 3)
  uint8_t scales[8];   // 4 u16: 4 × 3-bit scales each, top nibbles form the f16 super-scale
};
static_assert(sizeof(block_iq1_m) == 56, "IQ1_M block is 56 bytes");

struct block_iq4_xs {
  uint16_t d;
  uint16_t scales_h;    // bits 2b..2b+1: high bits of sub-block b's 6-bit scale
  uint8_t scales_l[4];  // nibble per sub-block: low bits of its scale
  uint8_t qs[128];      // per sub-block 16 bytes in Q4_0 nibble placement
};
static_assert(sizeof(block_iq4_xs) == 136, "IQ4_XS block is 136 bytes");

namespace iq_detail {

// Writes 8 elements: ±(db · byte j of grid), negated where bit j of signs is set.
QRT_HD void emit_group8(uint64_t grid, unsigned signs, float db, float* out) {
  for (int j = 0; j < 8; ++j) {
    const float x = db * static_cast<float>(static_cast<uint8_t>(grid >> (8 * j)));
    out[j] = (signs >> j) & 1u ? -x : x;
  }
}

// Writes 4 elements from a 4-magnitude grid entry; signs bits 0..3 apply.
QRT_HD void emit_group4(uint32_t grid, unsigned signs, float db, float* out) {
  for (int j = 0; j < 4; ++j) {
    const float x = db * static_cast<float>(static_cast<uint8_t>(grid >> (8 * j)));
    out[j] = (signs >> j) & 1u ? -x : x;
  }
}

// Writes 8 IQ1 elements: dl · (grid value + delta), grid value = nibble j of the packed entry − 1.
QRT_HD void emit_iq1_group(uint32_t grid, float dl, float delta, float* out) {
  for (int j = 0; j < 8; ++j) {
    const float g = static_cast<float>(static_cast<int>((grid >> (4 * j)) & 0x0Fu) - 1);
    out[j] = dl * (g + delta);
  }
}

// The 4-bit IQ2/IQ3_XXS sub-block scale s becomes (d · (0.5 + s)) · k, k = 0.25 (IQ2) or 0.5 (IQ3_XXS).
QRT_HD float half_step_scale(float d, unsigned s, float k) { return d * (0.5f + static_cast<float>(s)) * k; }

constexpr float kIq1Delta = 0.125f;

}  // namespace iq_detail

template <>
struct FormatTraits<FormatId::kIQ2_XXS> : GgmlBlockBase<256, sizeof(block_iq2_xxs)> {
  static constexpr int ggml_type = 16;
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_iq_rows<FormatTraits, true>("iq2_xxs", x, rows, cols, p, out, quantize_row_iq2_xxs);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_iq2_xxs, d));
    for (int ib = 0; ib < 8; ++ib) {
      const uint8_t* q = b + offsetof(block_iq2_xxs, qs) + 8 * ib;  // 4 index bytes, then the u32 aux word
      const uint32_t aux = load_u32(q + 4);
      const float db = iq_detail::half_step_scale(d, aux >> 28, 0.25f);
      for (int g = 0; g < 4; ++g)
        iq_detail::emit_group8(iq_tables::iq2xxs_grid(q[g]), iq_tables::ksigns_iq2xs((aux >> (7 * g)) & 127u), db,
                               out + 32 * ib + 8 * g);
    }
  }
};

template <>
struct FormatTraits<FormatId::kIQ2_XS> : GgmlBlockBase<256, sizeof(block_iq2_xs)> {
  static constexpr int ggml_type = 17;
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_iq_rows<FormatTraits, true>("iq2_xs", x, rows, cols, p, out, quantize_row_iq2_xs);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_iq2_xs, d));
    const uint8_t* qs = b + offsetof(block_iq2_xs, qs);
    const uint8_t* scales = b + offsetof(block_iq2_xs, scales);
    for (int group = 0; group < 32; ++group) {
      const unsigned s = (scales[group / 4] >> (4 * ((group % 4) / 2))) & 0x0Fu;
      const float db = iq_detail::half_step_scale(d, s, 0.25f);
      const uint16_t q = load_u16(qs + 2 * group);
      iq_detail::emit_group8(iq_tables::iq2xs_grid(q & 511u), iq_tables::ksigns_iq2xs(q >> 9), db, out + 8 * group);
    }
  }
};

template <>
struct FormatTraits<FormatId::kIQ2_S> : GgmlBlockBase<256, sizeof(block_iq2_s)> {
  static constexpr int ggml_type = 22;
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_iq_rows<FormatTraits, false>("iq2_s", x, rows, cols, p, out, quantize_row_iq2_s);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_iq2_s, d));
    const uint8_t* qs = b + offsetof(block_iq2_s, qs);
    const uint8_t* signs = qs + 32;
    const uint8_t* qh = b + offsetof(block_iq2_s, qh);
    const uint8_t* scales = b + offsetof(block_iq2_s, scales);
    for (int group = 0; group < 32; ++group) {
      const unsigned s = (scales[group / 4] >> (4 * ((group % 4) / 2))) & 0x0Fu;
      const float db = iq_detail::half_step_scale(d, s, 0.25f);
      const unsigned index = qs[group] | (((qh[group / 4] >> (2 * (group % 4))) & 3u) << 8);
      iq_detail::emit_group8(iq_tables::iq2s_grid(index), signs[group], db, out + 8 * group);
    }
  }
};

template <>
struct FormatTraits<FormatId::kIQ3_XXS> : GgmlBlockBase<256, sizeof(block_iq3_xxs)> {
  static constexpr int ggml_type = 18;
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_iq_rows<FormatTraits, false>("iq3_xxs", x, rows, cols, p, out, quantize_row_iq3_xxs);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_iq3_xxs, d));
    const uint8_t* qs = b + offsetof(block_iq3_xxs, qs);  // 64 index bytes: two per group of 8
    const uint8_t* aux_words = qs + 64;                    // 8 u32, one per sub-block
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t aux = load_u32(aux_words + 4 * ib);
      const float db = iq_detail::half_step_scale(d, aux >> 28, 0.5f);
      for (int g = 0; g < 4; ++g) {
        const unsigned signs = iq_tables::ksigns_iq2xs((aux >> (7 * g)) & 127u);
        const int group = 4 * ib + g;
        float* o = out + 8 * group;
        iq_detail::emit_group4(iq_tables::iq3xxs_grid(qs[2 * group]), signs, db, o);
        iq_detail::emit_group4(iq_tables::iq3xxs_grid(qs[2 * group + 1]), signs >> 4, db, o + 4);
      }
    }
  }
};

template <>
struct FormatTraits<FormatId::kIQ3_S> : GgmlBlockBase<256, sizeof(block_iq3_s)> {
  static constexpr int ggml_type = 21;
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_iq_rows<FormatTraits, false>("iq3_s", x, rows, cols, p, out, quantize_row_iq3_s);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_iq3_s, d));
    const uint8_t* qs = b + offsetof(block_iq3_s, qs);
    const uint8_t* qh = b + offsetof(block_iq3_s, qh);
    const uint8_t* signs = b + offsetof(block_iq3_s, signs);
    const uint8_t* scales = b + offsetof(block_iq3_s, scales);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned s = (scales[ib / 2] >> (4 * (ib % 2))) & 0x0Fu;
      const float db = d * static_cast<float>(1 + 2 * s);
      for (int k = 0; k < 8; ++k) {  // k-th 4-element grid entry of the sub-block
        const unsigned index = qs[8 * ib + k] | (((qh[ib] >> k) & 1u) << 8);
        const int group = 4 * ib + k / 2;
        iq_detail::emit_group4(iq_tables::iq3s_grid(index), signs[group] >> (4 * (k % 2)), db, out + 32 * ib + 4 * k);
      }
    }
  }
};

template <>
struct FormatTraits<FormatId::kIQ1_S> : GgmlBlockBase<256, sizeof(block_iq1_s)> {
  static constexpr int ggml_type = 19;
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_iq_rows<FormatTraits, true>("iq1_s", x, rows, cols, p, out, quantize_row_iq1_s);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_iq1_s, d));
    const uint8_t* qs = b + offsetof(block_iq1_s, qs);
    const uint8_t* qh_words = b + offsetof(block_iq1_s, qh);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned qh = load_u16(qh_words + 2 * ib);
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7u) + 1);
      const float delta = (qh & 0x8000u) ? -iq_detail::kIq1Delta : iq_detail::kIq1Delta;
      for (int g = 0; g < 4; ++g) {
        const unsigned index = qs[4 * ib + g] | (((qh >> (3 * g)) & 7u) << 8);
        iq_detail::emit_iq1_group(iq_tables::iq1s_grid(index), dl, delta, out + 32 * ib + 8 * g);
      }
    }
  }
};

template <>
struct FormatTraits<FormatId::kIQ1_M> : GgmlBlockBase<256, sizeof(block_iq1_m)> {
  static constexpr int ggml_type = 29;
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_iq_rows<FormatTraits, false>("iq1_m", x, rows, cols, p, out, quantize_row_iq1_m);
  }

  // The f16 super-scale has no field of its own: its 16 bits are the top nibbles of the four scale words,
  // word 0 giving bits 0-3 up to word 3 giving bits 12-15.
  QRT_HD static float super_scale(const uint8_t* scales) {
    const unsigned w0 = load_u16(scales), w1 = load_u16(scales + 2), w2 = load_u16(scales + 4),
                   w3 = load_u16(scales + 6);
    const unsigned bits = (w0 >> 12) | ((w1 >> 8) & 0x00F0u) | ((w2 >> 4) & 0x0F00u) | (w3 & 0xF000u);
    return fp16_to_f32(static_cast<uint16_t>(bits));
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const uint8_t* qs = b + offsetof(block_iq1_m, qs);
    const uint8_t* qh = b + offsetof(block_iq1_m, qh);
    const uint8_t* scales = b + offsetof(block_iq1_m, scales);
    const float d = super_scale(scales);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned word = load_u16(scales + 2 * (ib / 2));
      for (int half = 0; half < 2; ++half) {  // each half of a sub-block (16 elements) has its own 3-bit scale
        const unsigned s = (word >> (6 * (ib % 2) + 3 * half)) & 7u;
        const float dl = d * static_cast<float>(2 * s + 1);
        for (int g = 0; g < 2; ++g) {
          const int group = 4 * ib + 2 * half + g;
          const unsigned nib = (qh[group / 2] >> (4 * (group % 2))) & 0x0Fu;
          const unsigned index = qs[group] | ((nib & 7u) << 8);
          const float delta = (nib & 8u) ? -iq_detail::kIq1Delta : iq_detail::kIq1Delta;
          iq_detail::emit_iq1_group(iq_tables::iq1s_grid(index), dl, delta, out + 8 * group);
        }
      }
    }
  }
};

template <>
struct FormatTraits<FormatId::kIQ4_XS> : GgmlBlockBase<256, sizeof(block_iq4_xs)> {
  static constexpr int ggml_type = 23;
  static constexpr bool has_quantizer = true;

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    if (p.importance != nullptr)
      return quantize_weighted_rows<FormatTraits>("iq4_xs", x, rows, cols, p, out, quantize_row_iq4_xs);
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, quantize_iq4_xs_block);
  }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_iq4_xs, d));
    const unsigned scales_h = load_u16(b + offsetof(block_iq4_xs, scales_h));
    const uint8_t* scales_l = b + offsetof(block_iq4_xs, scales_l);
    const uint8_t* qs = b + offsetof(block_iq4_xs, qs);
    for (int ib = 0; ib < 8; ++ib) {
      const unsigned low = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0Fu;
      const int ls = static_cast<int>(low | (((scales_h >> (2 * ib)) & 3u) << 4));  // 6-bit, biased by 32
      const float dl = d * static_cast<float>(ls - 32);
      const uint8_t* q = qs + 16 * ib;
      float* o = out + 32 * ib;
      for (int j = 0; j < 16; ++j) {
        o[j] = dl * static_cast<float>(iq_tables::kvalues_iq4nl(q[j] & 0x0Fu));
        o[j + 16] = dl * static_cast<float>(iq_tables::kvalues_iq4nl(q[j] >> 4));
      }
    }
  }
};

}  // namespace qrt::quant
