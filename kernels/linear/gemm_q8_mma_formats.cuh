// Weight policies of the int8 tensor-core GEMM (gemm_q8_mma.hpp). A policy reads one lane's bytes of one weight row
// for a step of kStepCols columns and hands out, per 32-column block j of the step, the A-fragment words of that row
// (mma_int8.cuh: columns 4t .. 4t+3 and 16+4t .. 16+4t+3 for lane t of its quad, as signed bytes) with a scale d
// and a minimum m such that the block's Σ_c w_c · x_c = d · Σ_c q_c · x_c − m · Σ_c x_c (the CPU reference's
// dequantization, regrouped):
//   kStepCols, kStepBytes         columns and bytes per step (the row width must be a whole number of steps)
//   Raw load(row, step, t)        the lane's bytes of the step (with kSeparateScales: load(row, row_scales, step, t),
//                                 the row's bytes of the format's separate scale array too)
//   block(raw, j, k0, k16, d, m)  block j's two code words, scale and minimum
// Formats with a scale per 16 columns (Q6_K) set kHalfScales and give two: d for columns 0..15 of the block (k0's),
// d16 for 16..31 (k16's): block(raw, j, k0, k16, d, d16, m); the kernel then multiplies each half by itself.
// Steps are sized so that a lane holds 8–48 bytes of each row at once (more bytes in flight per load).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/gemv_dp4a_formats.cuh"
#include "kernels/linear/gemv_dp4a_iquants.cuh"

namespace qrt::kernels::mma_q8 {

using dp4a::half_at;
using dp4a::ldg_u128;
using dp4a::ldg_u16;
using dp4a::ldg_u32;
using dp4a::ldg_u32_a2;

// Q4_0: 18-byte blocks {f16 d, 16 bytes}; column c < 16 is the low nibble of byte c, c + 16 its high nibble;
// w = d (q - 8). The nibbles become signed bytes q - 8, so m = 0.
struct Q4_0 {
  static constexpr bool kHalfScales = false;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 32 * kStepBlocks;
  static constexpr int kBlockBytes = 18;
  static constexpr int kStepBytes = kStepBlocks * kBlockBytes;
  struct Raw {
    uint32_t q[kStepBlocks], d[kStepBlocks];
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
#pragma unroll
    for (int j = 0; j < kStepBlocks; ++j) {
      r.q[j] = ldg_u32_a2(b + j * kBlockBytes + 2 + 4 * t);
      r.d[j] = ldg_u16(b + j * kBlockBytes);
    }
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    k0 = __vsub4(r.q[j] & 0x0F0F0F0Fu, 0x08080808u);
    k16 = __vsub4((r.q[j] >> 4) & 0x0F0F0F0Fu, 0x08080808u);
    d = half_at(r.d[j]);
    m = 0.0f;
  }
};

// Q4_1, Q5_0, Q5_1: Q4_0's nibble placement after {f16 d[, f16 min][, u32 qh]}, the 5-bit ones taking column c's
// fifth bit from bit c of qh (lane t's: bits 4t.. and 16 + 4t.., picked out at load). Q5_0: w = d (q − 16), signed
// codes, m = 0; Q4_1, Q5_1: w = d q + min, codes below 32 (valid signed bytes as they are) and m = −min. The 5-bit
// formats step 4 blocks at a time (their raw words are a third more).
template <int BlockBytes, bool HasMin, bool HasQh>
struct Legacy32 {
  static constexpr bool kHalfScales = false;
  static constexpr bool kMins = HasMin;
  static constexpr int kStepBlocks = 4;
  static constexpr int kStepCols = 32 * kStepBlocks;
  static constexpr int kBlockBytes = BlockBytes;
  static constexpr int kStepBytes = kStepBlocks * kBlockBytes;
  static constexpr int kQhOffset = HasMin ? 4 : 2;
  static constexpr int kQsOffset = kQhOffset + (HasQh ? 4 : 0);
  struct Raw {
    uint32_t q[kStepBlocks], dm[kStepBlocks], qh[HasQh ? kStepBlocks : 1];
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
#pragma unroll
    for (int j = 0; j < kStepBlocks; ++j) {
      const uint8_t* block = b + j * kBlockBytes;
      r.q[j] = ldg_u32_a2(block + kQsOffset + 4 * t);
      r.dm[j] = HasMin ? ldg_u32_a2(block) : ldg_u16(block);
      if constexpr (HasQh) {
        const uint32_t qh = ldg_u32_a2(block + kQhOffset);
        r.qh[j] = ((qh >> (4 * t)) & 15u) | (((qh >> (16 + 4 * t)) & 15u) << 4);
      }
    }
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    k0 = r.q[j] & 0x0F0F0F0Fu;
    k16 = (r.q[j] >> 4) & 0x0F0F0F0Fu;
    if constexpr (HasQh) {
      k0 |= dp4a::Q5_0::fifth_bits(r.qh[j] & 15u);
      k16 |= dp4a::Q5_0::fifth_bits(r.qh[j] >> 4);
      if constexpr (!HasMin) {
        k0 = __vsub4(k0, 0x10101010u);
        k16 = __vsub4(k16, 0x10101010u);
      }
    }
    d = half_at(r.dm[j]);
    m = HasMin ? -half_at(r.dm[j] >> 16) : 0.0f;
  }
};
using Q4_1 = Legacy32<20, true, false>;
using Q5_0 = Legacy32<22, false, true>;
using Q5_1 = Legacy32<24, true, true>;

// IQ4_NL: Q4_0's blocks and nibble placement, each nibble an index into the 16 int8 levels of kvalues_iq4nl (looked
// up four at a time as the integer-dot GEMV does); w = d · level, m = 0.
struct Iq4Nl : Q4_0 {
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    const uint2 k = dp4a::table_levels_q4<dp4a::Iq4Levels>(r.q[j]);
    k0 = k.x;
    k16 = k.y;
    d = half_at(r.d[j]);
    m = 0.0f;
  }
};

// MXFP4 in GGML blocks (GGUF's gpt-oss experts): 17 bytes {E8M0 e, 16 bytes of nibbles} in Q4_0's placement, each
// nibble an E2M1 code whose value doubled is an integer level (kvalues_mxfp4), so d = 2^(e - 128); m = 0. The blocks
// are byte aligned: a lane's four code bytes are read as the aligned words holding them.
struct Mxfp4Ggml {
  static constexpr bool kHalfScales = false;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 32 * kStepBlocks;
  static constexpr int kBlockBytes = 17;
  static constexpr int kStepBytes = kStepBlocks * kBlockBytes;
  struct Raw {
    uint32_t q[kStepBlocks], e[kStepBlocks];
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
#pragma unroll
    for (int j = 0; j < kStepBlocks; ++j) {
      r.q[j] = dp4a::ldg_u32_unaligned(b + j * kBlockBytes + 1 + 4 * t);
      r.e[j] = __ldg(b + j * kBlockBytes);
    }
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    const uint2 k = dp4a::table_levels_q4<dp4a::Mxfp4Levels>(r.q[j]);
    k0 = k.x;
    k16 = k.y;
    d = quant::FormatTraits<quant::FormatId::kMXFP4_GGML>::e8m0_to_f32_half(static_cast<uint8_t>(r.e[j]));
    m = 0.0f;
  }
};

// The E2M1 nibble streams with separate scale bytes (OCP MXFP4, NVFP4): each row a stream of E2M1 nibbles, byte i
// holding columns 2i (low) and 2i + 1 (high), 16 bytes per 32-column block. Lane t's columns 4t .. 4t+3 are bytes 2t
// and 2t + 1 of the block and columns 16+4t .. 16+4t+3 bytes 8+2t and 9+2t: one 2-byte load each, whose nibbles are
// then the columns in order, so the doubled E2M1 levels (d is half the scale) come out of the lookup in the A
// fragment's order.
struct E2m1Codes {
  __device__ static uint32_t load(const uint8_t* block, int t) {
    return ldg_u16(block + 2 * t) | ldg_u16(block + 8 + 2 * t) << 16;
  }
  __device__ static void levels(uint32_t q, uint32_t& k0, uint32_t& k16) {
    const uint2 k = dp4a::table_levels8<dp4a::Mxfp4Levels>(q);  // q's nibbles are the columns in order
    k0 = k.x;
    k16 = k.y;
  }
};

// OCP MXFP4 (gpt-oss's checkpoints, UQFF) and NVFP4: the E2M1 stream with its scale bytes in a separate array
// (kSeparateScales: the kernel hands load() the row's scale bytes too), [rows, cols / 32] E8M0 bytes for MXFP4,
// d = 2^(e - 127) / 2; [rows, cols / 16] E4M3 bytes for NVFP4, d and d16 = e4m3 / 2 of the block's two bytes (the
// half-scale products, as Q6_K) times the tensor's global scale (kGlobalScale: the kernel multiplies each output by
// MmaParams::global_scale once). m = 0.
template <bool kNvfp4>
struct E2m1Stream {
  static constexpr bool kHalfScales = kNvfp4;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr bool kSeparateScales = true;
  static constexpr bool kGlobalScale = kNvfp4;
  static constexpr int kScaleGroupCols = kNvfp4 ? 16 : 32;
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 32 * kStepBlocks;
  static constexpr int kBlockBytes = 16;
  static constexpr int kStepBytes = kStepBlocks * kBlockBytes;
  static constexpr int kBlockScaleBytes = 32 / kScaleGroupCols;
  struct Raw {
    uint32_t q[kStepBlocks], e[kStepBlocks];  // e: the block's scale byte (bytes, NVFP4)
  };
  __device__ static Raw load(const uint8_t* row, const uint8_t* row_scales, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
    const uint8_t* e = row_scales + step * kBlockScaleBytes * kStepBlocks;  // any address: byte loads
#pragma unroll
    for (int j = 0; j < kStepBlocks; ++j) {
      r.q[j] = E2m1Codes::load(b + j * kBlockBytes, t);
      r.e[j] = __ldg(e + kBlockScaleBytes * j);
      if constexpr (kNvfp4) r.e[j] |= static_cast<uint32_t>(__ldg(e + 2 * j + 1)) << 8;
    }
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    E2m1Codes::levels(r.q[j], k0, k16);
    d = 0.5f * quant::e8m0_to_f32(static_cast<uint8_t>(r.e[j]));
    m = 0.0f;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& d16, float& m) {
    E2m1Codes::levels(r.q[j], k0, k16);
    d = 0.5f * quant::e4m3_to_f32(static_cast<uint8_t>(r.e[j]));
    d16 = 0.5f * quant::e4m3_to_f32(static_cast<uint8_t>(r.e[j] >> 8));
    m = 0.0f;
  }
};
using Mxfp4Ocp = E2m1Stream<false>;
using Nvfp4 = E2m1Stream<true>;

// Q8_0: 34-byte blocks {f16 d, 32 int8 codes}.
struct Q8_0 {
  static constexpr bool kHalfScales = false;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr int kStepBlocks = 4;
  static constexpr int kStepCols = 32 * kStepBlocks;
  static constexpr int kBlockBytes = 34;
  static constexpr int kStepBytes = kStepBlocks * kBlockBytes;
  struct Raw {
    uint32_t q0[kStepBlocks], q16[kStepBlocks], d[kStepBlocks];
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
#pragma unroll
    for (int j = 0; j < kStepBlocks; ++j) {
      r.q0[j] = ldg_u32_a2(b + j * kBlockBytes + 2 + 4 * t);
      r.q16[j] = ldg_u32_a2(b + j * kBlockBytes + 18 + 4 * t);
      r.d[j] = ldg_u16(b + j * kBlockBytes);
    }
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    k0 = r.q0[j];
    k16 = r.q16[j];
    d = half_at(r.d[j]);
    m = 0.0f;
  }
};

// Q4_K and Q5_K: 256-column super-blocks {f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, [Q5_K: 32 bytes qh],
// 128 bytes qs}. Sub-block j = 2p + h (32 columns) is the low (h = 0) or high (h = 1) nibbles of qs bytes
// 32p .. 32p + 31, column c of it byte 32p + c; Q5_K adds bit j of qh[c] as the fifth bit. w = d·sc_j·q − dmin·m_j.
// A lane reads the qs words at 32p + 4t and 32p + 16 + 4t of every pair p: each gives two sub-blocks' codes.
template <int BlockBytes, bool HasQh>
struct KQuant {
  static constexpr bool kHalfScales = false;
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 256;
  static constexpr int kStepBytes = BlockBytes;
  static constexpr int kQsOffset = HasQh ? 48 : 16;
  struct Raw {
    uint4 head;  // {d | dmin << 16, scales 0..3, 4..7, 8..11}
    uint32_t q[8];  // pair p: q[2p] columns 4t.., q[2p + 1] columns 16 + 4t..
    uint32_t qh0, qh16;
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
    r.head = ldg_u128(b);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      r.q[2 * p] = ldg_u32(b + kQsOffset + 32 * p + 4 * t);
      r.q[2 * p + 1] = ldg_u32(b + kQsOffset + 32 * p + 16 + 4 * t);
    }
    if constexpr (HasQh) {
      r.qh0 = ldg_u32(b + 16 + 4 * t);
      r.qh16 = ldg_u32(b + 32 + 4 * t);
    } else {
      r.qh0 = r.qh16 = 0u;
    }
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    const int p = j >> 1, shift = 4 * (j & 1);
    k0 = (r.q[2 * p] >> shift) & 0x0F0F0F0Fu;
    k16 = (r.q[2 * p + 1] >> shift) & 0x0F0F0F0Fu;
    if constexpr (HasQh) {
      k0 |= ((r.qh0 >> j) & 0x01010101u) << 4;
      k16 |= ((r.qh16 >> j) & 0x01010101u) << 4;
    }
    float sc, mn;
    dp4a::k4_scale_min_words(r.head.y, r.head.z, r.head.w, j, &sc, &mn);
    d = half_at(r.head.x) * sc;
    m = half_at(r.head.x >> 16) * mn;
  }
};
using Q4K = KQuant<144, false>;
using Q5K = KQuant<176, true>;

// Q6_K: 210-byte super-blocks {ql[128], qh[64], int8 scales[16], f16 d}; 32-column block j = 4h + k (half h of
// 128 columns, k = 0..3) has column c's code (ql[64h + 32(k & 1) + c] >> (k < 2 ? 0 : 4)) & 15 | ((qh[32h + c] >> 2k)
// & 3) << 4, w = d · scales[8h + 2k + c / 16] · (code − 32). Blocks sit at 2-byte boundaries: every word is read
// through ldg_u32_a2.
struct Q6K {
  static constexpr bool kHalfScales = true;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 256;
  static constexpr int kStepBytes = 210;
  struct Raw {
    uint32_t ql[2][2][2];  // [h][k & 1][columns 4t.. / 16 + 4t..]
    uint32_t qh[2][2];     // [h][columns 4t.. / 16 + 4t..]
    uint32_t scales[4];
    uint32_t d;
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int odd = 0; odd < 2; ++odd)
#pragma unroll
        for (int part = 0; part < 2; ++part)
          r.ql[h][odd][part] = ldg_u32_a2(b + 64 * h + 32 * odd + 16 * part + 4 * t);
#pragma unroll
      for (int part = 0; part < 2; ++part) r.qh[h][part] = ldg_u32_a2(b + 128 + 32 * h + 16 * part + 4 * t);
    }
#pragma unroll
    for (int w = 0; w < 4; ++w) r.scales[w] = ldg_u32_a2(b + 192 + 4 * w);
    r.d = ldg_u16(b + 208);
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& d16, float& m) {
    const int h = j >> 2, k = j & 3, shift = k < 2 ? 0 : 4;
    const auto code = [&](int part) {
      const uint32_t low = (r.ql[h][k & 1][part] >> shift) & 0x0F0F0F0Fu;
      const uint32_t high = ((r.qh[h][part] >> (2 * k)) & 0x03030303u) << 4;
      return __vsub4(low | high, 0x20202020u);
    };
    k0 = code(0);
    k16 = code(1);
    const int s = 8 * h + 2 * k;  // scales s (columns 0..15) and s + 1
    const uint32_t word = r.scales[s >> 2];
    const float super = half_at(r.d);
    d = super * static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * (s & 3)))));
    d16 = super * static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * ((s & 3) + 1)))));
    m = 0.0f;
  }
};

// Q3_K: 110-byte super-blocks {hmask[32], qs[64], 12 bytes of 6-bit scales, f16 d}; 32-column block j = 4h + k (half
// h of 128 columns, k = 0..3) has column c's code ((qs[32h + c] >> 2k) & 3) + 4 ((hmask[c] >> (4h + k)) & 1) − 4 and
// w = d · (scale s − 32), s = 8h + 2k + c / 16 (6 bits: dp4a::Q3K::scale). Lane t's columns 4t.. and 16 + 4t.. of
// every block lie in the same 4 qs and 2 hmask words, so a step (one super-block) loads 10 words per row.
struct Q3K {
  static constexpr bool kHalfScales = true;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 256;
  static constexpr int kStepBytes = 110;
  struct Raw {
    uint32_t qs[2][2];  // [h][columns 4t.. / 16 + 4t..]
    uint32_t hm[2];     // [columns 4t.. / 16 + 4t..]
    uint32_t sc[3];
    uint32_t d;
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
#pragma unroll
    for (int part = 0; part < 2; ++part) {
      r.hm[part] = ldg_u32_a2(b + 16 * part + 4 * t);
#pragma unroll
      for (int h = 0; h < 2; ++h) r.qs[h][part] = ldg_u32_a2(b + 32 + 32 * h + 16 * part + 4 * t);
    }
#pragma unroll
    for (int w = 0; w < 3; ++w) r.sc[w] = ldg_u32_a2(b + 96 + 4 * w);
    r.d = ldg_u16(b + 108);
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& d16, float& m) {
    const int h = j >> 2, k = j & 3;
    const auto code = [&](int part) {
      const uint32_t low = (r.qs[h][part] >> (2 * k)) & 0x03030303u;
      const uint32_t high = ((r.hm[part] >> (4 * h + k)) & 0x01010101u) << 2;
      return __vsub4(low | high, 0x04040404u);
    };
    k0 = code(0);
    k16 = code(1);
    dp4a::Q3K::W w{};
    w.sc[0] = r.sc[0];
    w.sc[1] = r.sc[1];
    w.sc[2] = r.sc[2];
    const float super = half_at(r.d);
    d = super * static_cast<float>(dp4a::Q3K::scale(w, 8 * h + 2 * k));
    d16 = super * static_cast<float>(dp4a::Q3K::scale(w, 8 * h + 2 * k + 1));
    m = 0.0f;
  }
};

// IQ4_XS: 136-byte super-blocks {f16 d, u16 scales_h, 4 bytes scales_l, qs[128]}; 32-column block j is qs bytes
// 16j .. 16j + 15 in IQ4_NL's nibble placement (levels of kvalues_iq4nl), w = d · (ls_j − 32) · level with the 6-bit
// ls_j = nibble j % 2 of scales_l[j / 2] | bits 2j, 2j + 1 of scales_h << 4; m = 0. A lane reads one word per block.
struct Iq4Xs {
  static constexpr bool kHalfScales = false;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 256;
  static constexpr int kStepBytes = 136;
  struct Raw {
    uint32_t q[kStepBlocks];
    uint32_t dh, sl;  // d | scales_h << 16, scales_l
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;  // 136 = 8 · 17: every word below is 4-byte aligned
    r.dh = ldg_u32(b);
    r.sl = ldg_u32(b + 4);
#pragma unroll
    for (int j = 0; j < kStepBlocks; ++j) r.q[j] = ldg_u32(b + 8 + 16 * j + 4 * t);
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    const uint2 k = dp4a::table_levels_q4<dp4a::Iq4Levels>(r.q[j]);
    k0 = k.x;
    k16 = k.y;
    const uint32_t ls = ((r.sl >> (4 * j)) & 15u) | (((r.dh >> (16 + 2 * j)) & 3u) << 4);
    d = half_at(r.dh) * static_cast<float>(static_cast<int>(ls) - 32);
    m = 0.0f;
  }
};

// The 2-bit layout of Q2_K and TQ2_0: 32-column block j = 4h + k (half h of 128 columns, k = 0..3) has column c's
// code (qs[32h + c] >> 2k) & 3, so lane t's columns 4t.. and 16 + 4t.. of all 8 blocks lie in 4 qs words (Q3_K's
// low bits without its hmask).
struct TwoBitCodes {
  uint32_t qs[2][2];  // [h][columns 4t.. / 16 + 4t..]
  __device__ void load(const uint8_t* qs_bytes, int t) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int part = 0; part < 2; ++part) qs[h][part] = ldg_u32_a2(qs_bytes + 32 * h + 16 * part + 4 * t);
  }
  __device__ uint32_t codes(int j, int part) const { return (qs[j >> 2][part] >> (2 * (j & 3))) & 0x03030303u; }
};

// Q2_K: 84-byte super-blocks {16 scale bytes, qs[64], f16 d, f16 dmin}; w = d · (sc & 15) · code − dmin · (sc >> 4)
// with sc = scales[8h + 2k + c / 16]: a scale and a minimum per 16 columns (kHalfMins: m for columns 0..15, m16 for
// 16..31, each against its half's Σx). The codes 0..3 are signed bytes as they are.
struct Q2K {
  static constexpr bool kHalfScales = true;
  static constexpr bool kHalfMins = true;
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 256;
  static constexpr int kStepBytes = 84;
  struct Raw {
    TwoBitCodes q;
    uint32_t sc[4];
    uint32_t dm;  // d | dmin << 16
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
    r.q.load(b + 16, t);
#pragma unroll
    for (int w = 0; w < 4; ++w) r.sc[w] = ldg_u32_a2(b + 4 * w);
    r.dm = ldg_u32_a2(b + 80);
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& d16, float& m,
                               float& m16) {
    k0 = r.q.codes(j, 0);
    k16 = r.q.codes(j, 1);
    const int s = 8 * (j >> 2) + 2 * (j & 3);  // scale bytes s (columns 0..15) and s + 1: one word, s being even
    const uint32_t pair = r.sc[s >> 2] >> (8 * (s & 3));
    const float super = half_at(r.dm), super_min = half_at(r.dm >> 16);
    d = super * static_cast<float>(pair & 15u);
    d16 = super * static_cast<float>((pair >> 8) & 15u);
    m = super_min * static_cast<float>((pair >> 4) & 15u);
    m16 = super_min * static_cast<float>((pair >> 12) & 15u);
  }
};

// TQ2_0: 66-byte super-blocks {qs[64], f16 d}, the 2-bit layout above, w = d · (code − 1); m = 0.
struct Tq2 {
  static constexpr bool kHalfScales = false;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 256;
  static constexpr int kStepBytes = 66;
  struct Raw {
    TwoBitCodes q;
    uint32_t d;
  };
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    Raw r;
    const uint8_t* b = row + step * kStepBytes;
    r.q.load(b, t);
    r.d = ldg_u16(b + 64);
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    k0 = __vsub4(r.q.codes(j, 0), 0x01010101u);
    k16 = __vsub4(r.q.codes(j, 1), 0x01010101u);
    d = half_at(r.d);
    m = 0.0f;
  }
};

// What load() of a kAffineGroups policy gets besides its row: the row's scales and biases, log2 of the group size
// and their dtype.
struct GroupScales {
  const uint8_t* scales;
  const uint8_t* biases;
  int shift;
  quant::ScalarType type;
};

// Element `index` of a scale or bias array of dtype t (F32, F16 or BF16) by one aligned load, as the integer-dot
// GEMV's typed loads do (quant::load_float_scale reads byte by byte, for host and device alike: two to four loads
// and the shifts joining them, per scale and per bias).
__device__ __forceinline__ float ldg_float_scale(const uint8_t* base, int64_t index, quant::ScalarType t) {
  if (t == quant::ScalarType::kF32) return __ldg(reinterpret_cast<const float*>(base) + index);
  const uint32_t h = ldg_u16(base + 2 * index);
  return t == quant::ScalarType::kF16 ? half_at(h) : __uint_as_float(h << 16);
}

// AFQ (MLX's affine quantization, mistral.rs's UQFF AFQ): each row a little-endian bit stream of Bits-bit codes
// (afq.hpp), a scale s and a bias b per group of 32, 64 or 128 columns in two separate arrays of the tensor's scale
// dtype (kAffineGroups: load() gets the row's scales and biases): w = s · q + b, so d = s and m = −b. A 32-column
// block is 4 · Bits bytes, whole words; lane t's columns 4t .. 4t+3 are stream bits 4t · Bits onwards within it, at
// most two words, shifted and spread into bytes (8-bit codes: one word). 8-bit codes (0..255) do not fit a signed
// byte: they are taken as q − 128, and m = −(b + 128 s). A step is two blocks.
template <int Bits>
struct Afq {
  static constexpr bool kHalfScales = false;
  static constexpr bool kSeparateScales = true;
  static constexpr bool kAffineGroups = true;
  static constexpr int kStepBlocks = 2;
  static constexpr int kStepCols = 32 * kStepBlocks;
  static constexpr int kStepBytes = kStepCols * Bits / 8;
  static constexpr float kOffset = Bits == 8 ? 128.0f : 0.0f;
  struct Raw {
    uint32_t k0[kStepBlocks], k16[kStepBlocks];
    float d[kStepBlocks], m[kStepBlocks];
  };
  // The four codes from stream bit `bit` of a block as bytes (signed: 8-bit codes minus 128).
  __device__ static uint32_t codes(const uint32_t* block, int bit) {
    if constexpr (Bits == 8) {
      return __vsub4(__ldg(block + (bit >> 5)), 0x80808080u);
    } else if constexpr (Bits == 4) {  // 16 bits at 0 or 16 of one word: two shift-or-mask steps spread them
      const uint32_t v = (__ldg(block + (bit >> 5)) >> (bit & 31)) & 0xFFFFu;
      const uint32_t bytes = (v | (v << 8)) & 0x00FF00FFu;  // code pairs 0-1 and 2-3 in bytes 0 and 2
      return (bytes | (bytes << 4)) & 0x0F0F0F0Fu;
    } else {
      const int w = bit >> 5, shift = bit & 31;
      uint64_t v = __ldg(block + w);
      if (shift + 4 * Bits > 32) v |= static_cast<uint64_t>(__ldg(block + w + 1)) << 32;  // inside the block
      v >>= shift;
      constexpr uint64_t kMask = (uint64_t{1} << Bits) - 1;
      return static_cast<uint32_t>(v & kMask) | static_cast<uint32_t>((v >> Bits) & kMask) << 8 |
             static_cast<uint32_t>((v >> (2 * Bits)) & kMask) << 16 |
             static_cast<uint32_t>((v >> (3 * Bits)) & kMask) << 24;
    }
  }
  __device__ static Raw load(const uint8_t* row, const GroupScales& g, int64_t step, int t) {
    Raw r;
#pragma unroll
    for (int j = 0; j < kStepBlocks; ++j) {
      const int64_t kb = step * kStepBlocks + j;
      const auto* block = reinterpret_cast<const uint32_t*>(row + kb * 4 * Bits);
      r.k0[j] = codes(block, 4 * t * Bits);
      r.k16[j] = codes(block, (16 + 4 * t) * Bits);
      const int64_t group = (32 * kb) >> g.shift;
      const float s = ldg_float_scale(g.scales, group, g.type);
      r.d[j] = s;
      r.m[j] = -(ldg_float_scale(g.biases, group, g.type) + kOffset * s);
    }
    return r;
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    k0 = r.k0[j];
    k16 = r.k16[j];
    d = r.d[j];
    m = r.m[j];
  }
};

// The grid i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M): 256-column super-blocks of 32 groups of
// 8 columns, each group decoded by the integer-dot GEMV's decoder (gemv_dp4a_iquants.cuh) into 8 signed bytes, a
// scale and (IQ1) a delta. Lane t's columns 4t .. 4t+3 of block j are half of group 4j + t/2, its columns
// 16+4t .. 16+4t+3 half of group 4j + 2 + t/2: the lane decodes both groups and keeps its half of each, their scales
// being d and d16 (kHalfScales: IQ2_XS, IQ2_S and IQ1_M scale per 16 columns, the others per 32, where d16 = d).
// IQ1's delta, ± scale / 8 per group, is folded into the codes: scale · (g ± 1/8) = (scale / 8) · (8g ± 1) exactly,
// codes -9..9, so m = 0 for every grid format. A step is half a super-block (4 blocks). The groups are decoded per
// block, not at load: a decoded step is 16 words per row, and holding it for the block's four rows spilled.
template <class Decoder, bool kDelta>
struct IqGrid {
  static constexpr bool kHalfScales = true;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr bool kDecodePerBlock = true;
  static constexpr int kStepBlocks = 4;
  static constexpr int kStepCols = 32 * kStepBlocks;
  static_assert(Decoder::kBlockBytes % 2 == 0, "a row's bytes per step: half a super-block's");
  static constexpr int kStepBytes = Decoder::kBlockBytes / 2;  // row_bytes = cols / kStepCols · kStepBytes
  struct Raw {
    const uint8_t* super;  // the step's super-block
    int first;             // the step's first group in it
  };
  // Lane t's four codes of group g (its word t % 2) and their scale, IQ1's delta folded in.
  __device__ static void lane_half(const dp4a::IqGroup& g, int t, uint32_t& k, float& d) {
    k = (t & 1) ? g.w1 : g.w0;
    d = g.scale;
    if constexpr (kDelta) {
      k = dp4a::iq1_fold_delta(k, dp4a::iq1_delta_adds(g));
      d = 0.125f * g.scale;
    }
  }
  __device__ static Raw load(const uint8_t* row, int64_t step, int) {
    return {row + (step >> 1) * Decoder::kBlockBytes, 16 * static_cast<int>(step & 1)};
  }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& d16, float& m) {
    const int t = static_cast<int>(threadIdx.x & 3);
    lane_half(Decoder::group(r.super, r.first + 4 * j + (t >> 1)), t, k0, d);
    lane_half(Decoder::group(r.super, r.first + 4 * j + 2 + (t >> 1)), t, k16, d16);
    m = 0.0f;
  }
};
using Iq2Xxs = IqGrid<dp4a::Iq2XxsDecoder, false>;
using Iq2Xs = IqGrid<dp4a::Iq2XsDecoder, false>;
using Iq2S = IqGrid<dp4a::Iq2SDecoder, false>;
using Iq3Xxs = IqGrid<dp4a::Iq3XxsDecoder, false>;
using Iq3S = IqGrid<dp4a::Iq3SDecoder, false>;
using Iq1S = IqGrid<dp4a::Iq1SDecoder, true>;
using Iq1M = IqGrid<dp4a::Iq1MDecoder, true>;

// TQ1_0 (BitNet's ternary weights; 54-byte super-blocks {qs[48], qh[4], f16 d}): five trits per qs byte and four per
// qh byte, each byte a base-3 fraction whose trit n reads as ((byte · 3^n mod 256) · 3) >> 8 (ggml_ternary.hpp), in
// trit-major order: trit n of qs[0..31] is columns 32n .. 32n+31 (blocks 0..4), of qs[32..47] columns 160 + 16n ..
// (blocks 5, 6 and the first half of 7), of qh[0..3] columns 240 + 4n .. 240 + 4n+3. So lane t's columns of every
// block come from four words, qs bytes 4t.., 16 + 4t.. and 32 + 4t.. and the qh bytes (their trit t: columns
// 16 + 4t .. of block 7); w = d · (trit − 1), m = 0.
struct Tq1 {
  static constexpr bool kHalfScales = false;
  static constexpr bool kMins = false;  // block() sets m = 0
  static constexpr int kStepBlocks = 8;
  static constexpr int kStepCols = 256;
  static constexpr int kStepBytes = 54;
  struct Raw {
    uint32_t head, mid, tail, qh, d;  // qs bytes 4t.., 16 + 4t.., 32 + 4t..; qh; d
  };
  // Trit n of each of w's bytes (n given as 3^n mod 256), minus 1, as signed bytes.
  __device__ static uint32_t trits(uint32_t w, uint32_t pow3) {
    uint32_t out = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t shifted = (((w >> (8 * i)) & 0xFFu) * pow3) & 0xFFu;
      out |= ((((shifted * 3u) >> 8) + 255u) & 0xFFu) << (8 * i);
    }
    return out;
  }
  __device__ static Raw load(const uint8_t* row, int64_t step, int t) {
    const uint8_t* b = row + step * kStepBytes;
    return {ldg_u32_a2(b + 4 * t), ldg_u32_a2(b + 16 + 4 * t), ldg_u32_a2(b + 32 + 4 * t), ldg_u32_a2(b + 48),
            ldg_u16(b + 52)};
  }
  // 3^n for n in 0..4 (no table: n is the lane's for the qh bytes, and a table indexed at run time lives in memory).
  __device__ static uint32_t pow3(int n) { return n == 0 ? 1u : n == 1 ? 3u : n == 2 ? 9u : n == 3 ? 27u : 81u; }
  __device__ static void block(const Raw& r, int j, uint32_t& k0, uint32_t& k16, float& d, float& m) {
    if (j < 5) {
      k0 = trits(r.head, pow3(j));
      k16 = trits(r.mid, pow3(j));
    } else if (j < 7) {
      k0 = trits(r.tail, pow3(2 * (j - 5)));
      k16 = trits(r.tail, pow3(2 * (j - 5) + 1));
    } else {
      k0 = trits(r.tail, pow3(4));
      k16 = trits(r.qh, pow3(static_cast<int>(threadIdx.x & 3)));
    }
    d = half_at(r.d);
    m = 0.0f;
  }
};

// f(P{}) for the format's policy P, or otherwise() for a format without one: the one list of the formats the
// tensor-core GEMM takes, for the dense launch, the grouped experts and their shape checks.
template <class F, class G>
__host__ auto with_policy(quant::FormatId format, F&& f, G&& otherwise) {
  switch (format) {
    case quant::FormatId::kQ4_0: return f(Q4_0{});
    case quant::FormatId::kQ4_1: return f(Q4_1{});
    case quant::FormatId::kQ5_0: return f(Q5_0{});
    case quant::FormatId::kQ5_1: return f(Q5_1{});
    case quant::FormatId::kQ8_0: return f(Q8_0{});
    case quant::FormatId::kQ2_K: return f(Q2K{});
    case quant::FormatId::kQ3_K: return f(Q3K{});
    case quant::FormatId::kQ4_K: return f(Q4K{});
    case quant::FormatId::kQ5_K: return f(Q5K{});
    case quant::FormatId::kQ6_K: return f(Q6K{});
    case quant::FormatId::kIQ4_NL: return f(Iq4Nl{});
    case quant::FormatId::kIQ4_XS: return f(Iq4Xs{});
    case quant::FormatId::kTQ1_0: return f(Tq1{});
    case quant::FormatId::kTQ2_0: return f(Tq2{});
    case quant::FormatId::kMXFP4_GGML: return f(Mxfp4Ggml{});
    case quant::FormatId::kMXFP4: return f(Mxfp4Ocp{});
    case quant::FormatId::kNVFP4: return f(Nvfp4{});
    case quant::FormatId::kIQ2_XXS: return f(Iq2Xxs{});
    case quant::FormatId::kIQ2_XS: return f(Iq2Xs{});
    case quant::FormatId::kIQ2_S: return f(Iq2S{});
    case quant::FormatId::kIQ3_XXS: return f(Iq3Xxs{});
    case quant::FormatId::kIQ3_S: return f(Iq3S{});
    case quant::FormatId::kIQ1_S: return f(Iq1S{});
    case quant::FormatId::kIQ1_M: return f(Iq1M{});
    case quant::FormatId::kAFQ2: return f(Afq<2>{});
    case quant::FormatId::kAFQ3: return f(Afq<3>{});
    case quant::FormatId::kAFQ4: return f(Afq<4>{});
    case quant::FormatId::kAFQ5: return f(Afq<5>{});
    case quant::FormatId::kAFQ6: return f(Afq<6>{});
    case quant::FormatId::kAFQ8: return f(Afq<8>{});
    default: return otherwise();
  }
}

}  // namespace qrt::kernels::mma_q8
