// Weight policies of the int8 tensor-core GEMM (gemm_q8_mma.hpp). A policy reads one lane's bytes of one weight row
// for a step of kStepCols columns and hands out, per 32-column block j of the step, the A-fragment words of that row
// (mma_int8.cuh: columns 4t .. 4t+3 and 16+4t .. 16+4t+3 for lane t of its quad, as signed bytes) with a scale d
// and a minimum m such that the block's Σ_c w_c · x_c = d · Σ_c q_c · x_c − m · Σ_c x_c (the CPU reference's
// dequantization, regrouped):
//   kStepCols, kStepBytes         columns and bytes per step (the row width must be a whole number of steps)
//   Raw load(row, step, t)        the lane's bytes of the step
//   block(raw, j, k0, k16, d, m)  block j's two code words, scale and minimum
// Steps are sized so that a lane holds 8–32 bytes of each row at once (more bytes in flight per load).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/gemv_dp4a_formats.cuh"

namespace qrt::kernels::mma_q8 {

using dp4a::half_at;
using dp4a::ldg_u128;
using dp4a::ldg_u16;
using dp4a::ldg_u32;
using dp4a::ldg_u32_a2;

// Q4_0: 18-byte blocks {f16 d, 16 bytes}; column c < 16 is the low nibble of byte c, c + 16 its high nibble;
// w = d (q - 8). The nibbles become signed bytes q - 8, so m = 0.
struct Q4_0 {
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

// Q8_0: 34-byte blocks {f16 d, 32 int8 codes}.
struct Q8_0 {
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

}  // namespace qrt::kernels::mma_q8
