// The integer-dot decode GEMV kernel and its launcher, shared by the per-family translation units
// (gemv_dp4a_ggml.cu, gemv_dp4a_iq.cu, gemv_dp4a_tables.cu): one kernel template per lane policy (the policies are
// in gemv_dp4a_formats.cuh and gemv_dp4a_iquants.cuh), instantiated for 8 batch sizes and 2 row counts each.
// Splitting the instantiations over several files lets a parallel build compile them side by side: in one file
// they were the longest compile of the project (about 110 s).
#pragma once

#include <optional>
#include <span>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/gemv_dp4a.hpp"
#include "kernels/linear/gemv_dp4a_formats.cuh"
#include "kernels/linear/gemv_rows_reduce.cuh"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels::dp4a_launch {

constexpr int kThreads = 128;
// Rows per block for matrices with at least this many rows (2 halves the activation reads per weight).
constexpr int64_t kTallRows = 4096;

// One matrix of a launch: its blocks are [first_block, next part's first_block) of the grid.
struct Dp4aPart {
  const uint8_t* data;
  const uint8_t* w_scales;  // AFQ: [rows, groups_per_row] group scales and biases, scale_bytes each
  const uint8_t* w_biases;
  int64_t rows;
  float* y;
  int64_t first_block;
};

// What the parts share (one format, one width, one activation) and the parts themselves.
struct Dp4aParams {
  int64_t groups_per_row;
  int scale_bytes;
  int group_shift;
  int64_t row_bytes;
  int items;  // per row
  int64_t x_blocks;  // 32-column activation blocks per batch row
  const int8_t* codes;
  const float* scales;
  int parts;
  Dp4aPart part[kGemvMaxParts];
};

template <class P, int M, int R>
__global__ void __launch_bounds__(kThreads) gemv_dp4a_kernel(const Dp4aParams p) {
  __shared__ float partial[kThreads / 32][R * M];
  // The block's part: the last whose first block is not past this one (selected field by field, so that the
  // parameters stay in the constant bank).
  int k = 0;
#pragma unroll
  for (int j = 1; j < kGemvMaxParts; ++j)
    if (j < p.parts && static_cast<int64_t>(blockIdx.x) >= p.part[j].first_block) k = j;
  const Dp4aPart part = k == 0 ? p.part[0] : (k == 1 ? p.part[1] : p.part[2]);
  static_assert(kGemvMaxParts == 3, "the selection above names every part");
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) - part.first_block) * R;
  dp4a::RowRef rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = min(row0 + r, part.rows - 1);  // past the end: a repeat, not stored
    const int64_t group_row = row * p.groups_per_row * p.scale_bytes;
    rows[r] = {part.data + row * p.row_bytes, part.w_scales == nullptr ? nullptr : part.w_scales + group_row,
               part.w_biases == nullptr ? nullptr : part.w_biases + group_row, p.group_shift};
  }

  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;

#pragma unroll 2
  for (int it = static_cast<int>(threadIdx.x); it < p.items; it += kThreads) {
    typename P::W w[R];
#pragma unroll
    for (int r = 0; r < R; ++r) w[r] = P::fetch(rows[r], it);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const typename P::X x = P::load_x(p.codes + i * p.x_blocks * kQ8BlockCodeBytes,
                                        p.scales + i * p.x_blocks * kQ8BlockScaleFloats, it);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][i] += P::dot(w[r], x, it);
    }
  }

  store_row_sums<kThreads, R, M>(acc, partial, row0, part.rows, part.y);
}

// The parts agree on format, width and group parameters (gemv_dp4a_parts checked them); each gets its own blocks,
// R rows each (2 when any part is tall).
template <class P>
Status launch(std::span<const GemvPart> parts, Q8ConstActivations x, int m, cudaStream_t stream) {
  const quant::QuantView& w = parts[0].w;
  const int64_t blocks_per_row = w.cols / P::kBlockCols;
  int64_t groups_per_row = 0;
  int group_shift = 0;
  if (w.params.group_size > 0 && w.scales != nullptr) {
    groups_per_row = w.cols / w.params.group_size;
    while ((1 << group_shift) < w.params.group_size) ++group_shift;
  }
  const int scale_bytes = w.scales == nullptr ? 0 : quant::float_scale_bytes(w.params.scale_type);
  Dp4aParams params{groups_per_row, scale_bytes, group_shift, blocks_per_row * P::kBlockBytes,
                    static_cast<int>(blocks_per_row * P::kItemsPerBlock), w.cols / kQ8BlockCols,
                    x.codes, x.scales, static_cast<int>(parts.size()), {}};
  bool tall = false;
  for (const GemvPart& part : parts) tall = tall || part.w.rows >= kTallRows;
  const int64_t rows_per_block = tall ? 2 : 1;
  int64_t blocks = 0;
  for (size_t j = 0; j < parts.size(); ++j) {
    const quant::QuantView& v = parts[j].w;
    params.part[j] = {v.data, v.scales, v.biases, v.rows, parts[j].y, blocks};
    blocks += (v.rows + rows_per_block - 1) / rows_per_block;
  }
  return with_batch(m, [&](auto batch) -> Status {
    constexpr int M = decltype(batch)::value;
    if (tall) {
      gemv_dp4a_kernel<P, M, 2><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(params);
    } else {
      gemv_dp4a_kernel<P, M, 1><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(params);
    }
    return cuda_launch_status("gemv_dp4a_kernel");
  });
}

// The per-family entry points (one translation unit each): the launch's status for the family's formats (gemv_dp4a
// checked gemv_dp4a_applies), nullopt for any other format.
std::optional<Status> launch_ggml(quant::FormatId format, std::span<const GemvPart> parts, Q8ConstActivations x,
                                  int m, cudaStream_t stream);
std::optional<Status> launch_iq_grids(quant::FormatId format, std::span<const GemvPart> parts, Q8ConstActivations x,
                                      int m, cudaStream_t stream);
std::optional<Status> launch_tables_and_afq(quant::FormatId format, std::span<const GemvPart> parts,
                                            Q8ConstActivations x, int m, cudaStream_t stream);

}  // namespace qrt::kernels::dp4a_launch
