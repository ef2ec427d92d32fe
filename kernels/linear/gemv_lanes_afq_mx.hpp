// Lane policies of the fast GEMV for MLX affine (AFQ2..AFQ8), OCP MXFP4, MXFP8 and NVFP4 (see gemv_lanes.hpp for
// the scheme and gemv_lanes_ggml.hpp for the policy contract). These formats store each row as a plain bit stream
// of codes with separate per-group scale arrays, so lane l simply takes columns 8l..8l+7 of each 256-column tile
// (Bits packed bytes) and reads its group's scale (and bias) straight from global memory: the lanes of a group ask
// for the same address, which the L1 answers as one broadcast.
//
// Bytes each kernel must move, per row of C columns: C·bits/8 packed bytes plus the group parts (AFQ: 2 scales of
// 2 bytes per 64 columns with BF16/F16; MXFP4/MXFP8: 1 byte per 32 columns; NVFP4: 1 byte per 16) plus x, shared
// by all rows. Expected bound on an H100: DRAM bandwidth at batch 1 and 2, instruction issue from about batch 4
// for the 4-bit formats (MXFP4's sign handling costs about one more instruction per weight than AFQ4); the 8-bit
// formats stay memory-bound. AFQ2/3/5/6 pull each code out of a 16..48-bit lane word (a shift, a mask and the
// magic-number conversion per weight), so they are issue-bound sooner than AFQ4, but far from the generic kernel.
//
// Rows may end inside a tile (C is a multiple of 32, not of 256): lanes whose columns lie past the end skip the tile.
#pragma once

#include "kernels/linear/gemv_lanes.hpp"

namespace qrt::kernels::gemv_lanes {

// AFQ with 2..8 bits: element j of a row is bits [j·Bits, (j+1)·Bits) of the row's little-endian stream, so for
// 4 bits byte i holds elements 2i (low nibble) and 2i+1 (high nibble), and a lane's 8 columns are Bits whole bytes.
// w = q·scale + bias per group of params.group_size (32, 64 or 128) columns; Σ w·x over the lane's 8 columns =
// scale·Σ q·x + bias·Σ x.
template <int Bits, quant::ScalarType ScaleType>
struct GemvAfq {
  static_assert(Bits >= 2 && Bits <= 8 && Bits != 7, "AFQ has 2, 3, 4, 5, 6 and 8 bits");
  static constexpr int kTileBytes = kTileCols * Bits / 8;
  static constexpr int kTilesPerChunk = 512 / kTileBytes;  // chunks of about 512 bytes (480 for 3 and 5 bits)
  static constexpr int kRows = 4;
  static constexpr int kStages = 4;
  static constexpr int kScratchFloats = 0;
  static constexpr int kColsMultiple = 32;  // the smallest group (whole 16-byte rows are checked separately)
  static constexpr int kGroupCols = 0;      // params.group_size
  static constexpr bool kHasPrepare = false;

  QRT_HD static void prepare(const ChunkArgs&, int) {}

  // The lane's 8 codes as exact floats, in column order.
  QRT_HD static void codes(const uint8_t* p, float wa[4], float wb[4]) {
    if constexpr (Bits == 4) {
      // Even elements in the low nibbles, odd ones in the high nibbles: interleave back into column order.
      const uint32_t q = ld_u32(p);
      float even[4], odd[4];
      bytes_to_floats(q & 0x0F0F0F0Fu, kMagic, even);
      bytes_to_floats((q >> 4) & 0x0F0F0F0Fu, kMagic, odd);
      wa[0] = even[0], wa[1] = odd[0], wa[2] = even[1], wa[3] = odd[1];
      wb[0] = even[2], wb[1] = odd[2], wb[2] = even[3], wb[3] = odd[3];
    } else if constexpr (Bits == 8) {
      bytes_to_floats(ld_u32(p), kMagic, wa);
      bytes_to_floats(ld_u32(p + 4), kMagic, wb);
    } else {
      // Bits bytes at a lane offset of Bits·lane (not aligned for 3 and 5 bits): byte loads into one word.
      uint64_t word = 0;
      QRT_GEMV_UNROLL
      for (int k = 0; k < Bits; ++k) word |= static_cast<uint64_t>(p[k]) << (8 * k);
      constexpr uint32_t kMask = (1u << Bits) - 1u;
      QRT_GEMV_UNROLL
      for (int j = 0; j < 4; ++j) {
        wa[j] = small_uint_to_float(static_cast<uint32_t>(word >> (Bits * j)) & kMask);
        wb[j] = small_uint_to_float(static_cast<uint32_t>(word >> (Bits * (j + 4))) & kMask);
      }
    }
  }

  template <int M, class XRows = ContiguousX>
  QRT_HD static void compute(const ChunkArgs& a, int lane, float (&acc)[kRows][M], const XRows& x_rows = {}) {
    const int tiles = (a.cols + kTileCols - 1) / kTileCols;
    for (int t = 0; t < tiles; ++t) {
      const int col = t * kTileCols + kLaneCols * lane;
      if (col >= a.cols) break;  // a row ending inside this tile: the remaining lanes are past the end
      float xa[M][4], xb[M][4], sum[M];
      QRT_GEMV_UNROLL
      for (int i = 0; i < M; ++i) {
        const float* xi = x_rows(a, i) + col;
        ldg_x4(xi, xa[i]);
        ldg_x4(xi + 4, xb[i]);
        sum[i] = sum4(xa[i]) + sum4(xb[i]);
      }
      const int64_t group = (a.col0 + col) >> a.group_shift;
      QRT_GEMV_UNROLL
      for (int r = 0; r < kRows; ++r) {
        float wa[4], wb[4];
        codes(a.stage + r * chunk_bytes<GemvAfq>() + t * kTileBytes + lane * Bits, wa, wb);
        const int64_t g = staged_row(a, r) * a.groups_per_row + group;
        const float scale = ldg_scale<ScaleType>(a.scales, g);
        const float bias = ldg_scale<ScaleType>(a.biases, g);
        QRT_GEMV_UNROLL
        for (int i = 0; i < M; ++i) {
          float v = acc[r][i];
          v += scale * dot4(wb, xb[i], dot4(wa, xa[i], 0.0f));
          v += bias * sum[i];
          acc[r][i] = v;
        }
      }
    }
  }
};

// Four E2M1 codes (bits 0..15 of h, code n at bits 4n..4n+3, sign in its top bit) as exact floats of twice their
// value: magnitudes ·2 are {0, 1, 2, 3, 4, 6, 8, 12}. Two PRMT table lookups give, per byte, 128 + mag and 128 - mag;
// a third PRMT in sign-replicate mode builds a per-byte mask from the four sign bits and picks between them, and the
// byte 128 ± mag becomes a float as elsewhere. About 3.5 instructions per weight, no converter, no branch.
QRT_HD void e2m1x4_to_floats_x2(uint32_t h, float out[4]) {
  const uint32_t sel = h & 0x7777u;
  const uint32_t pos = prmt(0x83828180u, 0x8C888684u, sel);  // 128 + {0, 1, 2, 3 | 4, 6, 8, 12}
  const uint32_t neg = prmt(0x7D7E7F80u, 0x74787A7Cu, sel);  // 128 - {0, 1, 2, 3 | 4, 6, 8, 12}
  // Byte n = 0xFF when code n is negative. The sign of code 0 is bit 7 of h << 4 (byte 0 of the first operand),
  // code 1's is bit 7 of h (byte 4), code 2's bit 15 of h << 4 (byte 1), code 3's bit 15 of h (byte 5).
  const uint32_t mask = prmt(h << 4, h, 0xD9C8u);
  bytes_to_floats((pos & ~mask) | (neg & mask), kMagic + 128.0f, out);
}

// The E2M1 formats: byte i of a row holds elements 2i (low nibble) and 2i+1 (high nibble) as E2M1 codes.
//   MXFP4 (OCP): one E8M0 scale byte per 32 columns;
//   NVFP4: one E4M3 scale byte per 16 columns, times the tensor's global scale.
// Σ w·x over the lane's 8 columns (one scale block either way) = (scale/2)·Σ (2·e2m1)·x, exact scaling.
template <bool kNvfp4>
struct GemvE2m1 {
  static constexpr int kTileBytes = kTileCols / 2;
  static constexpr int kTilesPerChunk = 4;
  static constexpr int kRows = 4;
  static constexpr int kStages = 4;
  static constexpr int kScratchFloats = 0;
  static constexpr int kColsMultiple = 32;
  static constexpr int kGroupCols = kNvfp4 ? 16 : 32;
  static constexpr int kGroupShift = kNvfp4 ? 4 : 5;
  static constexpr bool kHasPrepare = false;

  QRT_HD static void prepare(const ChunkArgs&, int) {}

  template <int M, class XRows = ContiguousX>
  QRT_HD static void compute(const ChunkArgs& a, int lane, float (&acc)[kRows][M], const XRows& x_rows = {}) {
    const int tiles = (a.cols + kTileCols - 1) / kTileCols;
    for (int t = 0; t < tiles; ++t) {
      const int col = t * kTileCols + kLaneCols * lane;
      if (col >= a.cols) break;
      float xa[M][4], xb[M][4];
      QRT_GEMV_UNROLL
      for (int i = 0; i < M; ++i) {
        const float* xi = x_rows(a, i) + col;
        ldg_x4(xi, xa[i]);
        ldg_x4(xi + 4, xb[i]);
      }
      const int64_t block = (a.col0 + col) >> kGroupShift;
      QRT_GEMV_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const uint32_t q = ld_u32(a.stage + r * chunk_bytes<GemvE2m1>() + t * kTileBytes + 4 * lane);
        float wa[4], wb[4];
        e2m1x4_to_floats_x2(q, wa);
        e2m1x4_to_floats_x2(q >> 16, wb);
        const uint32_t code = ldg_u8(a.scales + staged_row(a, r) * a.groups_per_row + block);
        const float half_scale = kNvfp4 ? quant::e4m3_to_f32(code) * (0.5f * a.global_scale)
                                        : quant::e8m0_to_f32(code) * 0.5f;
        QRT_GEMV_UNROLL
        for (int i = 0; i < M; ++i) acc[r][i] += half_scale * dot4(wb, xb[i], dot4(wa, xa[i], 0.0f));
      }
    }
  }
};
using GemvMxfp4 = GemvE2m1<false>;
using GemvNvfp4 = GemvE2m1<true>;

template <int Bits, quant::ScalarType S>
struct AfqLanePolicy {
  using type = GemvAfq<Bits, S>;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kAFQ2, S> : AfqLanePolicy<2, S> {};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kAFQ3, S> : AfqLanePolicy<3, S> {};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kAFQ4, S> : AfqLanePolicy<4, S> {};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kAFQ5, S> : AfqLanePolicy<5, S> {};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kAFQ6, S> : AfqLanePolicy<6, S> {};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kAFQ8, S> : AfqLanePolicy<8, S> {};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kMXFP4, S> {
  using type = GemvMxfp4;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kNVFP4, S> {
  using type = GemvNvfp4;
};

}  // namespace qrt::kernels::gemv_lanes
