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

namespace qrt::kernels::dp4a {

// One weight row: its packed bytes, and (AFQ) its group scales and biases with group = column >> group_shift.
struct RowRef {
  const uint8_t* data;
  const uint8_t* scales;
  const uint8_t* biases;
  int group_shift;
  float global_scale = 1.0f;  // QuantParams::global_scale (NVFP4)
};

__device__ __forceinline__ uint32_t ldg_u32(const uint8_t* p) { return __ldg(reinterpret_cast<const uint32_t*>(p)); }
__device__ __forceinline__ uint32_t ldg_u16(const uint8_t* p) {
  return __ldg(reinterpret_cast<const unsigned short*>(p));
}
__device__ __forceinline__ uint4 ldg_u128(const uint8_t* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ float half_at(uint32_t bits) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(bits & 0xFFFFu)));
}

// The little-endian u32 at any address (GGML's MXFP4 blocks are byte aligned): one load when it is 4-byte aligned,
// else the two aligned words around it (both inside the tensor: the value's own bytes reach into the second one),
// funnel-shifted.
__device__ __forceinline__ uint32_t ldg_u32_unaligned(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(a & ~uintptr_t{3});
  const unsigned sh = static_cast<unsigned>(a & 3) * 8;
  return __funnelshift_r(ldg_u32(base), sh != 0 ? ldg_u32(base + 4) : 0u, sh);
}

// The little-endian u32 at a 2-byte aligned address (the K-quants' and Q6_K's fields): the same loads, named for the
// callers whose alignment is known.
__device__ __forceinline__ uint32_t ldg_u32_a2(const uint8_t* p) { return ldg_u32_unaligned(p); }

// The 16 bytes at any address (2-byte aligned in the K-quants, byte aligned in GGML's MXFP4 blocks): the aligned words
// holding them, funnel-shifted (the fifth only when the address is not 4-byte aligned; only words holding bytes of
// the value are read, as in ldg_u32_unaligned).
__device__ __forceinline__ uint4 ldg_u128_unaligned(const uint8_t* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  const uint8_t* base = reinterpret_cast<const uint8_t*>(a & ~uintptr_t{3});
  const unsigned sh = static_cast<unsigned>(a & 3) * 8;
  const uint32_t w0 = ldg_u32(base), w1 = ldg_u32(base + 4), w2 = ldg_u32(base + 8), w3 = ldg_u32(base + 12);
  const uint32_t w4 = sh != 0 ? ldg_u32(base + 16) : 0u;
  return make_uint4(__funnelshift_r(w0, w1, sh), __funnelshift_r(w1, w2, sh), __funnelshift_r(w2, w3, sh),
                    __funnelshift_r(w3, w4, sh));
}

__device__ __forceinline__ int dot4x4(uint4 w, uint4 x, int acc = 0) {
  return __dp4a(static_cast<int>(w.x), static_cast<int>(x.x),
                __dp4a(static_cast<int>(w.y), static_cast<int>(x.y),
                       __dp4a(static_cast<int>(w.z), static_cast<int>(x.z),
                              __dp4a(static_cast<int>(w.w), static_cast<int>(x.w), acc))));
}
__device__ __forceinline__ uint4 nibbles(uint4 q, int shift) {
  return make_uint4((q.x >> shift) & 0x0F0F0F0Fu, (q.y >> shift) & 0x0F0F0F0Fu, (q.z >> shift) & 0x0F0F0F0Fu,
                    (q.w >> shift) & 0x0F0F0F0Fu);
}
// The x limbs (16 bytes of hi codes, 16 of lo) of columns [offset, offset + 16) of activation block `block`.
struct X16 {
  uint4 hi, lo;
  float4 s;  // {d_hi, d_lo, sum, sum16}: q8_activations.hpp
};
__device__ __forceinline__ X16 load_x16(const int8_t* codes, const float* scales, int64_t block, int offset) {
  const uint8_t* c = reinterpret_cast<const uint8_t*>(codes) + block * 64 + offset;
  return {ldg_u128(c), ldg_u128(c + 32), __ldg(reinterpret_cast<const float4*>(scales) + block)};
}
// The two limbs' dots of one activation block as one integer: d_hi · hi + d_lo · lo = d_hi / 254 · (254 · hi + lo),
// since d_lo = d_hi / 254 (q8_activations.hpp; d_lo is that quotient rounded, a relative 6e-8 apart). One conversion
// to float instead of two: conversions issue at a quarter of the float rate, and were a fifth of these kernels'
// instructions. Exact: a call's dots span one 32-column block, |dot| <= 32 · 255 · 127 < 2^31 / 254.
constexpr int kLimbsRatio = 254;
constexpr float kLimbsInv = 1.0f / 254.0f;
__device__ __forceinline__ int limbs_int(int dot_hi, int dot_lo) { return kLimbsRatio * dot_hi + dot_lo; }
// Multiplied by d_hi / 254 after the multiply by d_hi, so that a tiny d_hi does not underflow first (d_lo itself
// would be subnormal below max|x| = 4e-34).
__device__ __forceinline__ float limb_dot(const float4& s, int dot_hi, int dot_lo) {
  return s.x * (static_cast<float>(limbs_int(dot_hi, dot_lo)) * kLimbsInv);
}
// A byte (0..255) as a float without a conversion instruction: its bits under 2^23's exponent, minus 2^23.
__device__ __forceinline__ float byte_float(uint32_t b) { return __uint_as_float(0x4B000000u | b) - 8388608.0f; }
__device__ __forceinline__ uint4 or4(uint4 a, uint4 b) {
  return make_uint4(a.x | b.x, a.y | b.y, a.z | b.z, a.w | b.w);
}
// Q5_K's fifth bits: bit `bit` of each byte of qh, moved to bit 4.
__device__ __forceinline__ uint4 fifth_bits(uint4 qh, int bit) {
  const auto f = [bit](uint32_t v) { return ((v >> bit) & 0x01010101u) << 4; };
  return make_uint4(f(qh.x), f(qh.y), f(qh.z), f(qh.w));
}
__device__ __forceinline__ int dot8x4(uint4 w0, uint4 w1, uint4 x0, uint4 x1) { return dot4x4(w1, x1, dot4x4(w0, x0)); }
// Both limbs (32 bytes of hi codes, 32 of lo) and the scales of one whole activation block.
struct X32 {
  uint4 hi0, hi1, lo0, lo1;
  float4 s;
};
__device__ __forceinline__ X32 load_x32(const int8_t* codes, const float* scales, int64_t block) {
  const uint8_t* c = reinterpret_cast<const uint8_t*>(codes) + block * 64;
  return {ldg_u128(c), ldg_u128(c + 16), ldg_u128(c + 32), ldg_u128(c + 48),
          __ldg(reinterpret_cast<const float4*>(scales) + block)};
}

// 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K super-block from its 12 scale bytes as three little-endian
// words s0, s1, s2 (quant::k4_scale_min's layout).
__device__ __forceinline__ void k4_scale_min_words(uint32_t s0, uint32_t s1, uint32_t s2, int j, float* sc, float* m) {
  const unsigned sh = 8u * static_cast<unsigned>(j & 3);
  const uint32_t low_sc = (s0 >> sh) & 63u, low_m = (s1 >> sh) & 63u;
  const uint32_t high_sc = ((s2 >> sh) & 15u) | (((s0 >> sh) >> 6 & 3u) << 4);
  const uint32_t high_m = ((s2 >> sh) >> 4 & 15u) | (((s1 >> sh) >> 6 & 3u) << 4);
  *sc = static_cast<float>(j < 4 ? low_sc : high_sc);
  *m = static_cast<float>(j < 4 ? low_m : high_m);
}

// ---- Q4_K and Q5_K: 256-column super-blocks {f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, [Q5_K: 32 bytes
// of fifth bits], 128 bytes of nibbles}. Item p = 0..3 of a block is the 32 nibble bytes at 32p of qs: low nibbles
// are sub-block 2p (columns 64p + 0..31), high nibbles sub-block 2p + 1 (columns 64p + 32..63), so an item is two
// whole activation blocks. Why 64 columns: the header (one 16-byte load), the two scales and minimums and the
// arithmetic after the dot products are paid once per 36 bytes of W instead of once per 18, which halves the
// instructions per weight byte; at 16-byte items the kernel needed most of the SM's issue slots to keep up with
// HBM (NOTES-gemv.md). Σ over sub-block j of (d·sc_j·q - dmin·m_j)·x = d·sc_j·Σ q x - dmin·m_j·Σ x, Σ x being the
// activation block's sum.
template <int BlockBytes, bool HasQh>
struct KQuant4 {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = BlockBytes;
  static constexpr int kItemsPerBlock = 4;
  static constexpr int kQsOffset = HasQh ? 48 : 16;

  struct W {
    uint4 q0, q1;    // nibble bytes 0..15 and 16..31 of the item
    uint4 qh0, qh1;  // Q5_K: fifth bits of elements 0..15 and 16..31 (bit 2p low nibbles, 2p + 1 high ones)
    uint4 head;      // {d | dmin << 16, the three scale words}
  };
  struct X {
    X32 a, b;  // activation blocks of sub-blocks 2p and 2p + 1
  };

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 2) * kBlockBytes;
    const uint8_t* q = b + kQsOffset + 32 * (it & 3);
    W w;
    w.q0 = ldg_u128(q);
    w.q1 = ldg_u128(q + 16);
    if constexpr (HasQh) {
      w.qh0 = ldg_u128(b + 16);
      w.qh1 = ldg_u128(b + 32);
    }
    w.head = ldg_u128(b);
    return w;
  }

  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    const int64_t a = static_cast<int64_t>(it >> 2) * 8 + 2 * (it & 3);
    return {load_x32(codes, scales, a), load_x32(codes, scales, a + 1)};
  }

  __device__ static float dot(const W& w, const X& x, int it) {
    const int p = it & 3;
    uint4 lo0 = nibbles(w.q0, 0), lo1 = nibbles(w.q1, 0), hi0 = nibbles(w.q0, 4), hi1 = nibbles(w.q1, 4);
    if constexpr (HasQh) {
      lo0 = or4(lo0, fifth_bits(w.qh0, 2 * p));
      lo1 = or4(lo1, fifth_bits(w.qh1, 2 * p));
      hi0 = or4(hi0, fifth_bits(w.qh0, 2 * p + 1));
      hi1 = or4(hi1, fifth_bits(w.qh1, 2 * p + 1));
    }
    // The four 6-bit scales (or minimums) of sub-blocks 4t .. 4t + 3 as the bytes of one word
    // (quant::k4_scale_min's layout), t = p / 2; this item's two are bytes 2 (p % 2) and 2 (p % 2) + 1.
    const uint32_t s0 = w.head.y, s1 = w.head.z, s2 = w.head.w;
    const bool low = p < 2;
    const uint32_t sc4 = low ? (s0 & 0x3F3F3F3Fu) : ((s2 & 0x0F0F0F0Fu) | ((s0 >> 2) & 0x30303030u));
    const uint32_t m4 = low ? (s1 & 0x3F3F3F3Fu) : (((s2 >> 4) & 0x0F0F0F0Fu) | ((s1 >> 2) & 0x30303030u));
    const unsigned sh = 16u * static_cast<unsigned>(p & 1);
    // Scales times the limbs' integer dots, exact in 32 bits: 63 · 254 · 32 · 31 · 127 < 2^31.
    const int ia = static_cast<int>((sc4 >> sh) & 0xFFu) * limbs_int(dot8x4(lo0, lo1, x.a.hi0, x.a.hi1),
                                                                     dot8x4(lo0, lo1, x.a.lo0, x.a.lo1));
    const int ib = static_cast<int>((sc4 >> (sh + 8)) & 0xFFu) * limbs_int(dot8x4(hi0, hi1, x.b.hi0, x.b.hi1),
                                                                           dot8x4(hi0, hi1, x.b.lo0, x.b.lo1));
    const float qx = x.a.s.x * static_cast<float>(ia) + x.b.s.x * static_cast<float>(ib);
    const float mx = byte_float((m4 >> sh) & 0xFFu) * x.a.s.z + byte_float((m4 >> (sh + 8)) & 0xFFu) * x.b.s.z;
    return half_at(w.head.x) * kLimbsInv * qx - half_at(w.head.x >> 16) * mx;
  }
};
using Q4K = KQuant4<144, false>;
using Q5K = KQuant4<176, true>;

// ---- Q8_0: 34-byte blocks {f16 d, 32 int8 codes}. An item is a whole block (its codes two 16-byte runs at a 2-byte
// aligned address): one activation block, one scale, one conversion. Items of 8 columns had paid the scale, the x
// scales, the address arithmetic and the conversions once per 8 codes, about 15 PTX instructions per dp4a.
struct Q8_0 {
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = 34;
  static constexpr int kItemsPerBlock = 1;

  struct W {
    uint4 q0, q1;
    uint32_t d;
  };
  using X = X32;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it) * kBlockBytes;
    return {ldg_u128_unaligned(b + 2), ldg_u128_unaligned(b + 18), ldg_u16(b)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) { return load_x32(codes, scales, it); }
  __device__ static float dot(const W& w, const X& x, int) {
    return half_at(w.d) * limb_dot(x.s, dot8x4(w.q0, w.q1, x.hi0, x.hi1), dot8x4(w.q0, w.q1, x.lo0, x.lo1));
  }
};

// ---- Q4_0, Q4_1, Q5_0, Q5_1: 32-column blocks, element j < 16 the low nibble of qs[j] and j + 16 its high nibble,
// after {f16 d} (Q4_0: x = d (q - 8); Q5_0: x = d (q - 16)) or {f16 d, f16 m} (Q4_1, Q5_1: x = d q + m); the 5-bit
// ones keep element j's fifth bit in bit j of a u32 qh before qs. An item is a whole block: qs as one 16-byte run,
// low nibbles columns 0..15, high nibbles 16..31, one activation block. Σ (d q + m) x = d Σ q x + m Σ x and
// Σ d (q - o) x = d (Σ q x - o Σ x), with the block's Σ x from the activation sums.
template <int BlockBytes, bool HasMin, bool HasQh>
struct Legacy32 {
  static constexpr int kBlockCols = 32;
  static constexpr int kBlockBytes = BlockBytes;
  static constexpr int kItemsPerBlock = 1;
  static constexpr int kQhOffset = HasMin ? 4 : 2;
  static constexpr int kQsOffset = kQhOffset + (HasQh ? 4 : 0);
  static constexpr float kCodeOffset = HasMin ? 0.0f : (HasQh ? 16.0f : 8.0f);

  struct W {
    uint4 q;
    uint32_t dm, qh;
  };
  using X = X32;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it) * kBlockBytes;
    W w{ldg_u128_unaligned(b + kQsOffset), HasMin ? ldg_u32_a2(b) : ldg_u16(b), 0u};
    if constexpr (HasQh) w.qh = ldg_u32_a2(b + kQhOffset);
    return w;
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) { return load_x32(codes, scales, it); }
  // Bits 0..3 of v into bit 4 of bytes 0..3: one multiply places bit i at bits i + 7j for j = 0..3, all distinct (no
  // carries), of which i + 7i = 8i is byte i's bit 0 (shifted to bit 4 by the constant).
  __device__ static uint32_t fifth_bits(uint32_t v) { return ((v & 15u) * 0x02040810u) & 0x10101010u; }
  __device__ static float dot(const W& w, const X& x, int) {
    uint4 a = nibbles(w.q, 0), b = nibbles(w.q, 4);  // columns 0..15 and 16..31
    if constexpr (HasQh) {  // column j's fifth bit is bit j of qh
      a = or4(a, make_uint4(fifth_bits(w.qh), fifth_bits(w.qh >> 4), fifth_bits(w.qh >> 8), fifth_bits(w.qh >> 12)));
      b = or4(b, make_uint4(fifth_bits(w.qh >> 16), fifth_bits(w.qh >> 20), fifth_bits(w.qh >> 24),
                            fifth_bits(w.qh >> 28)));
    }
    const float d = half_at(w.dm);
    const float qx = limb_dot(x.s, dot4x4(b, x.hi1, dot4x4(a, x.hi0)), dot4x4(b, x.lo1, dot4x4(a, x.lo0)));
    return d * qx + (HasMin ? half_at(w.dm >> 16) * x.s.z : -kCodeOffset * d * x.s.z);
  }
};
using Q4_0 = Legacy32<18, false, false>;
using Q4_1 = Legacy32<20, true, false>;
using Q5_0 = Legacy32<22, false, true>;
using Q5_1 = Legacy32<24, true, true>;

// ---- The K-quants with 16-column sub-blocks (Q2_K, Q3_K, Q6_K) place element 128h + 32k + l (h = 0..1, k = 0..3,
// l = 0..31) of a 256-column super-block in sub-block 8h + 2k + l / 16, with bits of its code in byte 32h + l (or
// 64h + 32(k & 1) + l) of an array, shifted by k. Item (h, g) = (it / 2 % 2, it % 2) of a block covers
// l = 16g + 0..15 for every k: 64 columns from four sub-blocks, 16-byte runs of codes. The matching activations:
// columns 16g + 0..15 of the four activation blocks 8 · block + 4h + k. Why 64 columns (they were 16): a word load
// per 4 codes and per k, and both limbs' conversions per 4 columns, had these kernels issue one instruction per
// weight byte or more, where HBM's pace leaves about a quarter of that (NOTES-gemv.md).
struct XSixteens {
  X16 k[4];
};
__device__ __forceinline__ XSixteens load_x_sixteens(const int8_t* codes, const float* scales, int it) {
  const int64_t first = static_cast<int64_t>(it >> 2) * 8 + 4 * ((it >> 1) & 1);
  const int l0 = 16 * (it & 1);
  return {{load_x16(codes, scales, first, l0), load_x16(codes, scales, first + 1, l0),
           load_x16(codes, scales, first + 2, l0), load_x16(codes, scales, first + 3, l0)}};
}
// Σ x over columns 16g + 0..15 of an activation block, from the sums it keeps (q8_activations.hpp: the whole block's
// and its first 16 columns').
__device__ __forceinline__ float sum16(const X16& x, int g) { return g != 0 ? x.s.z - x.s.w : x.s.w; }
// Σ code · x over one sub-block's 16 columns, both limbs as one integer (limbs_int); codes: 16 signed bytes.
__device__ __forceinline__ int sub_block_dot(uint4 codes, const X16& x) {
  return limbs_int(dot4x4(codes, x.hi), dot4x4(codes, x.lo));
}

// Q6_K: {128 bytes ql, 64 bytes qh, 16 int8 scales, f16 d}; element 128h + 32k + l has code
// ((ql[64h + 32(k & 1) + l] >> 4(k / 2)) & 15) | ((qh[32h + l] >> 2k) & 3) << 4, value
// d · scales[8h + 2k + l / 16] · (code - 32). An item: three 16-byte runs of codes (ql's two, qh's one) and four scale
// bytes. Σ (code - 32) x = Σ code x - 32 Σ x, with the sub-block's Σ x from the activation sums: codes stay unsigned,
// so no per-byte subtraction.
struct Q6K {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 210;
  static constexpr int kItemsPerBlock = 4;

  struct W {
    uint4 ql_a, ql_b, qh;  // ql for k = 0 and 2 (low and high nibbles), for k = 1 and 3; qh for every k
    uint32_t sc_lo, sc_hi, d;
  };
  using X = XSixteens;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 2) * kBlockBytes;
    const int h = (it >> 1) & 1, l0 = 16 * (it & 1);
    return {ldg_u128_unaligned(b + 64 * h + l0),
            ldg_u128_unaligned(b + 64 * h + 32 + l0),
            ldg_u128_unaligned(b + 128 + 32 * h + l0),
            ldg_u32_a2(b + 192 + 8 * h),
            ldg_u32_a2(b + 196 + 8 * h),
            ldg_u16(b + 208)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_sixteens(codes, scales, it);
  }
  __device__ static float dot(const W& w, const X& x, int it) {
    const int g = it & 1;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint4 ql = (k & 1) != 0 ? w.ql_b : w.ql_a;
      const auto code = [k](uint32_t l, uint32_t h) {
        return ((l >> (4 * (k >> 1))) & 0x0F0F0F0Fu) | (((h >> (2 * k)) & 0x03030303u) << 4);
      };
      const uint4 c = make_uint4(code(ql.x, w.qh.x), code(ql.y, w.qh.y), code(ql.z, w.qh.z), code(ql.w, w.qh.w));
      const uint32_t sc_word = k < 2 ? w.sc_lo : w.sc_hi;
      const float sc = static_cast<float>(static_cast<int8_t>(sc_word >> (16 * (k & 1) + 8 * g)));
      const float qx = x.k[k].s.x * static_cast<float>(sub_block_dot(c, x.k[k]));
      v += sc * fmaf(qx, kLimbsInv, -32.0f * sum16(x.k[k], g));
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
  static constexpr int kItemsPerBlock = 4;

  struct W {
    uint4 qs;
    uint32_t sc_lo, sc_hi, dm;
  };
  using X = XSixteens;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 2) * kBlockBytes;
    const int h = (it >> 1) & 1, l0 = 16 * (it & 1);
    return {ldg_u128_unaligned(b + 16 + 32 * h + l0), ldg_u32_a2(b + 8 * h), ldg_u32_a2(b + 8 * h + 4),
            ldg_u32_a2(b + 80)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_sixteens(codes, scales, it);
  }
  __device__ static float dot(const W& w, const X& x, int it) {
    const int g = it & 1;
    float v = 0.0f, mins = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const auto code = [k](uint32_t q) { return (q >> (2 * k)) & 0x03030303u; };
      const uint4 c = make_uint4(code(w.qs.x), code(w.qs.y), code(w.qs.z), code(w.qs.w));
      const uint32_t sc_byte = ((k < 2 ? w.sc_lo : w.sc_hi) >> (16 * (k & 1) + 8 * g)) & 0xFFu;
      // The 4-bit scale times the limbs' integer: 15 · 255 · 16 · 3 · 127 < 2^31.
      v += x.k[k].s.x * static_cast<float>(static_cast<int>(sc_byte & 15u) * sub_block_dot(c, x.k[k]));
      mins += byte_float(sc_byte >> 4) * sum16(x.k[k], g);
    }
    return half_at(w.dm) * kLimbsInv * v - half_at(w.dm >> 16) * mins;
  }
};

// Q3_K: {32 bytes hmask, 64 bytes qs, 12 bytes of 6-bit signed scales, f16 d}; element 128h + 32k + l has low bits
// (qs[32h + l] >> 2k) & 3, high bit (hmask[l] >> (4h + k)) & 1, and value d · scale · (low + 4 high - 4): the 4
// offset is taken off with the sub-block's Σ x, as Q6_K's 32. Scale s (0..15): low nibble of byte s (s < 8) or high
// nibble of byte s - 8, with bits 4..5 from byte 8 + s % 4 at 2 (s / 4), minus 32 (q3k_scale).
struct Q3K {
  static constexpr int kBlockCols = 256;
  static constexpr int kBlockBytes = 110;
  static constexpr int kItemsPerBlock = 4;

  struct W {
    uint4 qs, hm;
    uint32_t sc[3], d;
  };
  using X = XSixteens;

  __device__ static W fetch(const RowRef& row, int it) {
    const uint8_t* b = row.data + static_cast<int64_t>(it >> 2) * kBlockBytes;
    const int h = (it >> 1) & 1, l0 = 16 * (it & 1);
    return {ldg_u128_unaligned(b + 32 + 32 * h + l0),
            ldg_u128_unaligned(b + l0),
            {ldg_u32_a2(b + 96), ldg_u32_a2(b + 100), ldg_u32_a2(b + 104)},
            ldg_u16(b + 108)};
  }
  __device__ static X load_x(const int8_t* codes, const float* scales, int it) {
    return load_x_sixteens(codes, scales, it);
  }
  __device__ static int scale(const W& w, int s) {
    const uint32_t byte_lo = (w.sc[(s & 7) >> 2] >> (8 * (s & 3))) & 0xFFu;  // byte s % 8
    const uint32_t low = s < 8 ? byte_lo & 15u : byte_lo >> 4;
    const uint32_t high = (w.sc[2] >> (8 * (s & 3) + 2 * (s >> 2))) & 3u;
    return static_cast<int>(low | (high << 4)) - 32;
  }
  __device__ static float dot(const W& w, const X& x, int it) {
    const int h = (it >> 1) & 1, g = it & 1;
    float v = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int hb = 4 * h + k;
      const auto code = [k, hb](uint32_t q, uint32_t m) {
        return ((q >> (2 * k)) & 0x03030303u) | (((m >> hb) & 0x01010101u) << 2);
      };
      const uint4 c = make_uint4(code(w.qs.x, w.hm.x), code(w.qs.y, w.hm.y), code(w.qs.z, w.hm.z),
                                 code(w.qs.w, w.hm.w));
      const float qx = x.k[k].s.x * static_cast<float>(sub_block_dot(c, x.k[k]));
      v += static_cast<float>(scale(w, 8 * h + 2 * k + g)) * fmaf(qx, kLimbsInv, -4.0f * sum16(x.k[k], g));
    }
    return half_at(w.d) * v;
  }
};

// ---- AFQ4 and AFQ8 (MLX affine): codes q (unsigned, Bits wide, element j at stream bits j·Bits) and per-group
// scale s and bias b in ScaleType: w = s·q + b. An item is 32 columns (inside one group: groups are 32, 64 or
// 128), so Σ w x = s · Σ q x + b · Σ x with the block's Σ x from the activation scales. AFQ4 packs element 2k in the
// low nibble of byte k and 2k + 1 in the high one, so each word's nibbles are interleaved into column order (two
// byte permutes per 8 columns, shared by both limbs; permuting x instead took two per 8 columns and limb); AFQ8's
// bytes are x's order, offset by 128 to make them signed for dp4a (Σ q x = Σ (q - 128) x + 128 Σ x).
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
  // The item's 32 codes as signed bytes in column order (AFQ4: each word's low and high nibbles interleaved by two
  // byte permutes, done once for both limbs; AFQ8: minus 128).
  __device__ static void codes(const W& w, uint4& c0, uint4& c1) {
    if constexpr (Bits == 8) {
      const auto s = [](uint4 q) {
        return make_uint4(q.x ^ 0x80808080u, q.y ^ 0x80808080u, q.z ^ 0x80808080u, q.w ^ 0x80808080u);
      };
      c0 = s(w.q[0]);
      c1 = s(w.q[1]);
    } else {
      const uint32_t q[4] = {w.q[0].x, w.q[0].y, w.q[0].z, w.q[0].w};
      uint32_t c[8];
#pragma unroll
      for (int t = 0; t < 4; ++t) {  // word t holds columns 8t .. 8t + 7: even ones low, odd ones high
        const uint32_t even = q[t] & 0x0F0F0F0Fu, odd = (q[t] >> 4) & 0x0F0F0F0Fu;
        c[2 * t] = __byte_perm(even, odd, 0x5140);
        c[2 * t + 1] = __byte_perm(even, odd, 0x7362);
      }
      c0 = make_uint4(c[0], c[1], c[2], c[3]);
      c1 = make_uint4(c[4], c[5], c[6], c[7]);
    }
  }
  __device__ static float dot(const W& w, const X& x, int) {
    uint4 c0, c1;
    codes(w, c0, c1);
    float qx = limb_dot(x.s, dot8x4(c0, c1, x.hi[0], x.hi[1]), dot8x4(c0, c1, x.lo[0], x.lo[1]));
    // Every rounding pinned: left to contraction, the compiler fused a different product of these sums in the kernel
    // for 8 rows per block than in the others (AFQ8's 128 · Σ x is shared by the rows there), so the outputs changed
    // with the rows per block on a GPU.
    if constexpr (Bits == 8) qx = __fadd_rn(qx, 128.0f * x.s.z);
    return __fmaf_rn(w.scale, qx, __fmul_rn(w.bias, x.s.z));
  }
};

}  // namespace qrt::kernels::dp4a
