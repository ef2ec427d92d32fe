// The one place where a decode GEMV's runtime batch size becomes a template parameter. Every GEMV launcher (the
// generic kernel, the per-family kernels, the host emulation in the tests) goes through with_batch.
#pragma once

#include <cstdint>
#include <span>
#include <type_traits>

#include "kernels/quant/format_list.hpp"

namespace qrt::kernels {

// Decode batches the GEMV kernels are instantiated for: rows of x per call.
constexpr int kGemvMaxBatch = 8;

// One matrix of a GEMV launch over several matrices sharing x (gemv_dp4a_parts, gemv_dense_parts): the grid holds
// each part's blocks one after the other, each block finding its part among at most kGemvMaxParts.
constexpr int kGemvMaxParts = 3;
struct GemvPart {
  quant::QuantView w;
  float* y;
};

// The grid of a launch over parts: part k owns blocks [first_block[k], first_block[k + 1]) (the last up to
// blocks), each block rows_per_block rows: 2 when any part has at least tall_rows rows (x read once for both), else
// 1, or the caller's choice.
struct GemvPartGrid {
  int parts = 0;
  int rows_per_block = 1;
  int64_t first_block[kGemvMaxParts] = {};
  int64_t blocks = 0;
};
inline GemvPartGrid plan_part_grid(std::span<const GemvPart> parts, int64_t tall_rows, int rows_per_block = 0) {
  GemvPartGrid g;
  g.parts = static_cast<int>(parts.size());
  for (const GemvPart& part : parts)
    if (part.w.rows >= tall_rows) g.rows_per_block = 2;
  if (rows_per_block > 0) g.rows_per_block = rows_per_block;
  const int64_t block_rows = g.rows_per_block;
  for (size_t j = 0; j < parts.size(); ++j) {
    g.first_block[j] = g.blocks;
    g.blocks += (parts[j].w.rows + block_rows - 1) / block_rows;
  }
  return g;
}

// Calls fn(std::integral_constant<int, m>{}) for 1 <= m <= kGemvMaxBatch. The caller checks the range first (an
// out-of-range m runs the kGemvMaxBatch instance here, so unchecked callers fail loudly in their own tests).
template <class Fn>
decltype(auto) with_batch(int m, Fn&& fn) {
  switch (m) {
    case 1: return fn(std::integral_constant<int, 1>{});
    case 2: return fn(std::integral_constant<int, 2>{});
    case 3: return fn(std::integral_constant<int, 3>{});
    case 4: return fn(std::integral_constant<int, 4>{});
    case 5: return fn(std::integral_constant<int, 5>{});
    case 6: return fn(std::integral_constant<int, 6>{});
    case 7: return fn(std::integral_constant<int, 7>{});
    default: return fn(std::integral_constant<int, kGemvMaxBatch>{});
  }
}

}  // namespace qrt::kernels
