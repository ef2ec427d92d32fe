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
#include "kernels/linear/gemv_parts.cuh"
#include "kernels/linear/gemv_rows_reduce.cuh"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels::dp4a_launch {

constexpr int kThreads = 128;
// Rows per block for matrices with at least this many rows (2 halves the activation reads per weight).
constexpr int64_t kTallRows = 4096;

struct Dp4aParams {
  int64_t groups_per_row;
  int scale_bytes;
  int group_shift;
  int64_t row_bytes;
  int items;  // per row
  int64_t x_blocks;  // 32-column activation blocks per batch row
  const int8_t* codes;
  const float* scales;
  GemvPartGrid grid;
  // Per part (gemv_part_value):
  const uint8_t* data[kGemvMaxParts];
  const uint8_t* w_scales[kGemvMaxParts];  // AFQ: [rows, groups_per_row] group scales and biases, scale_bytes each
  const uint8_t* w_biases[kGemvMaxParts];
  int64_t rows[kGemvMaxParts];
  float* y[kGemvMaxParts];
};

template <class P, int M, int R>
__global__ void __launch_bounds__(kThreads) gemv_dp4a_kernel(const Dp4aParams p) {
  __shared__ float partial[kThreads / 32][R * M];
  const int k = gemv_part_of_block(p.grid, static_cast<int64_t>(blockIdx.x));
  const uint8_t* data = gemv_part_value(k, p.data);
  const uint8_t* w_scales = gemv_part_value(k, p.w_scales);
  const uint8_t* w_biases = gemv_part_value(k, p.w_biases);
  const int64_t part_rows = gemv_part_value(k, p.rows);
  const int64_t row0 = (static_cast<int64_t>(blockIdx.x) - gemv_part_value(k, p.grid.first_block)) * R;
  dp4a::RowRef rows[R];
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = min(row0 + r, part_rows - 1);  // past the end: a repeat, not stored
    const int64_t group_row = row * p.groups_per_row * p.scale_bytes;
    rows[r] = {data + row * p.row_bytes, w_scales == nullptr ? nullptr : w_scales + group_row,
               w_biases == nullptr ? nullptr : w_biases + group_row, p.group_shift};
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

  store_row_sums<kThreads, R, M>(acc, partial, row0, part_rows, gemv_part_value(k, p.y));
}

// One launch's arguments (gemv_dp4a_parts checked them); rows_per_block 0: plan_part_grid's choice.
struct Dp4aLaunch {
  std::span<const GemvPart> parts;
  Q8ConstActivations x;
  int m;
  cudaStream_t stream;
  int rows_per_block;
};

// The parts agree on format, width and group parameters (gemv_dp4a_parts checked them); each gets its own blocks
// (plan_part_grid: 2 rows per block when any part is tall, or the caller's 1, 2 or 4 (4 at batch 1 only)).
template <class P>
Status launch(const Dp4aLaunch& l) {
  const std::span<const GemvPart> parts = l.parts;
  const Q8ConstActivations x = l.x;
  const cudaStream_t stream = l.stream;
  const int m = l.m;
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
                    x.codes, x.scales, plan_part_grid(parts, kTallRows, l.rows_per_block), {}, {}, {}, {}, {}};
  for (size_t j = 0; j < parts.size(); ++j) {
    const quant::QuantView& v = parts[j].w;
    params.data[j] = v.data;
    params.w_scales[j] = v.scales;
    params.w_biases[j] = v.biases;
    params.rows[j] = v.rows;
    params.y[j] = parts[j].y;
  }
  const unsigned blocks = static_cast<unsigned>(params.grid.blocks);
  return with_batch(m, [&](auto batch) -> Status {
    constexpr int M = decltype(batch)::value;
    if constexpr (M == 1) {
      if (params.grid.rows_per_block == 4) {
        gemv_dp4a_kernel<P, 1, 4><<<blocks, kThreads, 0, stream>>>(params);
        return cuda_launch_status("gemv_dp4a_kernel");
      }
    }
    if (params.grid.rows_per_block == 2) {
      gemv_dp4a_kernel<P, M, 2><<<blocks, kThreads, 0, stream>>>(params);
    } else {
      gemv_dp4a_kernel<P, M, 1><<<blocks, kThreads, 0, stream>>>(params);
    }
    return cuda_launch_status("gemv_dp4a_kernel");
  });
}

// The per-family entry points (one translation unit each): the launch's status for the family's formats (gemv_dp4a
// checked gemv_dp4a_applies), nullopt for any other format.
std::optional<Status> launch_ggml(quant::FormatId format, const Dp4aLaunch& l);
std::optional<Status> launch_iq_grids(quant::FormatId format, const Dp4aLaunch& l);
std::optional<Status> launch_tables_and_afq(quant::FormatId format, const Dp4aLaunch& l);

}  // namespace qrt::kernels::dp4a_launch
