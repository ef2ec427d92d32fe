// The integer-dot decode GEMV's policies (gemv_dp4a_formats.cuh says what a policy defines) for the GGML formats
// whose codes are table entries or trits rather than plain integers: IQ4_NL, IQ4_XS and GGML's MXFP4 blocks (16-entry
// int8 tables looked up by byte permutes), the grid i-quants (IQ1, IQ2, IQ3: grid magnitudes with sign bits), and
// the ternary TQ1_0 and TQ2_0.
#pragma once

#include "kernels/linear/gemv_dp4a_formats.cuh"
#include "kernels/quant/ggml_nl.hpp"
#include "kernels/quant/iquant_tables.hpp"

namespace qrt::kernels::dp4a {

// ---- IQ4_NL and IQ4_XS: Q4_0's nibble placement, each nibble an index into 16 non-linear int8 levels
// (kvalues_iq4nl), looked up by byte permutes.
// Levels 4i .. 4i + 3 of a 16-entry int8 table as one little-endian word.
constexpr uint32_t level_word(const int8_t* table, int i) {
  uint32_t w = 0;
  for (int k = 3; k >= 0; --k) w = (w << 8) | static_cast<uint8_t>(table[4 * i + k]);
  return w;
}
template <const int8_t* Table>
struct Levels16 {
  static constexpr uint32_t kT0 = level_word(Table, 0), kT1 = level_word(Table, 1), kT2 = level_word(Table, 2),
                            kT3 = level_word(Table, 3);
};
using Iq4Levels = Levels16<quant::iq_tables::detail::kvalues_iq4nl_host>;
using Mxfp4Levels = Levels16<quant::iq_tables::detail::kvalues_mxfp4_host>;  // E2M1 values, doubled
// The levels of the eight 4-bit codes of q (nibble k = bits 4k .. 4k + 3) as signed bytes in nibble order: .x holds
// nibbles 0..3, .y nibbles 4..7. The nibbles themselves are the permutes' selectors (__byte_perm reads 3 bits of
// each, so a code picks entry code & 7 of both table halves); a third permute per word takes each byte from the upper
// half where the code's bit 3 is set (selector byte k + 4) or from the lower one (k). About 13 instructions per 8
// codes, where spreading each 4 codes' nibbles into a selector first and picking the half by masks took about 28.
template <class L>
__device__ __forceinline__ uint2 table_levels8(uint32_t q) {
  const uint32_t pick = ((q & 0x88888888u) >> 1) | 0x32103210u;
  const uint32_t q_hi = q >> 16;
  const uint32_t lo0 = __byte_perm(L::kT0, L::kT1, q), hi0 = __byte_perm(L::kT2, L::kT3, q);
  const uint32_t lo1 = __byte_perm(L::kT0, L::kT1, q_hi), hi1 = __byte_perm(L::kT2, L::kT3, q_hi);
  return make_uint2(__byte_perm(lo0, hi0, pick), __byte_perm(lo1, hi1, pick >> 16));
}
// A word of Q4_0's placement (byte j: column j in its low nibble, column j + 16 in its high one) as the levels of
// its low nibbles (.x, columns j..j+3) and of its high ones (.y, columns j+16..j+19): the nibble-order levels
// unzipped by two more permutes.
template <class L>
__device__ __forceinline__ uint2 table_levels_q4(uint32_t q) {
  const uint2 v = table_levels8<L>(q);
  return make_uint2(__byte_perm(v.x, v.y, 0x6420), __byte_perm(v.x, v.y, 0x7531));
}
// An item (a whole 32-column block: 16 nibble bytes in Q4_0's placement) as its 32 levels, signed bytes in column
// order (a: the low nibbles, columns 0..15; b: the high ones, 16..31), and its scale, looked up once in fetch and used
// for every batch row. Whole blocks, not 16-column halves as before: one activation block, one scale and one
// conversion per 32 columns, and the codes as one 16-byte run.
struct Iq4W {
  uint4 a, b;
  float d;
};
template <class L = Iq4Levels>
__device__ __forceinline__ Iq4W iq4_item(uint4 q, float d) {
  const uint2 x = table_levels_q4<L>(q.x), y = table_levels_q4<L>(q.y), z = table_levels_q4<L>(q.z),
              w = table_levels_q4<L>(q.w);
  return {make_uint4(x.x, y.x, z.x, w.x), make_uint4(x.y, y.y, z.y, w.y), d};
}

// What the 16-level table formats share past fetch: item it is activation block it, one dot of looked-up levels.
struct TableLevelsItems {
  using W = Iq4W;
  using X = X32;
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) { return load_x32(codes, scales, it); }
  __device__ static float dot(const W& w, const X& x, int) {
    return w.d * limb_dot(x.s, dot4x4(w.b, x.hi1, dot4x4(w.a, x.hi0)), dot4x4(w.b, x.lo1, dot4x4(w.a, x.lo0)));
  }
};

// IQ4_NL: 18-byte blocks {f16 d, 16 bytes of nibbles}.
struct Iq4Nl : TableLevelsItems {
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = 18;
  static constexpr int kItemsPerBlock = 1;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it) * kBlockBytes;
    return iq4_item(ldg_u128_unaligned(b + 2), half_at(ldg_u16(b)));
  }
};

// MXFP4 in GGML blocks (GGUF's gpt-oss experts): 17 bytes {E8M0 e, 16 bytes of nibbles} in Q4_0's placement, each
// nibble an E2M1 code whose value doubled is an integer (kvalues_mxfp4), so the scale is 2^(e - 128).
struct Mxfp4Ggml : TableLevelsItems {
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = 17;
  static constexpr int kItemsPerBlock = 1;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it) * kBlockBytes;
    const float d = quant::FormatTraits<quant::FormatId::kMXFP4_GGML>::e8m0_to_f32_half(__ldg(b));
    return iq4_item<Mxfp4Levels>(ldg_u128_unaligned(b + 1), d);  // byte aligned: the aligned words holding them
  }
};

// The E2M1 nibble streams with separate scale bytes: each row's byte i holds columns 2i (low) and 2i + 1 (high),
//   OCP MXFP4 (gpt-oss's checkpoints, UQFF, Ollama's mxfp4): an E8M0 scale byte per 32 columns, d = 2^(e - 127);
//   NVFP4: an E4M3 scale byte per 16 columns, d = e4m3 · the tensor's global scale.
// (kScaleGroupCols and kScaleBytes tell the launch the scale layout; the tensor's params do not.) An item is one
// 32-column block: its 16 code bytes in one load. Word t's nibbles are columns 8t .. 8t + 7 in order, so their
// doubled E2M1 levels come out of table_levels8 in column order, looked up once for every batch row and dotted with
// x's bytes as they are; NVFP4 sums its two 16-column halves apart to scale each by its own d. The levels are
// doubled: d / 2.
template <bool kNvfp4>
struct E2m1Stream {
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = 16;
  static constexpr int kItemsPerBlock = 1;
  static constexpr int kScaleGroupCols = kNvfp4 ? 16 : 32;
  static constexpr int kScaleBytes = 1;

  struct W {
    uint4 a, b;  // the levels of columns 0..15 and 16..31
    float d[2];  // columns 0..15 and 16..31 (the same for MXFP4)
  };
  using X = X32;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint4 q = ldg_u128(row.data + static_cast<int64_t>(it) * kBlockBytes);
    const uint2 l0 = table_levels8<Mxfp4Levels>(q.x), l1 = table_levels8<Mxfp4Levels>(q.y),
                l2 = table_levels8<Mxfp4Levels>(q.z), l3 = table_levels8<Mxfp4Levels>(q.w);
    W w;
    w.a = make_uint4(l0.x, l0.y, l1.x, l1.y);
    w.b = make_uint4(l2.x, l2.y, l3.x, l3.y);
    const int64_t group = (static_cast<int64_t>(it) * kBlockCols) >> row.group_shift;
    if constexpr (kNvfp4) {
      w.d[0] = quant::e4m3_to_f32(__ldg(row.scales + group)) * (0.5f * row.global_scale);
      w.d[1] = quant::e4m3_to_f32(__ldg(row.scales + group + 1)) * (0.5f * row.global_scale);
    } else {
      w.d[0] = w.d[1] = 0.5f * quant::e8m0_to_f32(__ldg(row.scales + group));
    }
    return w;
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) { return load_x32(codes, scales, it); }
  __device__ static float dot(const W& w, const X& x, int) {
    if constexpr (kNvfp4) {
      return w.d[0] * limb_dot(x.s, dot4x4(w.a, x.hi0), dot4x4(w.a, x.lo0)) +
             w.d[1] * limb_dot(x.s, dot4x4(w.b, x.hi1), dot4x4(w.b, x.lo1));
    } else {
      return w.d[0] * limb_dot(x.s, dot4x4(w.b, x.hi1, dot4x4(w.a, x.hi0)), dot4x4(w.b, x.lo1, dot4x4(w.a, x.lo0)));
    }
  }
};
using Mxfp4Ocp = E2m1Stream<false>;
using Nvfp4 = E2m1Stream<true>;

// IQ4_XS: 136-byte super-blocks of 256 {f16 d, u16 scales_h, 4 bytes scales_l, 8 x 16 bytes of nibbles}: sub-block
// sb (32 columns, 16 bytes at 8 + 16 sb) has the 6-bit scale (nibble sb % 2 of scales_l[sb / 2]) | (bits 2 sb of
// scales_h) << 4, minus 32. An item per sub-block.
struct Iq4Xs : TableLevelsItems {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 136;
  static constexpr int kItemsPerBlock = 8;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 3) * kBlockBytes;
    const int sb = it & 7;
    const uint32_t dh = ldg_u32_a2(b), sl = ldg_u32_a2(b + 4);  // dh: d (low half) and scales_h (high half)
    const uint32_t low = (sl >> (4 * sb)) & 15u;  // nibble sb % 2 of byte sb / 2
    const uint32_t high = (dh >> (16 + 2 * sb)) & 3u;
    const float scale = static_cast<float>(static_cast<int>(low | (high << 4)) - 32);
    return iq4_item(ldg_u128_unaligned(b + 8 + 16 * sb), half_at(dh) * scale);
  }
};

// ---- The grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M): 256-column super-blocks of 32 groups
// of 8. A group is 8 small integers (grid magnitudes with sign bits, or IQ1's grid values in -1..1) times a float
// scale, plus, for IQ1, a delta times the same scale: Σ w x = scale · Σ g x + delta · Σ x. The Decoder turns a
// group's bytes into the 8 integers as two words of signed bytes, its scale and its delta coefficient.
struct IqGroup {
  uint32_t w0, w1;  // signed bytes: columns 0..3 and 4..7 of the group
  float scale, delta;
};
// Four magnitudes, negated where bits 0..3 of signs are set: bit i of signs is spread to bit 0 of byte i by one
// multiply (it lands at bits i + 7j, all distinct, so no carries) and made a byte mask by another.
__device__ __forceinline__ uint32_t with_signs(uint32_t magnitudes, unsigned signs) {
  const uint32_t m = (((signs & 15u) * 0x00204081u) & 0x01010101u) * 0xFFu;
  return __vsub4(magnitudes ^ m, m);  // per byte: (~v + 1) where negated
}
// IQ1's delta folded into its codes: scale · (g ± 1/8) = (scale / 8) · (8g ± 1) exactly, codes -9..9, so that a
// group is integers times a scale like the others. `adds`: the delta has the scale's sign (the stored bit).
__device__ __forceinline__ bool iq1_delta_adds(const IqGroup& g) { return (g.delta > 0.0f) == (g.scale > 0.0f); }
__device__ __forceinline__ uint32_t iq1_fold_delta(uint32_t k, bool adds) {
  k = (k << 3) & 0xF8F8F8F8u;  // 8g per byte (g in -1..1; the bits pushed into the next byte are masked off)
  return adds ? __vadd4(k, 0x01010101u) : __vsub4(k, 0x01010101u);
}
__device__ __forceinline__ uint8_t ldg_u8(const uint8_t* p) { return __ldg(p); }
// The scale (d · (0.5 + s)) · k of IQ2 and IQ3_XXS sub-blocks.
__device__ __forceinline__ float half_step(float d, unsigned s, float k) { return d * (0.5f + static_cast<float>(s)) * k; }

// An item is a sub-block: 4 groups, 32 columns, one activation block. It was one group, and paid per 8 columns an
// activation load, a conversion, the scale and the address arithmetic (0.5 to 1.7 bytes of W per warp instruction).
// The groups' integers are summed as one integer per scale: the sub-block's (IQ2_XXS, IQ3_XXS, IQ3_S, IQ1_S) or each
// half's (kScalePer16: IQ2_XS, IQ2_S and IQ1_M scale per 16 columns); IQ1's deltas are folded into the codes.
template <class Decoder, bool kDelta, bool kScalePer16>
struct IqGroups {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = Decoder::kBlockBytes;
  static constexpr int kItemsPerBlock = 8;

  struct W {
    uint4 a, b;      // the 32 integers as signed bytes: columns 0..15 and 16..31
    float scale[2];  // of columns 0..15 and 16..31 (the same unless kScalePer16)
  };
  using X = X32;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 3) * kBlockBytes;
    const int first = 4 * (it & 7);
    uint32_t w[8];
    float scale[2];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const IqGroup g = Decoder::group(b, first + k);
      if constexpr (kDelta) {
        const bool adds = iq1_delta_adds(g);
        w[2 * k] = iq1_fold_delta(g.w0, adds);
        w[2 * k + 1] = iq1_fold_delta(g.w1, adds);
      } else {
        w[2 * k] = g.w0;
        w[2 * k + 1] = g.w1;
      }
      if (k % 2 == 0) scale[k / 2] = kDelta ? 0.125f * g.scale : g.scale;  // groups 1 and 3 share 0's and 2's
    }
    return {make_uint4(w[0], w[1], w[2], w[3]), make_uint4(w[4], w[5], w[6], w[7]), {scale[0], scale[1]}};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) { return load_x32(codes, scales, it); }
  __device__ static float dot(const W& w, const X& x, int) {
    if constexpr (kScalePer16) {
      return w.scale[0] * limb_dot(x.s, dot4x4(w.a, x.hi0), dot4x4(w.a, x.lo0)) +
             w.scale[1] * limb_dot(x.s, dot4x4(w.b, x.hi1), dot4x4(w.b, x.lo1));
    } else {
      return w.scale[0] * limb_dot(x.s, dot4x4(w.b, x.hi1, dot4x4(w.a, x.hi0)), dot4x4(w.b, x.lo1, dot4x4(w.a, x.lo0)));
    }
  }
};

// IQ2_XXS (66 bytes): {f16 d, per sub-block ib 4 grid index bytes and a u32 of four 7-bit sign indices and a 4-bit
// scale}; group g of sub-block ib: 8 magnitudes iq2xxs_grid[q[g]], signs ksigns[(aux >> 7g) & 127].
struct Iq2XxsDecoder {
  static constexpr int kBlockBytes = 66;
  __device__ static IqGroup group(const uint8_t* b, int group) {
    const int ib = group >> 2, g = group & 3;
    const uint8_t* q = b + 2 + 8 * ib;
    const uint32_t aux = ldg_u32_a2(q + 4);
    const uint64_t grid = quant::iq_tables::iq2xxs_grid(ldg_u8(q + g));
    const unsigned signs = quant::iq_tables::ksigns_iq2xs((aux >> (7 * g)) & 127u);
    return {with_signs(static_cast<uint32_t>(grid), signs), with_signs(static_cast<uint32_t>(grid >> 32), signs >> 4),
            half_step(half_at(ldg_u16(b)), aux >> 28, 0.25f), 0.0f};
  }
};

// IQ2_XS (74 bytes): {f16 d, u16 per group: 9-bit grid index | 7-bit sign index << 9, 8 scale bytes: nibble per
// pair of groups}.
struct Iq2XsDecoder {
  static constexpr int kBlockBytes = 74;
  __device__ static IqGroup group(const uint8_t* b, int group) {
    const unsigned q = ldg_u16(b + 2 + 2 * group);
    const unsigned s = (ldg_u8(b + 66 + group / 4) >> (4 * ((group % 4) / 2))) & 0x0Fu;
    const uint64_t grid = quant::iq_tables::iq2xs_grid(q & 511u);
    const unsigned signs = quant::iq_tables::ksigns_iq2xs(q >> 9);
    return {with_signs(static_cast<uint32_t>(grid), signs), with_signs(static_cast<uint32_t>(grid >> 32), signs >> 4),
            half_step(half_at(ldg_u16(b)), s, 0.25f), 0.0f};
  }
};

// IQ2_S (82 bytes): {f16 d, 32 low index bytes, 32 sign bytes, 8 qh bytes (2 index bits per group), 8 scale bytes}.
struct Iq2SDecoder {
  static constexpr int kBlockBytes = 82;
  __device__ static IqGroup group(const uint8_t* b, int group) {
    const unsigned index = ldg_u8(b + 2 + group) | (((ldg_u8(b + 66 + group / 4) >> (2 * (group % 4))) & 3u) << 8);
    const unsigned signs = ldg_u8(b + 34 + group);
    const unsigned s = (ldg_u8(b + 74 + group / 4) >> (4 * ((group % 4) / 2))) & 0x0Fu;
    const uint64_t grid = quant::iq_tables::iq2s_grid(index);
    return {with_signs(static_cast<uint32_t>(grid), signs), with_signs(static_cast<uint32_t>(grid >> 32), signs >> 4),
            half_step(half_at(ldg_u16(b)), s, 0.25f), 0.0f};
  }
};

// IQ3_XXS (98 bytes): {f16 d, 64 grid index bytes (two 4-magnitude entries per group), 8 u32 of four 7-bit sign
// indices and a 4-bit scale}.
struct Iq3XxsDecoder {
  static constexpr int kBlockBytes = 98;
  __device__ static IqGroup group(const uint8_t* b, int group) {
    const uint32_t aux = ldg_u32_a2(b + 66 + 4 * (group >> 2));
    const unsigned signs = quant::iq_tables::ksigns_iq2xs((aux >> (7 * (group & 3))) & 127u);
    return {with_signs(quant::iq_tables::iq3xxs_grid(ldg_u8(b + 2 + 2 * group)), signs),
            with_signs(quant::iq_tables::iq3xxs_grid(ldg_u8(b + 3 + 2 * group)), signs >> 4),
            half_step(half_at(ldg_u16(b)), aux >> 28, 0.5f), 0.0f};
  }
};

// IQ3_S (110 bytes): {f16 d, 64 low index bytes, 8 qh bytes (index bit 8 of each entry of a sub-block), 32 sign
// bytes, 4 scale bytes (nibble per sub-block)}; group g of sub-block ib holds entries k = 2 (g % 4) and k + 1.
struct Iq3SDecoder {
  static constexpr int kBlockBytes = 110;
  __device__ static IqGroup group(const uint8_t* b, int group) {
    const int ib = group >> 2, k = 2 * (group & 3);
    const unsigned qh = ldg_u8(b + 66 + ib);
    const unsigned i0 = ldg_u8(b + 2 + 8 * ib + k) | (((qh >> k) & 1u) << 8);
    const unsigned i1 = ldg_u8(b + 3 + 8 * ib + k) | (((qh >> (k + 1)) & 1u) << 8);
    const unsigned signs = ldg_u8(b + 74 + group);
    const unsigned s = (ldg_u8(b + 106 + ib / 2) >> (4 * (ib % 2))) & 0x0Fu;
    return {with_signs(quant::iq_tables::iq3s_grid(i0), signs), with_signs(quant::iq_tables::iq3s_grid(i1), signs >> 4),
            half_at(ldg_u16(b)) * static_cast<float>(1 + 2 * s), 0.0f};
  }
};

// IQ1 grid entries: 8 nibbles, value nibble - 1, as signed bytes in column order.
__device__ __forceinline__ void iq1_values(uint32_t grid, uint32_t* w0, uint32_t* w1) {
  const uint32_t even = grid & 0x0F0F0F0Fu, odd = (grid >> 4) & 0x0F0F0F0Fu;  // nibbles 0, 2, 4, 6 and 1, 3, 5, 7
  *w0 = __vsub4(__byte_perm(even, odd, 0x5140), 0x01010101u);
  *w1 = __vsub4(__byte_perm(even, odd, 0x7362), 0x01010101u);
}
constexpr float kIq1Delta = 0.125f;

// IQ1_S (50 bytes): {f16 d, 32 low index bytes, u16 per sub-block: 4 x 3 index bits, a 3-bit scale, the delta sign}.
struct Iq1SDecoder {
  static constexpr int kBlockBytes = 50;
  __device__ static IqGroup group(const uint8_t* b, int group) {
    const int ib = group >> 2, g = group & 3;
    const unsigned qh = ldg_u16(b + 34 + 2 * ib);
    const float dl = half_at(ldg_u16(b)) * static_cast<float>(2 * ((qh >> 12) & 7u) + 1);
    IqGroup w;
    iq1_values(quant::iq_tables::iq1s_grid(ldg_u8(b + 2 + group) | (((qh >> (3 * g)) & 7u) << 8)), &w.w0, &w.w1);
    w.scale = dl;
    w.delta = dl * ((qh & 0x8000u) ? -kIq1Delta : kIq1Delta);
    return w;
  }
};

// IQ1_M (56 bytes): {32 low index bytes, 16 qh bytes (a nibble per group: 3 index bits and the delta sign), 4 u16
// scale words (3-bit scales per half sub-block; their top nibbles form the f16 super-scale)}.
struct Iq1MDecoder {
  static constexpr int kBlockBytes = 56;
  __device__ static IqGroup group(const uint8_t* b, int group) {
    const int ib = group >> 2, half = (group & 3) >> 1;
    const uint32_t s01 = ldg_u32_a2(b + 48), s23 = ldg_u32_a2(b + 52);  // the four scale words
    const unsigned w0 = s01 & 0xFFFFu, w1 = s01 >> 16, w2 = s23 & 0xFFFFu, w3 = s23 >> 16;
    const float d = half_at((w0 >> 12) | ((w1 >> 8) & 0x00F0u) | ((w2 >> 4) & 0x0F00u) | (w3 & 0xF000u));
    const unsigned word = (ib / 2 == 0 ? w0 : ib / 2 == 1 ? w1 : ib / 2 == 2 ? w2 : w3);
    const float dl = d * static_cast<float>(2 * ((word >> (6 * (ib % 2) + 3 * half)) & 7u) + 1);
    const unsigned nib = (ldg_u8(b + 32 + group / 2) >> (4 * (group % 2))) & 0x0Fu;
    IqGroup w;
    iq1_values(quant::iq_tables::iq1s_grid(ldg_u8(b + group) | ((nib & 7u) << 8)), &w.w0, &w.w1);
    w.scale = dl;
    w.delta = dl * ((nib & 8u) ? -kIq1Delta : kIq1Delta);
    return w;
  }
};

using Iq2Xxs = IqGroups<Iq2XxsDecoder, false, false>;
using Iq2Xs = IqGroups<Iq2XsDecoder, false, true>;
using Iq2S = IqGroups<Iq2SDecoder, false, true>;
using Iq3Xxs = IqGroups<Iq3XxsDecoder, false, false>;
using Iq3S = IqGroups<Iq3SDecoder, false, false>;
using Iq1S = IqGroups<Iq1SDecoder, true, false>;
using Iq1M = IqGroups<Iq1MDecoder, true, true>;

// TQ2_0: 66-byte super-blocks {64 bytes qs, f16 d}; element 128h + 32k + l has code (qs[32h + l] >> 2k) & 3 and
// value d · (code - 1). Items of 64 columns as Q2_K's (gemv_dp4a_formats.cuh), the 1 offset taken off with the
// sub-block's Σ x.
struct Tq2 {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 66;
  static constexpr int kItemsPerBlock = 4;

  struct W {
    uint4 qs;
    uint32_t d;
  };
  using X = XSixteens;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 2) * kBlockBytes;
    const int h = (it >> 1) & 1, l0 = 16 * (it & 1);
    return {ldg_u128_unaligned(b + 32 * h + l0), ldg_u16(b + 64)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_sixteens(codes, scales, it);
  }
  __device__ static float dot(const W& w, const X& x, int it) {
    const int g = it & 1;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const auto code = [k](uint32_t q) { return (q >> (2 * k)) & 0x03030303u; };
      const uint4 c = make_uint4(code(w.qs.x), code(w.qs.y), code(w.qs.z), code(w.qs.w));
      v += fmaf(x.k[k].s.x * static_cast<float>(sub_block_dot(c, x.k[k])), kLimbsInv, -sum16(x.k[k], g));
    }
    return half_at(w.d) * v;
  }
};

// TQ1_0: 54-byte super-blocks {48 bytes qs, 4 bytes qh, f16 d}, each byte five (qh: four) base-3 trits as the
// fixed-point fraction ceil(256 · 0.t0t1t2t3t4): trit n is ((byte · 3^n mod 256) · 3) >> 8, value d · (t - 1).
// Trit n of qs byte m < 32 is column 32n + m, of qs byte 32 + m (m < 16) column 160 + 16n + m, of qh byte j column
// 240 + 4n + j. Thirteen items per super-block, each one word of bytes and all its trits: items 0..7 the qs words
// 0..7 (columns 32n + 4k + 0..3), items 8..11 the words 8..11 (columns 160 + 16n + 4(k - 8) + 0..3) and item 12
// the qh word (columns 240 + 4n + 0..3, n < 4).
struct Tq1 {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 54;
  static constexpr int kItemsPerBlock = 13;

  struct W {
    uint32_t t[5];  // trit n of the four bytes, minus 1, as signed bytes
    float d;
  };
  struct X {
    uint32_t hi[5], lo[5];
    float2 s[5];
  };

  __device__ static W fetch(const RowRef& row, int it) {
    const int blk = it / kItemsPerBlock, k = it % kItemsPerBlock;
    const uint8_t* b = row.data + static_cast<int64_t>(blk) * kBlockBytes;
    const uint32_t bytes = ldg_u32_a2(b + 4 * k);  // qs words 0..11, then qh at 48
    W w;
    uint32_t pow3 = 1;
#pragma unroll
    for (int n = 0; n < 5; ++n, pow3 *= 3) {
      uint32_t word = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t shifted = (((bytes >> (8 * j)) & 0xFFu) * pow3) & 0xFFu;
        word |= ((shifted * 3u) >> 8) << (8 * j);
      }
      w.t[n] = __vsub4(word, 0x01010101u);
    }
    w.d = half_at(ldg_u16(b + 52));
    return w;
  }
  // Activation block and byte offset of trit n of item k's four columns.
  __device__ static void place(int k, int n, int* block, int* offset) {
    const int column = k < 8 ? 32 * n + 4 * k : k < 12 ? 160 + 16 * n + 4 * (k - 8) : 240 + 4 * n;
    *block = column >> 5;
    *offset = column & 31;
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    const int64_t first = static_cast<int64_t>(it / kItemsPerBlock) * 8;
    const int k = it % kItemsPerBlock;
    X x;
#pragma unroll
    for (int n = 0; n < 5; ++n) {
      int block, offset;
      place(k, n < 4 || k < 12 ? n : 3, &block, &offset);  // the qh item has 4 trits: n = 4 repeats n = 3, unused
      const uint8_t* c = reinterpret_cast<const uint8_t*>(codes) + (first + block) * 64 + offset;
      x.hi[n] = ldg_u32(c);
      x.lo[n] = ldg_u32(c + 32);
      x.s[n] = __ldg(reinterpret_cast<const float2*>(scales + (first + block) * 4));
    }
    return x;
  }
  __device__ static float dot(const W& w, const X& x, int it) {
    const int trits = it % kItemsPerBlock == 12 ? 4 : 5;
    float v = 0.0f;
#pragma unroll
    for (int n = 0; n < 5; ++n) {
      if (n >= trits) break;
      v += x.s[n].x * static_cast<float>(__dp4a(static_cast<int>(w.t[n]), static_cast<int>(x.hi[n]), 0)) +
           x.s[n].y * static_cast<float>(__dp4a(static_cast<int>(w.t[n]), static_cast<int>(x.lo[n]), 0));
    }
    return w.d * v;
  }
};

}  // namespace qrt::kernels::dp4a
