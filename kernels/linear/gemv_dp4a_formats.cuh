// Per-format pieces of the integer-dot decode GEMV (gemv_dp4a.cu): how one thread's "item" of a weight row is
// fetched, which activation bytes it pairs with (q8_activations.hpp: two int8 limbs per 32-column block), and the
// dp4a arithmetic. Each policy defines
//   kBlockCols, kBlockBytes, kItemsPerBlock   a row is cols / kBlockCols blocks of kBlockBytes, each split into
//                                              kItemsPerBlock items; item `it` of a row is block it / kItemsPerBlock
//   W fetch(row, it)                           the item's weight bytes and scales, from global memory (RowRef: the
//                                              row's packed bytes and, for AFQ, its group scales and biases)
//   X load_x(codes, scales, it)                the matching activation codes and block scales of one batch row
//   float dot(w, x, it)                        the item's contribution to that output
// The kernel loads an item's W once for every batch row and an X once for every weight row it owns.
//
// Items are sized so that the threads of a warp read consecutive bytes of W (coalesced) with the widest loads the
// format's alignment allows: 16 bytes for Q4_K and Q5_K (144- and 176-byte blocks), 4 bytes (two aligned words and a
// funnel shift where a field sits at an odd half-word) for the 2-byte aligned Q4_0, Q8_0 and Q6_K blocks.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/gemv_lanes.hpp"
#include "kernels/quant/ggml_nl.hpp"
#include "kernels/quant/iquant_tables.hpp"

namespace qrt::kernels::dp4a {

// One weight row: its packed bytes, and (AFQ) its group scales and biases with group = column >> group_shift.
struct RowRef {
  const uint8_t* data;
  const uint8_t* scales;
  const uint8_t* biases;
  int group_shift;
};

__device__ __forceinline__ uint32_t ldg_u32(const uint8_t* p) { return __ldg(reinterpret_cast<const uint32_t*>(p)); }
__device__ __forceinline__ uint32_t ldg_u16(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}
__device__ __forceinline__ uint4 ldg_u128(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ float half_at(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
}

// The little-endian u32 at a 2-byte aligned address: one load when it is 4-byte aligned, else the two aligned words
// around it (both inside the tensor: the value's own bytes reach into the second one).
__device__ __forceinline__ uint32_t ldg_u32_a2(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(a & ~uintptr_t{3});
  const uint32_t lo = ldg_u32(base);
  const uint32_t hi = (a & 2) != 0 ? ldg_u32(base + 4) : 0u;
  return __funnelshift_r(lo, hi, static_cast<unsigned>(a & 3) * 8);
}

__device__ __forceinline__ int dot4x4(uint4 w, uint4 x) {
  return __dp4a(static_cast<int>(w.x), static_cast<int>(x.x),
                __dp4a(static_cast<int>(w.y), static_cast<int>(x.y),
                       __dp4a(static_cast<int>(w.z), static_cast<int>(x.z),
                              __dp4a(static_cast<int>(w.w), static_cast<int>(x.w), 0))));
}
__device__ __forceinline__ int dot2x4(uint32_t w0, uint32_t w1, uint2 x, int acc) {
  return __dp4a(static_cast<int>(w0), static_cast<int>(x.x), __dp4a(static_cast<int>(w1), static_cast<int>(x.y), acc));
}
__device__ __forceinline__ uint4 nibbles(uint4 q, int shift) {
  return make_uint4((q.x >> shift) & 0x0F0F0F0Fu, (q.y >> shift) & 0x0F0F0F0Fu, (q.z >> shift) & 0x0F0F0F0Fu,
                    (q.w >> shift) & 0x0F0F0F0Fu);
}
// The x limbs (16 bytes of hi codes, 16 of lo) of columns [offset, offset + 16) of activation block `block`.
struct X16 {
  uint4 hi, lo;
  float4 s;  // {d_hi, d_lo, sum, 0}
};
__device__ __forceinline__ X16 load_x16(const int8_t* codes, const float* scales, int64_t block, int offset) {
  const uint8_t* c = reinterpret_cast<const uint8_t*>(codes) + block * 64 + offset;
  return {ldg_u128(c), ldg_u128(c + 32), __ldg(reinterpret_cast<const float4*>(scales) + block)};
}
__device__ __forceinline__ float limb_dot(const float4& s, int dot_hi, int dot_lo) {
  return s.x * static_cast<float>(dot_hi) + s.y * static_cast<float>(dot_lo);
}

// ---- Q4_K and Q5_K: 256-column super-blocks {f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, [Q5_K: 32 bytes
// of fifth bits], 128 bytes of nibbles}. Item k = 0..7 of a block is the 16 nibble bytes at 16k of qs: with
// pair p = k / 2 and half h = k % 2, low nibbles are columns 64p + 16h + 0..15 (sub-block 2p), high nibbles the same
// plus 32 (sub-block 2p + 1). The h = 0 item also subtracts the two sub-blocks' minimums (dmin · m · Σx).
template <int BlockBytes, bool HasQh>
struct KQuant4 {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = BlockBytes;
  static constexpr int kItemsPerBlock = 8;
  static constexpr int kQsOffset = HasQh ? 48 : 16;

  struct W {
    uint4 q;
    uint4 qh;  // Q5_K: fifth bits of elements 16h + 0..15 (bit 2p low half, 2p + 1 high half)
    uint32_t dm, s0, s1, s2;
  };
  struct X {
    X16 a, b;  // sub-blocks 2p and 2p + 1
  };

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 3) * kBlockBytes;
    const int k = it & 7;
    W w;
    w.q = ldg_u128(b + kQsOffset + 16 * k);
    if constexpr (HasQh) w.qh = ldg_u128(b + 16 + 16 * (k & 1));
    w.dm = ldg_u32(b);
    w.s0 = ldg_u32(b + 4);
    w.s1 = ldg_u32(b + 8);
    w.s2 = ldg_u32(b + 12);
    return w;
  }

  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    const int k = it & 7;
    const int64_t a = static_cast<int64_t>(it >> 3) * 8 + 2 * (k >> 1);
    return {load_x16(codes, scales, a, 16 * (k & 1)), load_x16(codes, scales, a + 1, 16 * (k & 1))};
  }

  // 6-bit scale and min of sub-block j (0..7) from the 12 scale bytes as three words (k4_scale_min's layout).
  __device__ static void scale_min(const W& w, int j, float* sc, float* m) {
    const unsigned sh = 8u * static_cast<unsigned>(j & 3);
    const uint32_t low_sc = (w.s0 >> sh) & 63u, low_m = (w.s1 >> sh) & 63u;
    const uint32_t high_sc = ((w.s2 >> sh) & 15u) | (((w.s0 >> sh) >> 6 & 3u) << 4);
    const uint32_t high_m = ((w.s2 >> sh) >> 4 & 15u) | (((w.s1 >> sh) >> 6 & 3u) << 4);
    *sc = static_cast<float>(j < 4 ? low_sc : high_sc);
    *m = static_cast<float>(j < 4 ? low_m : high_m);
  }

  __device__ static float dot(const W& w, const X& x, int it) {
    const int k = it & 7;
    const int p = k >> 1;
    uint4 lo = nibbles(w.q, 0), hi = nibbles(w.q, 4);
    if constexpr (HasQh) {
      const auto fifth = [](uint32_t qh, int bit) { return ((qh >> bit) & 0x01010101u) << 4; };
      lo = make_uint4(lo.x | fifth(w.qh.x, 2 * p), lo.y | fifth(w.qh.y, 2 * p), lo.z | fifth(w.qh.z, 2 * p),
                      lo.w | fifth(w.qh.w, 2 * p));
      hi = make_uint4(hi.x | fifth(w.qh.x, 2 * p + 1), hi.y | fifth(w.qh.y, 2 * p + 1),
                      hi.z | fifth(w.qh.z, 2 * p + 1), hi.w | fifth(w.qh.w, 2 * p + 1));
    }
    float sc_a, m_a, sc_b, m_b;
    scale_min(w, 2 * p, &sc_a, &m_a);
    scale_min(w, 2 * p + 1, &sc_b, &m_b);
    const float va = sc_a * limb_dot(x.a.s, dot4x4(lo, x.a.hi), dot4x4(lo, x.a.lo));
    const float vb = sc_b * limb_dot(x.b.s, dot4x4(hi, x.b.hi), dot4x4(hi, x.b.lo));
    float r = half_at(w.dm) * (va + vb);
    if ((k & 1) == 0) r -= half_at(w.dm >> 16) * (m_a * x.a.s.z + m_b * x.b.s.z);
    return r;
  }
};
using Q4K = KQuant4<144, false>;
using Q5K = KQuant4<176, true>;

// ---- Q8_0: 34-byte blocks {f16 d, 32 int8 codes}. Item e = 0..3 of a block is codes 8e .. 8e + 7.
struct Q8_0 {
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = 34;
  static constexpr int kItemsPerBlock = 4;

  struct W {
    uint32_t q0, q1, d;
  };
  struct X {
    uint2 hi, lo;
    float4 s;
  };

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 2) * kBlockBytes;
    const uint8_t* q = b + 2 + 8 * (it & 3);
    return {ldg_u32_a2(q), ldg_u32_a2(q + 4), ldg_u16(b)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    const int64_t blk = it >> 2;
    const uint8_t* c = reinterpret_cast<const uint8_t*>(codes) + blk * 64 + 8 * (it & 3);
    return {__ldg(reinterpret_cast<const uint2*>(c)), __ldg(reinterpret_cast<const uint2*>(c + 32)),
            __ldg(reinterpret_cast<const float4*>(scales) + blk)};
  }
  __device__ static float dot(const W& w, const X& x, int) {
    return half_at(w.d) * limb_dot(x.s, dot2x4(w.q0, w.q1, x.hi, 0), dot2x4(w.q0, w.q1, x.lo, 0));
  }
};

// Formats with Q4_0's nibble placement in 32-column (sub-)blocks take two items per activation block: item it covers
// columns 8e + 0..7 (a) and 16 + 8e + 0..7 (b) of activation block it / 2, e = it % 2.
struct XHalves {
  uint2 hi_a, hi_b, lo_a, lo_b;  // the two limbs of columns a and b
  float4 s;
};
__device__ __forceinline__ XHalves load_x_halves(const int8_t* codes, const float* scales, int it) {
  const int64_t blk = it >> 1;
  const uint8_t* c = reinterpret_cast<const uint8_t*>(codes) + blk * 64 + 8 * (it & 1);
  const auto u2 = [](const uint8_t* p) { return __ldg(reinterpret_cast<const uint2*>(p)); };
  return {u2(c), u2(c + 16), u2(c + 32), u2(c + 48), __ldg(reinterpret_cast<const float4*>(scales) + blk)};
}
// Σ over the item's 16 columns of code · x, both limbs, with the low-nibble codes a0, a1 (columns a) and b0, b1
// (columns b) as signed bytes.
__device__ __forceinline__ float halves_dot(uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1, const XHalves& x) {
  const int dot_hi = dot2x4(a0, a1, x.hi_a, dot2x4(b0, b1, x.hi_b, 0));
  const int dot_lo = dot2x4(a0, a1, x.lo_a, dot2x4(b0, b1, x.lo_b, 0));
  return limb_dot(x.s, dot_hi, dot_lo);
}

// ---- Q4_0, Q4_1, Q5_0, Q5_1: 32-column blocks, element j < 16 the low nibble of qs[j] and j + 16 its high nibble,
// after {f16 d} (Q4_0: x = d (q - 8); Q5_0: x = d (q - 16)) or {f16 d, f16 m} (Q4_1, Q5_1: x = d q + m); the 5-bit
// ones keep element j's fifth bit in bit j of a u32 qh before qs. Item e = 0..1 of a block is qs bytes 8e .. 8e + 7:
// columns 8e + 0..7 (low nibbles) and 16 + 8e + 0..7 (high nibbles). Σ (d q + m) x = d Σ q x + m Σ x and
// Σ d (q - o) x = d (Σ q x - o Σ x): the e = 0 item adds the block's m Σ x or subtracts d o Σ x.
template <int BlockBytes, bool HasMin, bool HasQh>
struct Legacy32 {
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = BlockBytes;
  static constexpr int kItemsPerBlock = 2;
  static constexpr int kQhOffset = HasMin ? 4 : 2;
  static constexpr int kQsOffset = kQhOffset + (HasQh ? 4 : 0);
  static constexpr float kCodeOffset = HasMin ? 0.0f : (HasQh ? 16.0f : 8.0f);

  struct W {
    uint32_t q0, q1, dm, qh;
  };
  using X = XHalves;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 1) * kBlockBytes;
    const uint8_t* q = b + kQsOffset + 8 * (it & 1);
    W w{ldg_u32_a2(q), ldg_u32_a2(q + 4), HasMin ? ldg_u32_a2(b) : ldg_u16(b), 0u};
    if constexpr (HasQh) w.qh = ldg_u32_a2(b + kQhOffset);
    return w;
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_halves(codes, scales, it);
  }
  // Bits 0..3 of v into bit 4 of bytes 0..3.
  __device__ static uint32_t fifth_bits(uint32_t v) {
    return ((v & 1u) << 4) | ((v & 2u) << 11) | ((v & 4u) << 18) | ((v & 8u) << 25);
  }
  __device__ static float dot(const W& w, const X& x, int it) {
    const int e = it & 1;
    uint32_t a0 = w.q0 & 0x0F0F0F0Fu, a1 = w.q1 & 0x0F0F0F0Fu;
    uint32_t b0 = (w.q0 >> 4) & 0x0F0F0F0Fu, b1 = (w.q1 >> 4) & 0x0F0F0F0Fu;
    if constexpr (HasQh) {  // columns 8e + 0..7 (a) have qh bits 8e.., columns 16 + 8e + 0..7 (b) bits 16 + 8e..
      a0 |= fifth_bits(w.qh >> (8 * e));
      a1 |= fifth_bits(w.qh >> (8 * e + 4));
      b0 |= fifth_bits(w.qh >> (16 + 8 * e));
      b1 |= fifth_bits(w.qh >> (20 + 8 * e));
    }
    const float d = half_at(w.dm);
    float v = d * halves_dot(a0, a1, b0, b1, x);
    if (e == 0) v += HasMin ? half_at(w.dm >> 16) * x.s.z : -kCodeOffset * d * x.s.z;
    return v;
  }
};
using Q4_0 = Legacy32<18, false, false>;
using Q4_1 = Legacy32<20, true, false>;
using Q5_0 = Legacy32<22, false, true>;
using Q5_1 = Legacy32<24, true, true>;

// ---- IQ4_NL and IQ4_XS: Q4_0's nibble placement, each nibble an index into 16 non-linear int8 levels
// (kvalues_iq4nl), looked up four at a time with two byte permutes (indices 0..7 and 8..15) and a select.
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
// The levels of four indices (one per byte, each 0..15) as four signed bytes.
template <class L>
__device__ __forceinline__ uint32_t table_levels(uint32_t idx) {
  const uint32_t sel = (idx & 7u) | ((idx >> 4) & 0x70u) | ((idx >> 8) & 0x700u) | ((idx >> 12) & 0x7000u);
  const uint32_t lo = __byte_perm(L::kT0, L::kT1, sel);
  const uint32_t hi = __byte_perm(L::kT2, L::kT3, sel);
  const uint32_t pick = ((idx >> 3) & 0x01010101u) * 0xFFu;
  return (hi & pick) | (lo & ~pick);
}
// An item's 16 levels as signed bytes (columns a: a0, a1; columns b: b0, b1) and its scale, looked up once in fetch
// and used for every batch row.
struct Iq4W {
  uint32_t a0, a1, b0, b1;
  float d;
};
template <class L = Iq4Levels>
__device__ __forceinline__ Iq4W iq4_item(uint32_t q0, uint32_t q1, float d) {
  return {table_levels<L>(q0 & 0x0F0F0F0Fu), table_levels<L>(q1 & 0x0F0F0F0Fu),
          table_levels<L>((q0 >> 4) & 0x0F0F0F0Fu), table_levels<L>((q1 >> 4) & 0x0F0F0F0Fu), d};
}

// IQ4_NL: 18-byte blocks {f16 d, 16 bytes of nibbles}, two items per block.
struct Iq4Nl {
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = 18;
  static constexpr int kItemsPerBlock = 2;

  using W = Iq4W;
  using X = XHalves;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 1) * kBlockBytes;
    const uint8_t* q = b + 2 + 8 * (it & 1);
    return iq4_item(ldg_u32_a2(q), ldg_u32_a2(q + 4), half_at(ldg_u16(b)));
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_halves(codes, scales, it);
  }
  __device__ static float dot(const W& w, const X& x, int) { return w.d * halves_dot(w.a0, w.a1, w.b0, w.b1, x); }
};

// MXFP4 in GGML blocks (GGUF's gpt-oss experts): 17 bytes {E8M0 e, 16 bytes of nibbles} in Q4_0's placement, each
// nibble an E2M1 code whose value doubled is an integer (kvalues_mxfp4), so the scale is 2^(e - 128).
struct Mxfp4Ggml {
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = 17;
  static constexpr int kItemsPerBlock = 2;

  using W = Iq4W;
  using X = XHalves;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 1) * kBlockBytes;
    const uint8_t* q = b + 1 + 8 * (it & 1);
    uint32_t q0 = 0, q1 = 0;  // byte aligned: assembled from single bytes
#pragma unroll
    for (int j = 3; j >= 0; --j) {
      q0 = (q0 << 8) | __ldg(q + j);
      q1 = (q1 << 8) | __ldg(q + 4 + j);
    }
    return iq4_item<Mxfp4Levels>(q0, q1, quant::FormatTraits<quant::FormatId::kMXFP4_GGML>::e8m0_to_f32_half(__ldg(b)));
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_halves(codes, scales, it);
  }
  __device__ static float dot(const W& w, const X& x, int) { return w.d * halves_dot(w.a0, w.a1, w.b0, w.b1, x); }
};

// IQ4_XS: 136-byte super-blocks of 256 {f16 d, u16 scales_h, 4 bytes scales_l, 8 x 16 bytes of nibbles}: sub-block
// sb (32 columns, 16 bytes at 8 + 16 sb) has the 6-bit scale (nibble sb % 2 of scales_l[sb / 2]) | (bits 2 sb of
// scales_h) << 4, minus 32. Sixteen items per super-block, two per sub-block.
struct Iq4Xs {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 136;
  static constexpr int kItemsPerBlock = 16;

  using W = Iq4W;
  using X = XHalves;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 4) * kBlockBytes;
    const uint8_t* q = b + 8 + 8 * (it & 15);  // sub-block (it >> 1) & 7, half it & 1
    const uint32_t dh = ldg_u32_a2(b), sl = ldg_u32_a2(b + 4);  // dh: d (low half) and scales_h (high half)
    const int sb = (it >> 1) & 7;
    const uint32_t low = (sl >> (4 * sb)) & 15u;  // nibble sb % 2 of byte sb / 2
    const uint32_t high = (dh >> (16 + 2 * sb)) & 3u;
    const float scale = static_cast<float>(static_cast<int>(low | (high << 4)) - 32);
    return iq4_item(ldg_u32_a2(q), ldg_u32_a2(q + 4), half_at(dh) * scale);
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_halves(codes, scales, it);
  }
  __device__ static float dot(const W& w, const X& x, int) { return w.d * halves_dot(w.a0, w.a1, w.b0, w.b1, x); }
};

// ---- The K-quants with 16-column sub-blocks (Q2_K, Q3_K, Q6_K) place element 128h + 32k + l (h = 0..1, k = 0..3,
// l = 0..31) of a 256-column super-block in sub-block 8h + 2k + l / 16, with bits of its code in byte 32h + l (or
// 64h + 32(k & 1) + l) of an array, shifted by k. Their item (h, quad) covers l = 4 quad + 0..3 for every k: 16
// columns from four sub-blocks, one word of codes per k. The matching activations: 4 columns of each of the
// four 32-column activation blocks 8 · block + 4h + k.
struct XQuads {
  uint32_t hi[4], lo[4];
  float2 s[4];  // {d_hi, d_lo} of each activation block
};
__device__ __forceinline__ XQuads load_x_quads(const int8_t* codes, const float* scales, int it) {
  const int h = (it >> 3) & 1, l0 = 4 * (it & 7);
  const int64_t first = static_cast<int64_t>(it >> 4) * 8 + 4 * h;
  XQuads x;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const uint8_t* c = reinterpret_cast<const uint8_t*>(codes) + (first + k) * 64 + l0;
    x.hi[k] = ldg_u32(c);
    x.lo[k] = ldg_u32(c + 32);
    x.s[k] = __ldg(reinterpret_cast<const float2*>(scales + (first + k) * 4));
  }
  return x;
}
// Σ q x over one k's 4 columns, both limbs: q as 4 signed bytes.
__device__ __forceinline__ float quad_dot(int q, const XQuads& x, int k) {
  return x.s[k].x * static_cast<float>(__dp4a(q, static_cast<int>(x.hi[k]), 0)) +
         x.s[k].y * static_cast<float>(__dp4a(q, static_cast<int>(x.lo[k]), 0));
}

// Q6_K: {128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d}; element 128h + 32k + l has code
// ((ql[64h + 32(k & 1) + l] >> 4(k / 2)) & 15) | ((qh[32h + l] >> 2k) & 3) << 4, value
// d · scales[8h + 2k + l / 16] · (code - 32); the codes minus 32 become signed bytes with one per-byte subtraction.
struct Q6K {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 210;
  static constexpr int kItemsPerBlock = 16;

  struct W {
    uint32_t ql_a, ql_b, qh, sc_lo, sc_hi, d;
  };
  using X = XQuads;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 4) * kBlockBytes;
    const int h = (it >> 3) & 1, l0 = 4 * (it & 7);
    return {ldg_u32_a2(b + 64 * h + l0), ldg_u32_a2(b + 64 * h + 32 + l0), ldg_u32_a2(b + 128 + 32 * h + l0),
            ldg_u32_a2(b + 192 + 8 * h), ldg_u32_a2(b + 196 + 8 * h), ldg_u16(b + 208)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_quads(codes, scales, it);
  }
  __device__ static float dot(const W& w, const X& x, int it) {
    const int half16 = (it & 7) >= 4 ? 8 : 0;  // l >= 16 takes the odd scale of each pair
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t ql = (k & 1) != 0 ? w.ql_b : w.ql_a;
      const uint32_t code = ((ql >> (4 * (k >> 1))) & 0x0F0F0F0Fu) | (((w.qh >> (2 * k)) & 0x03030303u) << 4);
      const int q = static_cast<int>(__vsub4(code, 0x20202020u));
      const uint32_t sc_word = k < 2 ? w.sc_lo : w.sc_hi;
      const float sc = static_cast<float>(static_cast<int8_t>(sc_word >> (16 * (k & 1) + half16)));
      v += sc * quad_dot(q, x, k);
    }
    return half_at(w.d) * v;
  }
};

// Q2_K: {16 scale bytes (low nibble: scale, high nibble: min of sub-block s), 64 bytes qs, f16 d, f16 dmin};
// element 128h + 32k + l has code (qs[32h + l] >> 2k) & 3 and value d · sc · code - dmin · m. The minimum needs
// Σ x over the sub-block's 4 columns of the item, a dp4a against ones.
struct Q2K {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 84;
  static constexpr int kItemsPerBlock = 16;

  struct W {
    uint32_t qs, sc_lo, sc_hi, dm;
  };
  using X = XQuads;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 4) * kBlockBytes;
    const int h = (it >> 3) & 1, l0 = 4 * (it & 7);
    return {ldg_u32_a2(b + 16 + 32 * h + l0), ldg_u32_a2(b + 8 * h), ldg_u32_a2(b + 8 * h + 4), ldg_u32_a2(b + 80)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_quads(codes, scales, it);
  }
  __device__ static float dot(const W& w, const X& x, int it) {
    const int half16 = (it & 7) >= 4 ? 8 : 0;
    float v = 0.0f, mins = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int q = static_cast<int>((w.qs >> (2 * k)) & 0x03030303u);
      const uint32_t sc_byte = ((k < 2 ? w.sc_lo : w.sc_hi) >> (16 * (k & 1) + half16)) & 0xFFu;
      v += static_cast<float>(sc_byte & 15u) * quad_dot(q, x, k);
      mins += static_cast<float>(sc_byte >> 4) * quad_dot(0x01010101, x, k);
    }
    return half_at(w.dm) * v - half_at(w.dm >> 16) * mins;
  }
};

// Q3_K: {32 bytes hmask, 64 bytes qs, 12 bytes of 6-bit signed scales, f16 d}; element 128h + 32k + l has low bits
// (qs[32h + l] >> 2k) & 3, high bit (hmask[l] >> (4h + k)) & 1, and value d · scale · (low + 4 high - 4): the
// three bits minus 4 become signed bytes with one per-byte subtraction. Scale s (0..15): low nibble of byte s (s < 8)
// or high nibble of byte s - 8, with bits 4..5 from byte 8 + s % 4 at 2 (s / 4), minus 32 (q3k_scale).
struct Q3K {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 110;
  static constexpr int kItemsPerBlock = 16;

  struct W {
    uint32_t qs, hm, sc[3], d;
  };
  using X = XQuads;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 4) * kBlockBytes;
    const int h = (it >> 3) & 1, l0 = 4 * (it & 7);
    return {ldg_u32_a2(b + 32 + 32 * h + l0),
            ldg_u32_a2(b + l0),
            {ldg_u32_a2(b + 96), ldg_u32_a2(b + 100), ldg_u32_a2(b + 104)},
            ldg_u16(b + 108)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_quads(codes, scales, it);
  }
  __device__ static int scale(const W& w, int s) {
    const uint32_t byte_lo = (w.sc[(s & 7) >> 2] >> (8 * (s & 3))) & 0xFFu;  // byte s % 8
    const uint32_t low = s < 8 ? byte_lo & 15u : byte_lo >> 4;
    const uint32_t high = (w.sc[2] >> (8 * (s & 3) + 2 * (s >> 2))) & 3u;
    return static_cast<int>(low | (high << 4)) - 32;
  }
  __device__ static float dot(const W& w, const X& x, int it) {
    const int h = (it >> 3) & 1, half = (it & 7) >= 4 ? 1 : 0;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t code = ((w.qs >> (2 * k)) & 0x03030303u) | (((w.hm >> (4 * h + k)) & 0x01010101u) << 2);
      const int q = static_cast<int>(__vsub4(code, 0x04040404u));
      v += static_cast<float>(scale(w, 8 * h + 2 * k + half)) * quad_dot(q, x, k);
    }
    return half_at(w.d) * v;
  }
};

// ---- The grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M): 256-column super-blocks of 32 groups
// of 8. A group is 8 small integers (grid magnitudes with sign bits, or IQ1's grid values in -1..1) times a float
// scale, plus, for IQ1, a delta times the same scale: Σ w x = scale · Σ g x + delta · Σ x. The item is one group:
// the Decoder turns its bytes into the 8 integers as two words of signed bytes, its scale and its delta coefficient,
// once per item for every batch row; the group's 8 columns are 8 (g % 4) + 0..7 of activation block g / 4.
struct IqGroup {
  uint32_t w0, w1;  // signed bytes: columns 0..3 and 4..7 of the group
  float scale, delta;
};
// Four magnitudes, negated where bits 0..3 of signs are set.
__device__ __forceinline__ uint32_t with_signs(uint32_t magnitudes, unsigned signs) {
  const uint32_t m = ((signs & 1u) ? 0x000000FFu : 0u) | ((signs & 2u) ? 0x0000FF00u : 0u) |
                     ((signs & 4u) ? 0x00FF0000u : 0u) | ((signs & 8u) ? 0xFF000000u : 0u);
  return __vsub4(magnitudes ^ m, m);  // per byte: (~v + 1) where negated
}
__device__ __forceinline__ uint8_t ldg_u8(const uint8_t* p) { return __ldg(p); }
// The scale (d · (0.5 + s)) · k of IQ2 and IQ3_XXS sub-blocks.
__device__ __forceinline__ float half_step(float d, unsigned s, float k) { return d * (0.5f + static_cast<float>(s)) * k; }

struct XGroup {
  uint2 hi, lo;
  float4 s;
};

template <class Decoder>
struct IqGroups {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = Decoder::kBlockBytes;
  static constexpr int kItemsPerBlock = 32;

  using W = IqGroup;
  using X = XGroup;

  __device__ static W fetch(const RowRef& row, int it) {
    return Decoder::group(row.data + static_cast<int64_t>(it >> 5) * kBlockBytes, it & 31);
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    const int64_t blk = it >> 2;
    const uint8_t* c = reinterpret_cast<const uint8_t*>(codes) + blk * 64 + 8 * (it & 3);
    return {__ldg(reinterpret_cast<const uint2*>(c)), __ldg(reinterpret_cast<const uint2*>(c + 32)),
            __ldg(reinterpret_cast<const float4*>(scales) + blk)};
  }
  __device__ static float dot(const W& w, const X& x, int) {
    float v = w.scale * limb_dot(x.s, dot2x4(w.w0, w.w1, x.hi, 0), dot2x4(w.w0, w.w1, x.lo, 0));
    if (w.delta != 0.0f) v += w.delta * limb_dot(x.s, dot2x4(0x01010101u, 0x01010101u, x.hi, 0),
                                                dot2x4(0x01010101u, 0x01010101u, x.lo, 0));
    return v;
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

using Iq2Xxs = IqGroups<Iq2XxsDecoder>;
using Iq2Xs = IqGroups<Iq2XsDecoder>;
using Iq2S = IqGroups<Iq2SDecoder>;
using Iq3Xxs = IqGroups<Iq3XxsDecoder>;
using Iq3S = IqGroups<Iq3SDecoder>;
using Iq1S = IqGroups<Iq1SDecoder>;
using Iq1M = IqGroups<Iq1MDecoder>;

// TQ2_0: 66-byte super-blocks {64 bytes qs, f16 d}; element 128h + 32k + l has code (qs[32h + l] >> 2k) & 3 and
// value d · (code - 1).
struct Tq2 {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 66;
  static constexpr int kItemsPerBlock = 16;

  struct W {
    uint32_t qs, d;
  };
  using X = XQuads;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 4) * kBlockBytes;
    const int h = (it >> 3) & 1, l0 = 4 * (it & 7);
    return {ldg_u32_a2(b + 32 * h + l0), ldg_u16(b + 64)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_quads(codes, scales, it);
  }
  __device__ static float dot(const W& w, const X& x, int) {
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t code = (w.qs >> (2 * k)) & 0x03030303u;
      v += quad_dot(static_cast<int>(__vsub4(code, 0x01010101u)), x, k);
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

// ---- AFQ4 and AFQ8 (MLX affine): codes q (unsigned, Bits wide, element j at stream bits j·Bits) and per-group
// scale s and bias b in ScaleType: w = s·q + b. An item is 32 columns (inside one group: groups are 32, 64 or
// 128), so Σ w x = s · Σ q x + b · Σ x with the block's Σ x from the activation scales. AFQ4 packs element 2k in the
// low nibble of byte k and 2k + 1 in the high one, so the x bytes are split into even and odd columns (two byte
// permutes per 8 columns and limb) to line up with the nibbles; AFQ8's bytes are x's order, offset by 128 to make
// them signed for dp4a (Σ q x = Σ (q - 128) x + 128 Σ x).
template <int Bits, quant::ScalarType ScaleType>
struct Afq {
  static_assert(Bits == 4 || Bits == 8, "AFQ4 and AFQ8");
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = 32 * Bits / 8;
  static constexpr int kItemsPerBlock = 1;
  static constexpr int kWords = Bits / 4;  // uint4 loads of codes per item

  struct W {
    uint4 q[kWords];
    float scale, bias;
  };
  struct X {
    uint4 hi[2], lo[2];
    float4 s;
  };

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it) * kBlockBytes;
    W w;
#pragma unroll
    for (int k = 0; k < kWords; ++k) w.q[k] = ldg_u128(b + 16 * k);
    const int64_t group = (static_cast<int64_t>(it) * kBlockCols) >> row.group_shift;
    w.scale = gemv_lanes::ldg_scale<ScaleType>(row.scales, group);
    w.bias = gemv_lanes::ldg_scale<ScaleType>(row.biases, group);
    return w;
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    const uint8_t* c = reinterpret_cast<const uint8_t*>(codes) + static_cast<int64_t>(it) * 64;
    return {{ldg_u128(c), ldg_u128(c + 16)}, {ldg_u128(c + 32), ldg_u128(c + 48)},
            __ldg(reinterpret_cast<const float4*>(scales) + it)};
  }
  // Σ q·x over the item for one limb (x: its 32 code bytes as two uint4).
  __device__ static int limb(const W& w, const uint4 (&x)[2]) {
    if constexpr (Bits == 8) {
      const uint4 a = make_uint4(w.q[0].x ^ 0x80808080u, w.q[0].y ^ 0x80808080u, w.q[0].z ^ 0x80808080u,
                                 w.q[0].w ^ 0x80808080u);
      const uint4 b = make_uint4(w.q[1].x ^ 0x80808080u, w.q[1].y ^ 0x80808080u, w.q[1].z ^ 0x80808080u,
                                 w.q[1].w ^ 0x80808080u);
      return dot4x4(a, x[0]) + dot4x4(b, x[1]);
    } else {
      const uint32_t q[4] = {w.q[0].x, w.q[0].y, w.q[0].z, w.q[0].w};
      const uint32_t xs[8] = {x[0].x, x[0].y, x[0].z, x[0].w, x[1].x, x[1].y, x[1].z, x[1].w};
      int acc = 0;
#pragma unroll
      for (int t = 0; t < 4; ++t) {  // word t holds columns 8t .. 8t + 7
        const uint32_t even = __byte_perm(xs[2 * t], xs[2 * t + 1], 0x6420);
        const uint32_t odd = __byte_perm(xs[2 * t], xs[2 * t + 1], 0x7531);
        acc = __dp4a(static_cast<int>(q[t] & 0x0F0F0F0Fu), static_cast<int>(even), acc);
        acc = __dp4a(static_cast<int>((q[t] >> 4) & 0x0F0F0F0Fu), static_cast<int>(odd), acc);
      }
      return acc;
    }
  }
  __device__ static float dot(const W& w, const X& x, int) {
    float qx = limb_dot(x.s, limb(w, x.hi), limb(w, x.lo));
    if constexpr (Bits == 8) qx += 128.0f * x.s.z;
    return w.scale * qx + w.bias * x.s.z;
  }
};

}  // namespace qrt::kernels::dp4a
