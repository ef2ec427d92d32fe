// The integer-dot decode GEMV kernel and its launcher, shared by the per-family translation units (gemv_dp4a_ggml.cu,
// gemv_dp4a_iq.cu, gemv_dp4a_tables.cu): one kernel template per lane policy (the policies are in gemv_dp4a_formats.cuh
// and gemv_dp4a_iquants.cuh), instantiated for 8 batch sizes and 2 row counts each (4 and 8 rows too at batch 1), and
// the looping kernel for one row at 1, 2, 4 and 8 rows per block.
// Splitting the instantiations over several files lets a parallel build compile them side by side: in one file they
// were the longest compile of the project (about 110 s).
#pragma once

#include <optional>
#include <span>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
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
  float global_scale = 1.0f;  // the parts' QuantParams::global_scale (NVFP4; the same for all, checked)
  int lanes = kThreads;       // threads per row group (gemv_dp4a_kernel)
};

// Batch row i's row of x: row i of a contiguous batch.
struct ContiguousRows {
  __device__ __forceinline__ int64_t operator()(int i) const { return i; }
};

// Every thread's share of R rows times M batch rows: the items it owns (first, first + stride, ...), each item's W
// loaded once for all batch rows and each x piece once for all rows. codes / scales: x row 0's; batch row i reads x
// row x_row(i).
template <class P, int M, int R, class XRows = ContiguousRows>
__device__ __forceinline__ void accumulate_items(const dp4a::RowRef (&rows)[R], const int8_t* codes,
                                                 const float* scales, int64_t x_blocks, int items, float (&acc)[R][M],
                                                 int first, int stride, const XRows& x_row = {}) {
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;

#pragma unroll 2
  for (int it = first; it < items; it += stride) {
    typename P::W w[R];
#pragma unroll
    for (int r = 0; r < R; ++r) w[r] = P::fetch(rows[r], it);
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const int64_t xr = x_row(i);
      const typename P::X x = P::load_x(codes + xr * x_blocks * kQ8BlockCodeBytes,
                                        scales + xr * x_blocks * kQ8BlockScaleFloats, it);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r][i] += P::dot(w[r], x, it);
    }
  }
}

// A block is one row group: `p.lanes` threads (row_lanes) owning R consecutive rows. The group index is then the
// constant 0 and the rows' addresses are the block's alone, which ptxas keeps in uniform registers; with several
// groups per block (threadIdx.x / lanes) every thread held its own copies: 20-45 registers more per thread on
// average over the formats, and most of the kernels' spills (bench/NOTES-gemv.md, "One row group per block").

// The R rows of grid block b, in part k.
template <int R>
__device__ __forceinline__ int64_t block_rows(const Dp4aParams& p, int64_t b, int k, dp4a::RowRef (&rows)[R]) {
  const uint8_t* data = gemv_part_value(k, p.data);
  const uint8_t* w_scales = gemv_part_value(k, p.w_scales);
  const uint8_t* w_biases = gemv_part_value(k, p.w_biases);
  const int64_t part_rows = gemv_part_value(k, p.rows);
  const int64_t row0 = (b - gemv_part_value(k, p.grid.first_block)) * R;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int64_t row = min(row0 + r, part_rows - 1);  // past the end: a repeat, not stored
    const int64_t group_row = row * p.groups_per_row * p.scale_bytes;
    rows[r] = {data + row * p.row_bytes, w_scales == nullptr ? nullptr : w_scales + group_row,
               w_biases == nullptr ? nullptr : w_biases + group_row, p.group_shift, p.global_scale};
  }
  return row0;
}

// The block's rows (from row0, of part k) summed for every batch row and stored.
template <class P, int M, int R>
__device__ __forceinline__ void sum_rows(const Dp4aParams& p, const dp4a::RowRef (&rows)[R], int64_t row0, int k,
                                         float (*partial)[R * M]) {
  float acc[R][M];
  accumulate_items<P, M, R>(rows, p.codes, p.scales, p.x_blocks, p.items, acc, static_cast<int>(threadIdx.x),
                            p.lanes);
  store_row_sums<kThreads, R, M>(acc, partial, row0, gemv_part_value(k, p.rows), gemv_part_value(k, p.y), p.lanes);
}

// Starts the R rows of grid block b into L2 (thread 0: one bulk prefetch; nothing past the grid).
template <int R>
__device__ __forceinline__ void prefetch_block_rows(const Dp4aParams& p, int64_t b) {
  if (threadIdx.x != 0 || b >= p.grid.blocks) return;
  const int k = gemv_part_of_block(p.grid, b);
  const int64_t first = (b - gemv_part_value(k, p.grid.first_block)) * R;
  const int64_t rows = gemv_part_value(k, p.rows);
  const int64_t held = rows - first < R ? rows - first : R;  // the rows that exist
  prefetch_to_l2(gemv_part_value(k, p.data) + first * p.row_bytes, static_cast<uint64_t>(held * p.row_bytes));
}

template <class P, int M, int R>
__global__ void __launch_bounds__(kThreads) gemv_dp4a_kernel(const Dp4aParams p) {
  __shared__ float partial[kThreads / 32][R * M];
  const int64_t b = blockIdx.x;
  const int k = gemv_part_of_block(p.grid, b);
  dp4a::RowRef rows[R];
  const int64_t row0 = block_rows<R>(p, b, k, rows);
  // The weights are no kernel's output: their rows start into L2 while the kernel before may still run, then x
  // (that kernel's output) is waited for (programmatic_launch.cuh).
  allow_next_grid();
  prefetch_block_rows<R>(p, b);
  wait_for_previous_grid();
  sum_rows<P, M, R>(p, rows, row0, k, partial);
}

// One x row over a grid smaller than the plan's blocks (launch tuning's choice, gemv_dp4a_rows' max_blocks): block
// b, b + gridDim.x, ... in turn, the rows one step ahead prefetched to L2 by thread 0, so that an SM keeps loading
// across what were block boundaries. Each row's sums are those of gemv_dp4a_kernel. (A separate kernel: the loop in
// gemv_dp4a_kernel moved ptxas's register choices for the batch kernels into spills.)
template <class P, int R>
__global__ void __launch_bounds__(kThreads) gemv_dp4a_looping_kernel(const Dp4aParams p) {
  __shared__ float partial[kThreads / 32][R];
  allow_next_grid();
  prefetch_block_rows<R>(p, blockIdx.x);
  prefetch_block_rows<R>(p, static_cast<int64_t>(blockIdx.x) + gridDim.x);
  wait_for_previous_grid();
  for (int64_t b = blockIdx.x; b < p.grid.blocks; b += gridDim.x) {
    if (b != blockIdx.x) {
      __syncthreads();  // the previous step's partial sums are read
      prefetch_block_rows<R>(p, b + gridDim.x);
    }
    const int k = gemv_part_of_block(p.grid, b);
    dp4a::RowRef rows[R];
    const int64_t row0 = block_rows<R>(p, b, k, rows);
    sum_rows<P, 1, R>(p, rows, row0, k, partial);
  }
}

// Stacked experts (gemv_dp4a_experts): part k is expert 0's matrix of stack k (gate and up may share a launch: grid.z),
// expert e's parts start e strides further; grid.y is this launch's slots, each its expert's rows against its own x
// row. Expert matrices are often narrow (Qwen3-MoE's down projection: 768 columns, 12 Q4_K items a row), so a row
// gets `lanes` threads (expert_row_lanes: 8 or 16 lanes of a warp, or the fewest warps that cover its items) and a
// block 128 / lanes rows, which keeps most threads loading.
struct Dp4aExperts {
  const int32_t* ids;
  int64_t first_slot;
  int top_k, experts;
  bool shared_input;  // x row = slot / top_k (a token's input), else x row = slot
  uint64_t data_stride, scales_stride, biases_stride;  // bytes per expert
  int lanes;          // threads per row
  // Set: the grouped kernel (a batch's slots sorted by expert: expert e's are order[offsets[e] .. offsets[e + 1])).
  const int32_t* offsets = nullptr;
  const int32_t* order = nullptr;
};

// Threads per row: the fewest warps (32, 64 or 128) that give each of a row's items a thread, so that narrow rows
// (a 2048-column Q4_K row is 64 items) leave no thread of the block idle.
inline int row_lanes(int items) { return row_group_lanes(items, kThreads); }

// Threads per expert row: row_lanes, or 8 or 16 lanes of a warp for rows of 16 items or fewer, which would leave
// most of a warp idle (Qwen3-30B-A3B's 768-column down projection: 12 Q4_K items, 12 of 32 lanes busy): the same
// threads then hold twice or four times the rows, so twice or four times the bytes in flight.
inline int expert_row_lanes(int items) { return items <= 8 ? 8 : (items <= 16 ? 16 : row_lanes(items)); }

// The sum over a row's `lanes` threads (8 or 16: xor offsets under `lanes` stay inside each aligned group of a warp;
// 32 or more: the whole warp, in warp_sum's order). lanes is the same for the whole grid.
__device__ __forceinline__ float lanes_sum(float v, int lanes) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    if (offset < lanes) v += __shfl_xor_sync(kFullWarpMask, v, offset);
  return v;
}

// Row `row` of expert `expert`'s matrix in stack k.
__device__ __forceinline__ dp4a::RowRef expert_row(const Dp4aParams& p, const Dp4aExperts& e, int k, int expert,
                                                   int64_t row) {
  const uint64_t ue = static_cast<uint64_t>(expert);
  const int64_t group_row = row * p.groups_per_row * p.scale_bytes;
  const uint8_t* w_scales = gemv_part_value(k, p.w_scales);
  const uint8_t* w_biases = gemv_part_value(k, p.w_biases);
  return {gemv_part_value(k, p.data) + ue * e.data_stride + row * p.row_bytes,
          w_scales == nullptr ? nullptr : w_scales + ue * e.scales_stride + group_row,
          w_biases == nullptr ? nullptr : w_biases + ue * e.biases_stride + group_row, p.group_shift,
          p.global_scale};
}

template <class P>
__global__ void __launch_bounds__(kThreads) gemv_dp4a_experts_kernel(const Dp4aParams p, const Dp4aExperts e) {
  __shared__ float partial[kThreads / 32];
  allow_next_grid();
  wait_for_previous_grid();  // the expert ids and x are earlier kernels' (the rows to prefetch are not known before)
  const int64_t slot = e.first_slot + static_cast<int64_t>(blockIdx.y);
  const int k = static_cast<int>(blockIdx.z);  // the stack
  const int64_t rows_total = gemv_part_value(k, p.rows);
  const int lane = static_cast<int>(threadIdx.x) % e.lanes, warp = static_cast<int>(threadIdx.x >> 5);
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / e.lanes) + threadIdx.x / e.lanes;
  float* y = gemv_part_value(k, p.y) + slot * rows_total;
  const int expert = e.ids[slot];
  if (expert < 0 || expert >= e.experts) {  // not reportable from here: the slot's rows become NaN
    if (lane == 0 && row < rows_total) y[row] = __int_as_float(0x7fc00000);
    return;
  }
  const dp4a::RowRef rows[1] = {expert_row(p, e, k, expert, min(row, rows_total - 1))};  // past the end: not stored
  const int64_t x_row = e.shared_input ? slot / e.top_k : slot;
  float acc[1][1];
  accumulate_items<P, 1, 1>(rows, p.codes + x_row * p.x_blocks * kQ8BlockCodeBytes,
                            p.scales + x_row * p.x_blocks * kQ8BlockScaleFloats, p.x_blocks, p.items, acc, lane,
                            e.lanes);
  const float v = lanes_sum(acc[0][0], e.lanes);
  if (e.lanes < 32) {  // the row's lanes are part of a warp: v is its sum
    if (lane == 0 && row < rows_total) y[row] = v;
    return;
  }
  if ((threadIdx.x & 31) == 0) partial[warp] = v;
  __syncthreads();
  if (lane == 0 && row < rows_total) {  // the row's first warp sums its warps in order
    float sum = partial[warp];
    for (int w = 1; w < e.lanes / 32; ++w) sum += partial[warp + w];
    y[row] = sum;
  }
}

// Slots of one expert that a grouped pass multiplies: each item's weights are loaded once for this many slots.
constexpr int kGroupedSlots = 8;

// The x row of batch row i of a grouped pass: a slot's token (shared input) or the slot itself.
template <int M>
struct GatheredRows {
  int64_t row[M];
  __device__ __forceinline__ int64_t operator()(int i) const { return row[i]; }
};

// One pass of the grouped kernel over slots order[0 .. n) (1 <= n <= M) of the block's expert: M batch rows, the
// slots past n repeating the last one (computed, not stored). A slot's sum is the per-slot kernel's, term for term:
// the same lanes take the same items in the same order, then the same warp and block reductions.
template <class P, int M>
__device__ __forceinline__ void grouped_pass(const Dp4aParams& p, const Dp4aExperts& e,
                                             const dp4a::RowRef (&rows)[1], const int32_t* order, int n, int64_t row,
                                             float (*partial)[kGroupedSlots]) {
  const int lane = static_cast<int>(threadIdx.x) % e.lanes, warp = static_cast<int>(threadIdx.x >> 5);
  const int64_t rows_total = p.rows[0];
  GatheredRows<M> x_rows;
#pragma unroll
  for (int i = 0; i < M; ++i) {
    const int64_t slot = order[i < n ? i : n - 1];
    x_rows.row[i] = e.shared_input ? slot / e.top_k : slot;
  }
  float acc[1][M];
  accumulate_items<P, M, 1>(rows, p.codes, p.scales, p.x_blocks, p.items, acc, lane, e.lanes, x_rows);
  if (e.lanes < 32) {  // the row's lanes are part of a warp: their sums are the row's (no shared memory)
#pragma unroll
    for (int i = 0; i < M; ++i) {
      const float v = lanes_sum(acc[0][i], e.lanes);
      if (lane == 0 && row < rows_total && i < n) p.y[0][static_cast<int64_t>(order[i]) * rows_total + row] = v;
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < M; ++i) {
    const float v = lanes_sum(acc[0][i], e.lanes);
    if ((threadIdx.x & 31) == 0) partial[warp][i] = v;
  }
  __syncthreads();
  if (lane == 0 && row < rows_total) {  // the row's first warp sums its warps in order, as the per-slot kernel
    for (int i = 0; i < n; ++i) {
      float sum = partial[warp][i];
      for (int w = 1; w < e.lanes / 32; ++w) sum += partial[warp + w][i];
      p.y[0][static_cast<int64_t>(order[i]) * rows_total + row] = sum;
    }
  }
  __syncthreads();  // partial is reused by the next pass
}

// Several tokens' experts (expert_gemv_dp4a_grouped): grid.y is the experts, and a block's rows multiply every slot
// of its expert, kGroupedSlots at a time, so an expert's weights come from DRAM once per batch (later passes find
// them in L2) instead of once per slot, and the dot products of one weight load serve up to 8 slots. Rows and lanes
// as gemv_dp4a_experts_kernel.
template <class P>
__global__ void __launch_bounds__(kThreads) gemv_dp4a_grouped_experts_kernel(const Dp4aParams p,
                                                                              const Dp4aExperts e) {
  __shared__ float partial[kThreads / 32][kGroupedSlots];
  allow_next_grid();
  wait_for_previous_grid();
  const int expert = static_cast<int>(blockIdx.y);
  const int32_t begin = e.offsets[expert], end = e.offsets[expert + 1];
  if (begin == end) return;  // the whole block: an expert no slot chose
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kThreads / e.lanes) + threadIdx.x / e.lanes;
  const dp4a::RowRef rows[1] = {expert_row(p, e, 0, expert, min(row, p.rows[0] - 1))};  // past the end: not stored
  for (int32_t c = begin; c < end; c += kGroupedSlots) {
    const int n = min(end - c, kGroupedSlots);
    // A pass as wide as its slots (rounded up to a power of two): a lone slot costs what the per-slot kernel does.
    if (n == 1) {
      grouped_pass<P, 1>(p, e, rows, e.order + c, n, row, partial);
    } else if (n == 2) {
      grouped_pass<P, 2>(p, e, rows, e.order + c, n, row, partial);
    } else if (n <= 4) {
      grouped_pass<P, 4>(p, e, rows, e.order + c, n, row, partial);
    } else {
      grouped_pass<P, kGroupedSlots>(p, e, rows, e.order + c, n, row, partial);
    }
  }
}

// One launch's arguments (gemv_dp4a_parts checked them); rows_per_block 0: plan_part_grid's choice.
struct Dp4aLaunch {
  std::span<const GemvPart> parts;
  Q8ConstActivations x;
  int m;
  cudaStream_t stream;
  int rows_per_block;
  // Set: expert 0 of each stack (of one shape; the grouped kernel: one stack); `slots` slots from e.first_slot (m
  // unused, each slot has its x row), or with e.order the grouped kernel over e.experts experts (slots unused).
  const Dp4aExperts* experts = nullptr;
  int64_t slots = 0;
  // > 0: at most this many blocks, each looping over the plan's (gemv_dp4a_kernel); 0: one block per row group.
  int64_t max_blocks = 0;
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
  int scale_bytes = 0;
  if constexpr (requires { P::kScaleGroupCols; }) {  // a scale layout fixed by the format (OCP MXFP4)
    groups_per_row = w.cols / P::kScaleGroupCols;
    while ((1 << group_shift) < P::kScaleGroupCols) ++group_shift;
    scale_bytes = P::kScaleBytes;
  } else if (w.params.group_size > 0 && w.scales != nullptr) {  // AFQ: the tensor's group size and scale dtype
    groups_per_row = w.cols / w.params.group_size;
    while ((1 << group_shift) < w.params.group_size) ++group_shift;
    scale_bytes = quant::float_scale_bytes(w.params.scale_type);
  }
  const int items = static_cast<int>(blocks_per_row * P::kItemsPerBlock);
  const int lanes = row_lanes(items);
  Dp4aParams params{groups_per_row, scale_bytes, group_shift, blocks_per_row * P::kBlockBytes, items,
                    w.cols / kQ8BlockCols, x.codes, x.scales,
                    plan_part_grid(parts, kTallRows, l.rows_per_block), {}, {}, {}, {}, {}};
  params.global_scale = w.params.global_scale;
  params.lanes = lanes;
  for (size_t j = 0; j < parts.size(); ++j) {
    const quant::QuantView& v = parts[j].w;
    params.data[j] = v.data;
    params.w_scales[j] = v.scales;
    params.w_biases[j] = v.biases;
    params.rows[j] = v.rows;
    params.y[j] = parts[j].y;
  }
  if (l.experts != nullptr) {
    Dp4aExperts e = *l.experts;
    e.lanes = expert_row_lanes(params.items);
    const int64_t rows_per_block = kThreads / e.lanes;
    const unsigned row_blocks = static_cast<unsigned>((w.rows + rows_per_block - 1) / rows_per_block);
    if (e.order != nullptr)
      return launch_programmatic("gemv_dp4a_grouped_experts_kernel", gemv_dp4a_grouped_experts_kernel<P>,
                                 dim3(row_blocks, static_cast<unsigned>(e.experts)), kThreads, 0, stream, params, e);
    return launch_programmatic("gemv_dp4a_experts_kernel", gemv_dp4a_experts_kernel<P>,
                               dim3(row_blocks, static_cast<unsigned>(l.slots), static_cast<unsigned>(parts.size())),
                               kThreads, 0, stream, params, e);
  }
  const unsigned blocks = static_cast<unsigned>(
      l.max_blocks > 0 && l.max_blocks < params.grid.blocks ? l.max_blocks : params.grid.blocks);
  return with_batch(m, [&](auto batch) -> Status {
    constexpr int M = decltype(batch)::value;
    const auto launch = [&](auto kernel) {
      return launch_programmatic("gemv_dp4a_kernel", kernel, blocks, lanes, 0, stream, params);
    };
    if constexpr (M == 1) {
      if (blocks < params.grid.blocks) {  // max_blocks: the looping kernel
        if (params.grid.rows_per_block == 8) return launch(gemv_dp4a_looping_kernel<P, 8>);
        if (params.grid.rows_per_block == 4) return launch(gemv_dp4a_looping_kernel<P, 4>);
        if (params.grid.rows_per_block == 2) return launch(gemv_dp4a_looping_kernel<P, 2>);
        return launch(gemv_dp4a_looping_kernel<P, 1>);
      }
      if (params.grid.rows_per_block == 4) return launch(gemv_dp4a_kernel<P, 1, 4>);
      if (params.grid.rows_per_block == 8) return launch(gemv_dp4a_kernel<P, 1, 8>);
    }
    if (params.grid.rows_per_block == 2) return launch(gemv_dp4a_kernel<P, M, 2>);
    return launch(gemv_dp4a_kernel<P, M, 1>);
  });
}

// The per-family entry points (one translation unit each): the launch's status for the family's formats (gemv_dp4a
// checked gemv_dp4a_applies), nullopt for any other format.
std::optional<Status> launch_ggml(quant::FormatId format, const Dp4aLaunch& l);
std::optional<Status> launch_iq_grids(quant::FormatId format, const Dp4aLaunch& l);
std::optional<Status> launch_tables_and_afq(quant::FormatId format, const Dp4aLaunch& l);

}  // namespace qrt::kernels::dp4a_launch
