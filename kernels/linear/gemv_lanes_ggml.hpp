// Lane policies of the fast GEMV for the GGML block formats Q4_0, Q8_0, Q4_K, Q5_K and Q6_K (the scheme and the
// policy contract are described in gemv_lanes.hpp and gemv_staged.cuh). Every policy maps lane l to 8 columns of a
// 256-column tile such that the warp's x loads cover whole 128-byte lines, reads its packed bytes from the staged
// chunk, and decodes them with the same float32 expressions as the format's decode_block (kernels/quant/), only
// summed in a different order: scale · Σ q·x instead of Σ (scale·q)·x.
//
// Bytes each kernel must move, per row of C columns: the packed row (C/256 tiles of kTileBytes) plus x (4·m·C,
// read from L2/L1, shared by all rows). Expected bound on an H100: DRAM bandwidth at batch 1 and 2 (about 5
// instructions per weight at m = 1 against an issue budget of about 7 per weight at 85% of the copy bandwidth);
// each batch row adds one FMA per weight, so from about m = 4 the 4-bit kernels become instruction-bound, the 8-bit
// ones (twice the bytes per weight) stay memory-bound. See bench/NOTES-gemv.md.
#pragma once

#include "kernels/linear/gemv_lanes.hpp"

namespace qrt::kernels::gemv_lanes {

// Q4_0: a tile is 8 blocks of 18 bytes {f16 d, 16 bytes of nibbles}; element j of a block is the low nibble of
// qs[j] (j < 16) or the high nibble of qs[j - 16]. Lane l takes block l/4 and qs bytes 4(l%4)..+3, i.e. columns
// 32(l/4) + 4(l%4) + 0..3 (low nibbles) and the same + 16 (high nibbles).
struct GemvQ4_0 {
  static constexpr int kTileBytes = 8 * 18;
  static constexpr int kTilesPerChunk = 4;
  static constexpr int kRows = 4;
  static constexpr int kStages = 4;
  static constexpr int kScratchFloats = 0;
  static constexpr int kColsMultiple = kTileCols;  // rows of whole tiles keep every chunk 16-byte aligned
  static constexpr int kGroupCols = -1;
  static constexpr bool kHasPrepare = false;

  QRT_HD static void prepare(const ChunkArgs&, int) {}

  template <int M, class XRows = ContiguousX>
  QRT_HD static void compute(const ChunkArgs& a, int lane, float (&acc)[kRows][M], const XRows& x_rows = {}) {
    const int block = lane >> 2;
    const int quarter = lane & 3;
    const int col_lo = 32 * block + 4 * quarter;
    const int tiles = a.cols / kTileCols;
    for (int t = 0; t < tiles; ++t) {
      float xa[M][4], xb[M][4];
      QRT_GEMV_UNROLL
      for (int i = 0; i < M; ++i) {
        const float* xi = x_rows(a, i) + t * kTileCols + col_lo;
        ldg_x4(xi, xa[i]);
        ldg_x4(xi + 16, xb[i]);
      }
      QRT_GEMV_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* b = a.stage + r * chunk_bytes<GemvQ4_0>() + t * kTileBytes + 18 * block;
        const float d = half_bits_to_f32(ld_u16(b));
        const uint32_t q = ld_u32_a2(b + 2 + 4 * quarter);
        float wa[4], wb[4];
        bytes_to_floats(q & 0x0F0F0F0Fu, kMagic + 8.0f, wa);
        bytes_to_floats((q >> 4) & 0x0F0F0F0Fu, kMagic + 8.0f, wb);
        QRT_GEMV_UNROLL
        for (int i = 0; i < M; ++i) acc[r][i] += d * dot4(wb, xb[i], dot4(wa, xa[i], 0.0f));
      }
    }
  }
};

// Q8_0: a tile is 8 blocks of 34 bytes {f16 d, 32 int8 codes}. Lane l takes block l/4, codes 8(l%4)..+7, i.e.
// columns 32(l/4) + 8(l%4) + 0..7.
struct GemvQ8_0 {
  static constexpr int kTileBytes = 8 * 34;
  static constexpr int kTilesPerChunk = 2;
  static constexpr int kRows = 4;
  static constexpr int kStages = 4;
  static constexpr int kScratchFloats = 0;
  static constexpr int kColsMultiple = kTileCols;
  static constexpr int kGroupCols = -1;
  static constexpr bool kHasPrepare = false;

  QRT_HD static void prepare(const ChunkArgs&, int) {}

  template <int M, class XRows = ContiguousX>
  QRT_HD static void compute(const ChunkArgs& a, int lane, float (&acc)[kRows][M], const XRows& x_rows = {}) {
    const int block = lane >> 2;
    const int eighth = lane & 3;
    const int col = 32 * block + 8 * eighth;
    const int tiles = a.cols / kTileCols;
    for (int t = 0; t < tiles; ++t) {
      float xa[M][4], xb[M][4];
      QRT_GEMV_UNROLL
      for (int i = 0; i < M; ++i) {
        const float* xi = x_rows(a, i) + t * kTileCols + col;
        ldg_x4(xi, xa[i]);
        ldg_x4(xi + 4, xb[i]);
      }
      QRT_GEMV_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* b = a.stage + r * chunk_bytes<GemvQ8_0>() + t * kTileBytes + 34 * block;
        const float d = half_bits_to_f32(ld_u16(b));
        // Flipping the top bit turns the int8 code v into the byte v + 128.
        const uint32_t q0 = ld_u32_a2(b + 2 + 8 * eighth) ^ 0x80808080u;
        const uint32_t q1 = ld_u32_a2(b + 6 + 8 * eighth) ^ 0x80808080u;
        float wa[4], wb[4];
        bytes_to_floats(q0, kMagic + 128.0f, wa);
        bytes_to_floats(q1, kMagic + 128.0f, wb);
        QRT_GEMV_UNROLL
        for (int i = 0; i < M; ++i) acc[r][i] += d * dot4(wb, xb[i], dot4(wa, xa[i], 0.0f));
      }
    }
  }
};

// Q4_K and Q5_K: a tile is one 256-element super-block {f16 d, f16 dmin, 12 bytes of 6-bit scales and mins,
// [Q5_K: 32 bytes qh], 128 bytes qs}. Pair p = 0..3 of sub-blocks (2p, 2p+1) lives in qs[32p .. 32p+31]: low nibble
// of qs[32p + j] = element 64p + j, high nibble = element 64p + 32 + j. Lane l takes the 4 qs bytes 4l..4l+3
// (pair p = l/8, j = 4(l%8) + 0..3), i.e. columns 64p + 4(l%8) + 0..3 (sub-block 2p) and the same + 32 (2p+1).
//
// prepare() decodes each sub-block's (d·sc, dmin·m) once per chunk into the scratch as, per row r, tile t and pair
// p, the float4 {d·sc[2p], dmin·m[2p], d·sc[2p+1], dmin·m[2p+1]}: the 8 lanes of a pair read it as one broadcast.
template <int TileBytes, int QsOffset, bool HasQh>
struct GemvKQuant4 {
  static constexpr int kTileBytes = TileBytes;
  static constexpr int kTilesPerChunk = 4;
  static constexpr int kRows = 4;
  static constexpr int kStages = 4;
  static constexpr int kScratchFloats = kRows * kTilesPerChunk * 4 * 4;
  static constexpr int kColsMultiple = kTileCols;
  static constexpr int kGroupCols = -1;
  static constexpr bool kHasPrepare = true;

  QRT_HD static float* scale_slot(float* scratch, int r, int t, int pair) {
    return scratch + ((r * kTilesPerChunk + t) * 4 + pair) * 4;
  }

  // One (row, tile, sub-block) item per lane and step: kRows · tiles · 8 items.
  QRT_HD static void prepare(const ChunkArgs& a, int lane) {
    const int tiles = a.cols / kTileCols;
    const int items = kRows * tiles * 8;
    for (int it = lane; it < items; it += kWarpLanes) {
      const int sub = it & 7;
      const int rt = it >> 3;
      const int r = rt / tiles;
      const int t = rt - r * tiles;
      const uint8_t* tile = a.stage + r * (kTilesPerChunk * kTileBytes) + t * kTileBytes;
      const float d = half_bits_to_f32(ld_u16(tile));
      const float dmin = half_bits_to_f32(ld_u16(tile + 2));
      int sc, m;
      quant::k4_scale_min(tile + 4, sub, &sc, &m);
      float* slot = scale_slot(a.scratch, r, t, sub >> 1) + 2 * (sub & 1);
      slot[0] = d * small_uint_to_float(static_cast<uint32_t>(sc));
      slot[1] = dmin * small_uint_to_float(static_cast<uint32_t>(m));
    }
  }

  template <int M, class XRows = ContiguousX>
  QRT_HD static void compute(const ChunkArgs& a, int lane, float (&acc)[kRows][M], const XRows& x_rows = {}) {
    const int pair = lane >> 3;
    const int col_lo = 64 * pair + 4 * (lane & 7);
    const int tiles = a.cols / kTileCols;
    for (int t = 0; t < tiles; ++t) {
      float xa[M][4], xb[M][4], sum_a[M], sum_b[M];
      QRT_GEMV_UNROLL
      for (int i = 0; i < M; ++i) {
        const float* xi = x_rows(a, i) + t * kTileCols + col_lo;
        ldg_x4(xi, xa[i]);
        ldg_x4(xi + 32, xb[i]);
        sum_a[i] = sum4(xa[i]);
        sum_b[i] = sum4(xb[i]);
      }
      QRT_GEMV_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* tile = a.stage + r * (kTilesPerChunk * kTileBytes) + t * kTileBytes;
        const uint32_t q = ld_u32(tile + QsOffset + 4 * lane);
        uint32_t lo = q & 0x0F0F0F0Fu;
        uint32_t hi = (q >> 4) & 0x0F0F0F0Fu;
        if constexpr (HasQh) {
          // Fifth bits: bit 2p (low half) and 2p+1 (high half) of qh[j] for j = 4(l%8) + 0..3.
          const uint32_t qh = ld_u32(tile + 16 + 4 * (lane & 7));
          lo |= ((qh >> (2 * pair)) & 0x01010101u) << 4;
          hi |= ((qh >> (2 * pair + 1)) & 0x01010101u) << 4;
        }
        float wa[4], wb[4], s[4];
        bytes_to_floats(lo, kMagic, wa);
        bytes_to_floats(hi, kMagic, wb);
        ld_f4(scale_slot(a.scratch, r, t, pair), s);
        QRT_GEMV_UNROLL
        for (int i = 0; i < M; ++i) {
          float v = acc[r][i];
          v += s[0] * dot4(wa, xa[i], 0.0f);
          v -= s[1] * sum_a[i];
          v += s[2] * dot4(wb, xb[i], 0.0f);
          v -= s[3] * sum_b[i];
          acc[r][i] = v;
        }
      }
    }
  }
};

struct GemvQ4_K : GemvKQuant4<sizeof(quant::block_q4_K), offsetof(quant::block_q4_K, qs), false> {
  static_assert(offsetof(quant::block_q4_K, scales) == 4, "prepare() reads the scales at byte 4");
};
struct GemvQ5_K : GemvKQuant4<sizeof(quant::block_q5_K), offsetof(quant::block_q5_K, qs), true> {
  static_assert(offsetof(quant::block_q5_K, scales) == 4 && offsetof(quant::block_q5_K, qh) == 16,
                "prepare() reads the scales at byte 4, compute() qh at byte 16");
};

// Q6_K: a tile is one 210-byte super-block {ql[128], qh[64], int8 scales[16], f16 d}; element 128h + 32k + j
// (h = 0..1, k = 0..3, j = 0..31) has code ((ql[64h + 32(k&1) + j] >> 4(k/2)) & 15) | (((qh[32h + j] >> 2k) & 3) << 4)
// and scale scales[8h + 2k + j/16], value d·scale·(code - 32). Lane l takes 8 consecutive columns 8l..8l+7:
// h = l/16, k = (l/4)%4, j = 8(l%4) + 0..7. Super-blocks are only 2-byte aligned inside a chunk, so the codes are
// read as 16-bit halves.
struct GemvQ6_K {
  static constexpr int kTileBytes = sizeof(quant::block_q6_K);
  static constexpr int kTilesPerChunk = 8;  // 8 · 210 bytes is the first whole number of 16-byte copies
  static constexpr int kRows = 4;
  static constexpr int kStages = 3;
  static constexpr int kScratchFloats = 0;
  static constexpr int kColsMultiple = 8 * kTileCols;  // rows of whole 16-byte copies: 8 super-blocks of 210 bytes
  static constexpr int kGroupCols = -1;
  static constexpr bool kHasPrepare = false;
  static_assert(offsetof(quant::block_q6_K, qh) == 128 && offsetof(quant::block_q6_K, scales) == 192 &&
                    offsetof(quant::block_q6_K, d) == 208,
                "Q6_K field offsets");

  QRT_HD static void prepare(const ChunkArgs&, int) {}

  template <int M, class XRows = ContiguousX>
  QRT_HD static void compute(const ChunkArgs& a, int lane, float (&acc)[kRows][M], const XRows& x_rows = {}) {
    const int h = lane >> 4;
    const int k = (lane >> 2) & 3;
    const int j = 8 * (lane & 3);
    const int col = 128 * h + 32 * k + j;
    const int ql_off = 64 * h + 32 * (k & 1) + j;
    const int qh_off = 128 + 32 * h + j;
    const int ql_shift = 4 * (k >> 1);
    const int qh_shift = 2 * k;
    const int scale_off = 192 + 8 * h + 2 * k + (j >> 4);
    const int tiles = a.cols / kTileCols;
    for (int t = 0; t < tiles; ++t) {
      float xa[M][4], xb[M][4];
      QRT_GEMV_UNROLL
      for (int i = 0; i < M; ++i) {
        const float* xi = x_rows(a, i) + t * kTileCols + col;
        ldg_x4(xi, xa[i]);
        ldg_x4(xi + 4, xb[i]);
      }
      QRT_GEMV_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* tile = a.stage + r * chunk_bytes<GemvQ6_K>() + t * kTileBytes;
        const float d = half_bits_to_f32(ld_u16(tile + 208));
        // int8 scale -> float exactly: flip the top bit to get scale + 128.
        const float sc = small_uint_to_float(tile[scale_off] ^ 0x80u) - 128.0f;
        const uint32_t ql0 = ld_u32_a2(tile + ql_off), ql1 = ld_u32_a2(tile + ql_off + 4);
        const uint32_t qh0 = ld_u32_a2(tile + qh_off), qh1 = ld_u32_a2(tile + qh_off + 4);
        const uint32_t c0 = ((ql0 >> ql_shift) & 0x0F0F0F0Fu) | (((qh0 >> qh_shift) & 0x03030303u) << 4);
        const uint32_t c1 = ((ql1 >> ql_shift) & 0x0F0F0F0Fu) | (((qh1 >> qh_shift) & 0x03030303u) << 4);
        float wa[4], wb[4];
        bytes_to_floats(c0, kMagic + 32.0f, wa);
        bytes_to_floats(c1, kMagic + 32.0f, wb);
        const float dl = d * sc;
        QRT_GEMV_UNROLL
        for (int i = 0; i < M; ++i) acc[r][i] += dl * dot4(wb, xb[i], dot4(wa, xa[i], 0.0f));
      }
    }
  }
};

template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kQ4_0, S> {
  using type = GemvQ4_0;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kQ8_0, S> {
  using type = GemvQ8_0;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kQ4_K, S> {
  using type = GemvQ4_K;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kQ5_K, S> {
  using type = GemvQ5_K;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kQ6_K, S> {
  using type = GemvQ6_K;
};

}  // namespace qrt::kernels::gemv_lanes
