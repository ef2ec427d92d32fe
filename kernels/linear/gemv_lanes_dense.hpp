// Lane policies of the staged GEMV for the unquantized formats F32, F16 and BF16 (see gemv_lanes.hpp for the scheme
// and gemv_lanes_ggml.hpp for the policy contract). The dense GEMV has its own block-per-row kernel
// (gemv_dense.cu); these policies serve the experts' kernel (kernels/moe/expert_gemv_staged.cu), which streams any
// policy's rows per expert, so that an unquantized mixture-of-experts checkpoint (Mixtral or Qwen3-MoE in BF16)
// does not fall back to the generic kernel. Lane l takes columns 8l..8l+7 of the chunk's one 256-column tile: 16
// bytes of F16/BF16 (32 of F32) from shared memory, converted exactly, and 8 FMAs per batch row.
//
// Bytes each must move, per row of C columns: 2·C (4·C for F32) plus x, shared by all rows: DRAM-bound at every
// decode batch size (about 1.5 instructions per weight for 2 bytes).
#pragma once

#include "kernels/linear/gemv_lanes.hpp"

namespace qrt::kernels::gemv_lanes {

template <quant::FormatId Id>
struct GemvDense {
  static_assert(Id == quant::FormatId::kF32 || Id == quant::FormatId::kF16 || Id == quant::FormatId::kBF16);
  static constexpr int kElemBytes = Id == quant::FormatId::kF32 ? 4 : 2;
  static constexpr int kTileBytes = kTileCols * kElemBytes;
  static constexpr int kTilesPerChunk = 1;
  // 8 KB of ring per warp either way: F32's tiles are twice as long.
  static constexpr int kRows = Id == quant::FormatId::kF32 ? 2 : 4;
  static constexpr int kStages = 4;
  static constexpr int kScratchFloats = 0;
  static constexpr int kColsMultiple = kLaneCols;  // whole lanes (and whole 16-byte copies of a row)
  static constexpr int kGroupCols = -1;
  static constexpr bool kHasPrepare = false;

  QRT_HD static void prepare(const ChunkArgs&, int) {}

  // The lane's 8 weights at p (shared memory, 16-byte aligned), in column order.
  QRT_HD static void weights(const uint8_t* p, float wa[4], float wb[4]) {
    if constexpr (Id == quant::FormatId::kF32) {
      ld_f4(reinterpret_cast<const float*>(p), wa);
      ld_f4(reinterpret_cast<const float*>(p) + 4, wb);
    } else {
      float* out[2] = {wa, wb};
      QRT_GEMV_UNROLL
      for (int k = 0; k < 4; ++k) {
        const uint32_t v = ld_u32(p + 4 * k);
        float* o = out[k / 2] + 2 * (k % 2);
        if constexpr (Id == quant::FormatId::kBF16) {
          o[0] = quant::bits_to_f32(v << 16);
          o[1] = quant::bits_to_f32(v & 0xFFFF0000u);
        } else {
          o[0] = half_bits_to_f32(v & 0xFFFFu);
          o[1] = half_bits_to_f32(v >> 16);
        }
      }
    }
  }

  template <int M, class XRows = ContiguousX>
  QRT_HD static void compute(const ChunkArgs& a, int lane, float (&acc)[kRows][M], const XRows& x_rows = {}) {
    const int col = kLaneCols * lane;  // one tile per chunk
    if (col >= a.cols) return;         // a row ending inside the tile: the remaining lanes are past the end
    float xa[M][4], xb[M][4];
    QRT_GEMV_UNROLL
    for (int i = 0; i < M; ++i) {
      const float* xi = x_rows(a, i) + col;
      ldg_x4(xi, xa[i]);
      ldg_x4(xi + 4, xb[i]);
    }
    QRT_GEMV_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float wa[4], wb[4];
      weights(a.stage + r * chunk_bytes<GemvDense>() + kElemBytes * col, wa, wb);
      QRT_GEMV_UNROLL
      for (int i = 0; i < M; ++i) acc[r][i] = dot4(wb, xb[i], dot4(wa, xa[i], acc[r][i]));
    }
  }
};

template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kF32, S> {
  using type = GemvDense<quant::FormatId::kF32>;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kF16, S> {
  using type = GemvDense<quant::FormatId::kF16>;
};
template <quant::ScalarType S>
struct LanePolicy<quant::FormatId::kBF16, S> {
  using type = GemvDense<quant::FormatId::kBF16>;
};

}  // namespace qrt::kernels::gemv_lanes
