// A batch's expert projections on the int8 tensor cores (expert_gemv.hpp: expert_gemm_mma_grouped). Four launches:
//   1. group_expert_slots: the slots sorted by expert;
//   2. one block cuts each expert's list into chunks of up to 32 slots (24 for Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL and
//      both MXFP4s, 16 for Q2_K, Q3_K and Q6_K: the batch tiles one tensor-core block holds in registers) and writes
//      the chunk table {expert, first, count} and its length;
//   3. a warp per (chunk, 8-row batch tile, 32-column block) gathers the chunk's x rows (a slot's token, or the slot)
//      into the rearranged tile layout gemm_q8_mma reads (gemm_q8_mma.hpp);
//   4. a block per (32 weight rows, chunk) runs the dense GEMM's block (gemm_q8_mma_block.cuh) on its expert's
//      matrix and writes each output to its slot's row.
// The grids of 3 and 4 are sized for the most chunks a batch can have (slots / chunk + one per expert used),
// so a captured graph serves any routing; the blocks past the table's length return at once. Each expert's rows
// are read once per chunk, so once per batch for an expert with up to a chunk of slots.
#include <algorithm>
#include <climits>
#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemm_q8_mma_block.cuh"
#include "kernels/moe/expert_gemv.hpp"

namespace qrt::kernels {
namespace {

using mma_block::kBlockRows;
using mma_block::kMTiles;
using mma_block::kThreads;
using mma_block::kWarps;
using mma_block::launch_tiles;
using mma_block::MmaParams;
using mma_block::multiply_rows;

constexpr int kTileThreads = 128;  // 4 tiles per block, a warp each
constexpr int64_t kMaxGridY = 65535;

// The most batch tiles a chunk holds for a policy: the dense GEMM's per launch, but 3 for Q4_0 (and IQ4_NL, both
// MXFP4s, Q4_1, Q5_0 and Q5_1, whose raw words are as many or more), which spilled 68 bytes at 4 here (the per-chunk
// choice of the tile count keeps every instance live at once).
template <class P>
__host__ __device__ constexpr int chunk_tiles() {
  return std::is_base_of_v<mma_q8::Q4_0, P> || std::is_same_v<P, mma_q8::Mxfp4Ggml> ||
                 std::is_same_v<P, mma_q8::Mxfp4Ocp> || std::is_same_v<P, mma_q8::Q4_1> ||
                 std::is_same_v<P, mma_q8::Q5_0> || std::is_same_v<P, mma_q8::Q5_1>
             ? 3
             : launch_tiles<P>();
}
int chunk_tiles(quant::FormatId format) {
  return mma_q8::with_policy(format, [](auto policy) { return chunk_tiles<decltype(policy)>(); }, [] { return 0; });
}

struct Layout {
  uint64_t lists, chunks, tiles, total;
  int64_t max_chunks;
  int tiles_per_chunk;
  int64_t x_blocks;
};

Layout layout_for(quant::FormatId format, const ExpertGemvShape& s, int64_t cols) {
  Layout l{};
  const int64_t slots = s.tokens * s.top_k;
  l.tiles_per_chunk = chunk_tiles(format);
  const int64_t rows = int64_t{l.tiles_per_chunk} * kMmaTileRows;
  l.max_chunks = (slots + rows - 1) / rows + std::min<int64_t>(s.experts, slots);
  l.x_blocks = cols / kQ8BlockCols;
  const auto align = [](uint64_t n) { return (n + 255) / 256 * 256; };
  l.lists = 0;
  l.chunks = align(expert_gemv_grouped_workspace_bytes(s));
  l.tiles = l.chunks + align((static_cast<uint64_t>(l.max_chunks) * 3 + 1) * sizeof(int32_t));
  l.total = l.tiles + static_cast<uint64_t>(l.max_chunks) * l.tiles_per_chunk * l.x_blocks * kMmaTileBytes;
  return l;
}

// Chunk table: chunks[3c .. 3c + 2] = {expert, first index into order, slot count}, chunks[3 max_chunks] = the count.
__global__ void expert_chunks_kernel(const int32_t* __restrict__ offsets, int experts, int chunk_rows,
                                     int64_t max_chunks, int32_t* __restrict__ chunks) {
  allow_next_grid();
  wait_for_previous_grid();  // the offsets are group_slots_kernel's (programmatic_launch.cuh)
  if (threadIdx.x != 0) return;
  int64_t c = 0;
  for (int e = 0; e < experts; ++e) {
    for (int32_t first = offsets[e]; first < offsets[e + 1] && c < max_chunks; first += chunk_rows, ++c) {
      const int32_t left = offsets[e + 1] - first;
      chunks[3 * c] = e;
      chunks[3 * c + 1] = first;
      chunks[3 * c + 2] = left < chunk_rows ? left : chunk_rows;
    }
  }
  chunks[3 * max_chunks] = static_cast<int32_t>(c);
}

// Tile i = (chunk · tiles_per_chunk + nt) · x_blocks + kb: batch tile nt of the chunk's slots, 32-column block kb.
__global__ void __launch_bounds__(kTileThreads) gather_tiles_kernel(
    const int8_t* __restrict__ codes, const float* __restrict__ scales, const int32_t* __restrict__ chunks,
    int64_t max_chunks, const int32_t* __restrict__ order, int top_k, bool shared_input, int tiles_per_chunk,
    int64_t x_blocks, uint8_t* __restrict__ out) {
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (kTileThreads / 32) + threadIdx.x / 32;
  const int64_t chunk = i / (tiles_per_chunk * x_blocks);
  if (chunk >= chunks[3 * max_chunks]) return;
  const int64_t nt = (i / x_blocks) % tiles_per_chunk, kb = i % x_blocks;
  const int32_t first = chunks[3 * chunk + 1], count = chunks[3 * chunk + 2];
  const auto x_row = [&](int r) -> int64_t {
    const int64_t n = nt * kMmaTileRows + r;
    if (n >= count) return -1;  // past the chunk's slots: zeros
    const int64_t slot = order[first + n];
    return shared_input ? slot / top_k : slot;
  };
  mma_block::write_tile(codes, scales, x_blocks, kb, x_row, out + i * kMmaTileBytes);
}

// grid (row blocks, max_chunks). p: expert 0's matrix, p.tiles the first chunk's tiles; each chunk's NT follows
// its slot count.
template <class P>
__global__ void __launch_bounds__(kThreads) expert_gemm_mma_kernel(const MmaParams p, uint64_t expert_stride,
                                                                   uint64_t scale_stride, uint64_t bias_stride,
                                                                   const int32_t* __restrict__ chunks,
                                                                   int64_t max_chunks, uint64_t chunk_tile_bytes,
                                                                   const int32_t* __restrict__ order) {
  __shared__ float4 partial[kWarps][kMTiles][32];
  allow_next_grid();
  wait_for_previous_grid();  // the chunk table and the tiles (the expert, hence the rows, is known only after)
  const int64_t c = blockIdx.y;
  if (c >= chunks[3 * max_chunks]) return;  // the whole block: past the table
  const int32_t expert = chunks[3 * c], first = chunks[3 * c + 1], count = chunks[3 * c + 2];
  const uint8_t* data = p.data + static_cast<uint64_t>(expert) * expert_stride;
  const uint8_t* scales = p.scales == nullptr ? nullptr : p.scales + static_cast<uint64_t>(expert) * scale_stride;
  const uint8_t* biases = p.biases == nullptr ? nullptr : p.biases + static_cast<uint64_t>(expert) * bias_stride;
  const uint8_t* tiles = p.tiles + static_cast<uint64_t>(c) * chunk_tile_bytes;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const auto store = [&](int n, int64_t row, float v) {
    p.y[static_cast<int64_t>(order[first + n]) * p.rows + row] = v;
  };
  switch ((count + kMmaTileRows - 1) / kMmaTileRows) {
    case 1: multiply_rows<P, 1>(p, data, scales, biases, tiles, count, row0, partial, store); break;
    case 2: multiply_rows<P, 2>(p, data, scales, biases, tiles, count, row0, partial, store); break;
    case 3:
      if constexpr (chunk_tiles<P>() >= 3)
        multiply_rows<P, 3>(p, data, scales, biases, tiles, count, row0, partial, store);
      break;
    default:
      if constexpr (chunk_tiles<P>() >= 4)
        multiply_rows<P, 4>(p, data, scales, biases, tiles, count, row0, partial, store);
      break;
  }
}

template <class P>
Status launch_gemm(const quant::QuantView& w, const quant::PartSizes& per_expert, const Layout& l,
                   const uint8_t* base, const int32_t* order, float* y, cudaStream_t stream) {
  MmaParams p = mma_block::matrix_params<P>(w);
  p.tiles = base + l.tiles;
  p.y = y;
  const dim3 grid(static_cast<unsigned>((w.rows + kBlockRows - 1) / kBlockRows), static_cast<unsigned>(l.max_chunks));
  return launch_programmatic("expert_gemm_mma_kernel", expert_gemm_mma_kernel<P>, grid, kThreads, 0, stream, p,
                             per_expert.data, per_expert.scales, per_expert.biases,
                             reinterpret_cast<const int32_t*>(base + l.chunks),
                             l.max_chunks, static_cast<uint64_t>(l.tiles_per_chunk) * l.x_blocks * kMmaTileBytes,
                             order);
}

}  // namespace

bool expert_gemm_mma_applies(quant::FormatId format, const quant::QuantView& expert0,
                             const quant::PartSizes& per_expert, const ExpertGemvShape& s) {
  if (!gemm_q8_mma_applies(format, expert0) || per_expert.data % 16 != 0 || expert0.rows > INT_MAX) return false;
  if (s.tokens <= 0 || s.top_k <= 0 || s.experts <= 0 || s.experts > kGroupedMaxExperts) return false;
  if (s.tokens * s.top_k > INT32_MAX) return false;
  return layout_for(format, s, expert0.cols).max_chunks <= kMaxGridY;
}

uint64_t expert_gemm_mma_workspace_bytes(quant::FormatId format, const ExpertGemvShape& s, int64_t cols) {
  return layout_for(format, s, cols).total;
}

Status expert_gemm_mma_grouped(quant::FormatId format, const quant::QuantView& expert0,
                               const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& s,
                               Q8ConstActivations x, float* y, void* workspace, cudaStream_t stream) {
  const std::string name = "expert_gemm_mma_grouped " + std::string(quant::format_name(format));
  if (!expert_gemm_mma_applies(format, expert0, per_expert, s))
    return invalid_argument(name + ": no tensor-core kernel for experts of [" + std::to_string(expert0.rows) + ", " +
                            std::to_string(expert0.cols) + "] with " + std::to_string(s.tokens) + " tokens of " +
                            std::to_string(s.top_k) + " (check expert_gemm_mma_applies)");
  if (ids == nullptr || y == nullptr || x.codes == nullptr || x.scales == nullptr || workspace == nullptr)
    return invalid_argument(name + ": null ids, activations, output or workspace");
  const Layout l = layout_for(format, s, expert0.cols);
  auto* base = static_cast<uint8_t*>(workspace);
  ExpertSlotLists lists;
  QRT_TRY(group_expert_slots(ids, s, expert0.rows, y, base + l.lists, stream, &lists).with_context(name));
  auto* chunks = reinterpret_cast<int32_t*>(base + l.chunks);
  const int chunk_rows = l.tiles_per_chunk * kMmaTileRows;
  QRT_TRY(launch_programmatic("expert_chunks_kernel", expert_chunks_kernel, 1, 32, 0, stream, lists.offsets,
                              s.experts, chunk_rows, l.max_chunks, chunks));
  const int64_t tiles = l.max_chunks * l.tiles_per_chunk * l.x_blocks;
  const int64_t blocks = (tiles + kTileThreads / 32 - 1) / (kTileThreads / 32);
  if (blocks > INT_MAX) return unsupported(name + ": more activation tiles than one grid holds");
  QRT_TRY(launch_programmatic("gather_tiles_kernel", gather_tiles_kernel, static_cast<unsigned>(blocks), kTileThreads,
                              0, stream, x.codes, x.scales, chunks, l.max_chunks, lists.order, s.top_k,
                              s.shared_input, l.tiles_per_chunk, l.x_blocks, base + l.tiles));
  const auto run = [&](auto policy) {
    return launch_gemm<decltype(policy)>(expert0, per_expert, l, base, lists.order, y, stream);
  };
  return mma_q8::with_policy(format, run, [&] { return invalid_argument(name + ": no policy"); });
}

}  // namespace qrt::kernels
