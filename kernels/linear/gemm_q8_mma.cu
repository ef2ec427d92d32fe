// The int8 tensor-core GEMM (gemm_q8_mma.hpp): the kernels of its two block shapes and the activation rearrangement
// they read.
#include <climits>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemm_q8_mma_block.cuh"
#include "kernels/linear/gemm_q8_mma_tall.cuh"
#include "kernels/quant/formats.hpp"

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

// Tile i = nt · x_blocks + kb (batch tile nt, 32-column block kb) of batch rows 8 nt .. 8 nt + 7.
__global__ void __launch_bounds__(kTileThreads) q8_tiles_kernel(const int8_t* __restrict__ codes,
                                                                 const float* __restrict__ scales, int64_t m,
                                                                 int64_t x_blocks, int64_t tiles,
                                                                 uint8_t* __restrict__ out) {
  allow_next_grid();
  wait_for_previous_grid();  // x's quantization is an earlier kernel's (programmatic_launch.cuh)
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (kTileThreads / 32) + threadIdx.x / 32;
  if (i >= tiles) return;
  const int64_t nt = i / x_blocks, kb = i % x_blocks;
  const auto x_row = [&](int r) -> int64_t {
    const int64_t n = nt * kMmaTileRows + r;
    return n < m ? n : -1;  // rows past m: zeros
  };
  mma_block::write_tile(codes, scales, x_blocks, kb, x_row, out + i * kMmaTileBytes);
}

// NT batch tiles of 8 rows: y[n, row].
template <class P, int NT>
__global__ void __launch_bounds__(kThreads) gemm_q8_mma_kernel(const MmaParams p) {
  __shared__ float4 partial[kWarps][kMTiles][32];
  // The block's weight rows (no kernel's output) start into L2 before the wait for the tiles.
  allow_next_grid();
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  if (threadIdx.x == 0) {
    const int64_t held = p.rows - row0 < kBlockRows ? p.rows - row0 : kBlockRows;
    prefetch_to_l2(p.data + row0 * p.row_bytes, static_cast<uint64_t>(held * p.row_bytes));
  }
  wait_for_previous_grid();
  multiply_rows<P, NT>(p, p.data, p.scales, p.biases, p.tiles, p.m, row0, partial,
                       [&](int n, int64_t row, float v) { p.y[static_cast<int64_t>(n) * p.rows + row] = v; });
}

// Batches of kMmaTallMinBatch rows and more: blockIdx.x picks 64 batch rows, blockIdx.y 64 weight rows (so the batch
// blocks of a row block run side by side and share its bytes in L2).
template <class P>
__global__ void __launch_bounds__(mma_tall::kThreads, 2) gemm_q8_mma_tall_kernel(const MmaParams p) {
  extern __shared__ __align__(16) uint4 tall_shared[];
  allow_next_grid();
  wait_for_previous_grid();
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * mma_tall::kRows;
  const int64_t tile0 = static_cast<int64_t>(blockIdx.x) * mma_tall::kNTiles;
  const int64_t tiles = (p.m + kMmaTileRows - 1) / kMmaTileRows - tile0;
  const int here = tiles < mma_tall::kNTiles ? static_cast<int>(tiles) : mma_tall::kNTiles;
  mma_tall::multiply_tall<P>(p, row0, tile0, here, *reinterpret_cast<mma_tall::Shared*>(tall_shared),
                             [&](int n, int64_t row, float v) { p.y[static_cast<int64_t>(n) * p.rows + row] = v; });
}

// The row blocks of the tall kernel's grid (its y dimension), and whether they fit one.
int64_t tall_row_blocks(int64_t rows) { return (rows + mma_tall::kRows - 1) / mma_tall::kRows; }
constexpr int64_t kMaxGridY = 65535;

template <class P>
Status launch(const quant::QuantView& w, const void* tiles, int m, float* y, cudaStream_t stream) {
  const int64_t x_blocks = w.cols / kQ8BlockCols;
  if (m >= kMmaTallMinBatch && tall_row_blocks(w.rows) <= kMaxGridY) {
    MmaParams p = mma_block::matrix_params<P>(w);
    p.tiles = static_cast<const uint8_t*>(tiles);
    p.m = m;
    p.y = y;
    const dim3 grid(static_cast<unsigned>((m + mma_tall::kBatchRows - 1) / mma_tall::kBatchRows),
                    static_cast<unsigned>(tall_row_blocks(w.rows)));
    constexpr size_t kShared = sizeof(mma_tall::Shared);
    QRT_CUDA_TRY(cudaFuncSetAttribute(gemm_q8_mma_tall_kernel<P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(kShared)));
    return launch_programmatic("gemm_q8_mma_tall_kernel", gemm_q8_mma_tall_kernel<P>, grid, mma_tall::kThreads,
                               kShared, stream, p);
  }
  const unsigned blocks = static_cast<unsigned>((w.rows + kBlockRows - 1) / kBlockRows);
  constexpr int kRowsPerLaunch = launch_tiles<P>() * kMmaTileRows;
  for (int first = 0; first < m; first += kRowsPerLaunch) {
    const int rows_here = m - first < kRowsPerLaunch ? m - first : kRowsPerLaunch;
    MmaParams p = mma_block::matrix_params<P>(w);
    p.tiles = static_cast<const uint8_t*>(tiles) + first / kMmaTileRows * x_blocks * kMmaTileBytes;
    p.m = rows_here;
    p.y = y + static_cast<int64_t>(first) * w.rows;
    const auto run = [&](auto kernel) {
      return launch_programmatic("gemm_q8_mma_kernel", kernel, blocks, kThreads, 0, stream, p);
    };
    switch ((rows_here + kMmaTileRows - 1) / kMmaTileRows) {
      case 1: QRT_TRY(run(gemm_q8_mma_kernel<P, 1>)); break;
      case 2: QRT_TRY(run(gemm_q8_mma_kernel<P, 2>)); break;
      case 3:
        if constexpr (launch_tiles<P>() >= 3) QRT_TRY(run(gemm_q8_mma_kernel<P, 3>));
        break;
      default:
        if constexpr (launch_tiles<P>() >= 4) QRT_TRY(run(gemm_q8_mma_kernel<P, 4>));
        break;
    }
  }
  return ok_status();
}

// The policy's step width, 0 for a format without one.
int step_cols(quant::FormatId format) {
  return mma_q8::with_policy(format, [](auto policy) { return decltype(policy)::kStepCols; }, [] { return 0; });
}

}  // namespace

Status q8_to_mma_tiles(Q8ConstActivations x, int64_t m, int64_t cols, void* tiles, cudaStream_t stream) {
  if (m < 1 || m > kMmaMaxBatch || cols <= 0 || cols % kQ8BlockCols != 0)
    return invalid_argument("q8_to_mma_tiles: [" + std::to_string(m) + ", " + std::to_string(cols) +
                            "] needs 1 to " + std::to_string(kMmaMaxBatch) +
                            " rows and a positive column count that is a multiple of 32");
  if (x.codes == nullptr || x.scales == nullptr || tiles == nullptr)
    return invalid_argument("q8_to_mma_tiles: null pointer");
  const int64_t x_blocks = cols / kQ8BlockCols;
  const int64_t count = (m + kMmaTileRows - 1) / kMmaTileRows * x_blocks;
  const int64_t grid = (count + kTileThreads / 32 - 1) / (kTileThreads / 32);
  return launch_programmatic("q8_tiles_kernel", q8_tiles_kernel, static_cast<unsigned>(grid), kTileThreads, 0, stream,
                             x.codes, x.scales, m, x_blocks, count, static_cast<uint8_t*>(tiles));
}

bool gemm_q8_mma_applies(quant::FormatId format, const quant::QuantView& w) {
  const int step = step_cols(format);
  if (step == 0 || w.data == nullptr || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return false;
  if (w.rows <= 0 || w.cols <= 0 || w.cols % step != 0) return false;
  // Whole blocks of the format too: a grid i-quant's step is half of its 256-column super-block.
  const int block_cols = quant::format_info(format).block_elems;
  if (block_cols > 0 && w.cols % block_cols != 0) return false;
  if (quant::is_e2m1_stream(format) && w.scales == nullptr) return false;  // its scale bytes: present, any address
  if (quant::format_info(format).family == quant::Family::kAfq) {  // its scales and biases, groups of 2^k >= 32
    const int g = w.params.group_size;
    if (w.scales == nullptr || w.biases == nullptr || g < 32 || (g & (g - 1)) != 0 || w.cols % g != 0) return false;
    // Read one aligned element at a time (mma_q8::ldg_float_scale).
    const quant::ScalarType st = w.params.scale_type;
    if (st != quant::ScalarType::kF16 && st != quant::ScalarType::kBF16 && st != quant::ScalarType::kF32) return false;
    const uintptr_t align = static_cast<uintptr_t>(quant::float_scale_bytes(st));
    if (reinterpret_cast<uintptr_t>(w.scales) % align != 0 || reinterpret_cast<uintptr_t>(w.biases) % align != 0)
      return false;
  }
  return (w.rows + kBlockRows - 1) / kBlockRows < INT_MAX;
}

Status gemm_q8_mma(quant::FormatId format, const quant::QuantView& w, const void* tiles, int m, float* y,
                   cudaStream_t stream) {
  const std::string name = "gemm_q8_mma " + std::string(quant::format_name(format));
  if (!gemm_q8_mma_applies(format, w))
    return invalid_argument(name + ": no tensor-core kernel for [" + std::to_string(w.rows) + ", " +
                            std::to_string(w.cols) + "] at this alignment (check gemm_q8_mma_applies first)");
  if (m < 1 || m > kMmaMaxBatch)
    return invalid_argument(name + ": batch " + std::to_string(m) + " outside 1.." + std::to_string(kMmaMaxBatch));
  if (tiles == nullptr || y == nullptr) return invalid_argument(name + ": null activations or output");
  return mma_q8::with_policy(
      format, [&](auto policy) { return launch<decltype(policy)>(w, tiles, m, y, stream); },
      [&] { return invalid_argument(name + ": no policy"); });  // gemm_q8_mma_applies refused it above
}

}  // namespace qrt::kernels
