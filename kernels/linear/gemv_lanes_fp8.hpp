// Lane policies of the fast GEMV for the E4M3 weight formats (see gemv_lanes.hpp for the scheme and
// gemv_lanes_ggml.hpp for the policy contract): fp8 with one scale per tensor, Hugging Face block FP8 with one scale
// per 128×128 tile, and OCP MXFP8 with one E8M0 scale per 32 columns. A row is one code byte per column, so lane l
// takes bytes 8l..8l+7 of each 256-column tile, turns them into floats with two hardware fp8x2 → half2
// conversions per four (gemv_lanes.hpp: e4m3x4_to_floats) and scales the lane's dot product once.
//
// Bytes each kernel must move, per row of C columns: C code bytes, plus C/32 scale bytes (MXFP8) or one scale per
// 128 columns shared by 128 rows (block FP8), plus x, shared by all rows. Expected bound on an H100: DRAM bandwidth,
// as for Q8_0 (one byte per weight and about 2 instructions per weight to decode).
#pragma once

#include "kernels/linear/gemv_lanes.hpp"

namespace qrt::kernels::gemv_lanes {

enum class E4m3Scale {
  kTensor,     // fp8: QuantParams::global_scale
  kTile128,    // fp8_block: scales[row / 128][col / 128] in the tensor's scale dtype
  kE8m0Per32,  // mxfp8: scales[row][col / 32], E8M0 bytes
};

template <E4m3Scale Kind, quant::ScalarType ScaleType>
struct GemvE4m3 {
  static constexpr int kTileBytes = kTileCols;
  static constexpr int kTilesPerChunk = 2;
  static constexpr int kRows = 4;
  static constexpr int kStages = 4;
  static constexpr int kScratchFloats = 0;
  static constexpr int kColsMultiple = Kind == E4m3Scale::kE8m0Per32 ? 32 : 16;  // whole lanes' 8 columns
  static constexpr int kGroupCols = Kind == E4m3Scale::kE8m0Per32 ? 32 : -1;
  static constexpr bool kHasPrepare = false;

  QRT_HD static void prepare(const ChunkArgs&, int) {}

  QRT_HD static float scale(const ChunkArgs& a, int r, int col) {
    if constexpr (Kind == E4m3Scale::kTensor) {
      return a.global_scale;
    } else if constexpr (Kind == E4m3Scale::kTile128) {
      const int64_t tiles_per_row = (a.x_stride + 127) >> 7;  // x_stride = cols; partial tiles at the edge count
      return ldg_scale<ScaleType>(a.scales, (staged_row(a, r) >> 7) * tiles_per_row + ((a.col0 + col) >> 7));
    } else {
      return quant::e8m0_to_f32(ldg_u8(a.scales + staged_row(a, r) * a.groups_per_row + ((a.col0 + col) >> 5)));
    }
  }

  template <int M, class XRows = ContiguousX>
  QRT_HD static void compute(const ChunkArgs& a, int lane, float (&acc)[kRows][M], const XRows& x_rows = {}) {
    const int tiles = (a.cols + kTileCols - 1) / kTileCols;
    for (int t = 0; t < tiles; ++t) {
      const int col = t * kTileCols + kLaneCols * lane;
      if (col >= a.cols) break;  // a row ending inside this tile
      float xa[M][4], xb[M][4];
      QRT_GEMV_UNROLL
      for (int i = 0; i < M; ++i) {
        const float* xi = x_rows(a, i) + col;
        ldg_x4(xi, xa[i]);
        ldg_x4(xi + 4, xb[i]);
      }
      QRT_GEMV_UNROLL
      for (int r = 0; r < kRows; ++r) {
        const uint8_t* p = a.stage + r * chunk_bytes<GemvE4m3>() + t * kTileBytes + kLaneCols * lane;
        float wa[4], wb[4];
        e4m3x4_to_floats(ld_u32(p), wa);
        e4m3x4_to_floats(ld_u32(p + 4), wb);
        const float s = scale(a, r, col);
        QRT_GEMV_UNROLL
        for (int i = 0; i < M; ++i) acc[r][i] += s * dot4(wb, xb[i], dot4(wa, xa[i], 0.0f));
      }
    }
  }
};

template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kFP8, S> {
  using type = GemvE4m3<E4m3Scale::kTensor, quant::ScalarType::kF32>;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kFP8_BLOCK, S> {
  using type = GemvE4m3<E4m3Scale::kTile128, S>;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kMXFP8, S> {
  using type = GemvE4m3<E4m3Scale::kE8m0Per32, quant::ScalarType::kF32>;
};

}  // namespace qrt::kernels::gemv_lanes
