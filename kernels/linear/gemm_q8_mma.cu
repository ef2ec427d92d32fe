// The int8 tensor-core small-batch GEMM (gemm_q8_mma.hpp) and the activation rearrangement it reads.
#include <climits>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/kernel_utils.cuh"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemm_q8_mma_formats.cuh"
#include "kernels/linear/mma_int8.cuh"

namespace qrt::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kMTiles = 2;  // 16-row A tiles per block
constexpr int kBlockRows = 16 * kMTiles;
static_assert(kThreads == kMTiles * 32 * 4, "the reduction gives each thread one output of the block's tiles");

constexpr int kTileThreads = 128;  // 4 tiles per block, a warp each

// Tile i = nt · x_blocks + kb (batch tile nt, 32-column block kb). Lane 4g + t writes batch row 8 nt + g's hi codes
// of columns 4t .. 4t+3 and 16+4t .. 16+4t+3 at 8 (4g + t), the lo codes 256 bytes on, and lanes 0..7 the scales of
// rows 8 nt + lane; rows past m are zeros.
__global__ void __launch_bounds__(kTileThreads) q8_tiles_kernel(const int8_t* __restrict__ codes,
                                                                 const float* __restrict__ scales, int64_t m,
                                                                 int64_t x_blocks, int64_t tiles,
                                                                 uint8_t* __restrict__ out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * (kTileThreads / 32) + threadIdx.x / 32;
  if (i >= tiles) return;
  const int lane = static_cast<int>(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int64_t nt = i / x_blocks, kb = i % x_blocks;
  const int64_t n = nt * kMmaTileRows + g;
  uint2 hi = make_uint2(0u, 0u), lo = make_uint2(0u, 0u);
  if (n < m) {
    const auto* c = reinterpret_cast<const uint8_t*>(codes) + (n * x_blocks + kb) * kQ8BlockCodeBytes;
    hi = make_uint2(dp4a::ldg_u32(c + 4 * t), dp4a::ldg_u32(c + 16 + 4 * t));
    lo = make_uint2(dp4a::ldg_u32(c + 32 + 4 * t), dp4a::ldg_u32(c + 48 + 4 * t));
  }
  uint8_t* tile = out + i * kMmaTileBytes;
  reinterpret_cast<uint2*>(tile)[lane] = hi;
  reinterpret_cast<uint2*>(tile + 256)[lane] = lo;
  if (lane < kMmaTileRows) {
    const int64_t row = nt * kMmaTileRows + lane;
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < m) s = __ldg(reinterpret_cast<const float4*>(scales) + row * x_blocks + kb);
    reinterpret_cast<float4*>(tile + 512)[lane] = s;
  }
}

struct MmaParams {
  const uint8_t* data;
  int64_t rows;
  int64_t row_bytes;
  int64_t steps;     // per row
  int64_t x_blocks;  // 32-column blocks per row
  const uint8_t* tiles;
  int m;
  float* y;
};

// NT batch tiles of 8 rows (m <= 8 NT). Lane (g, t) owns rows g and g + 8 of each A tile and batch columns 2t, 2t + 1
// of each B tile (the C fragment's places).
template <class P, int NT>
__global__ void __launch_bounds__(kThreads) gemm_q8_mma_kernel(const MmaParams p) {
  __shared__ float4 partial[kWarps][kMTiles][32];
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kBlockRows;
  const uint8_t* rows[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = min(row0 + 16 * mt + 8 * h + g, p.rows - 1);  // past the end: a repeat, not stored
      rows[mt][h] = p.data + r * p.row_bytes;
    }

  float acc[kMTiles][NT][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;

#pragma unroll 1
  for (int64_t s = warp; s < p.steps; s += kWarps) {
    typename P::Raw raw[kMTiles][2];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) raw[mt][h] = P::load(rows[mt][h], s, t);
#pragma unroll
    for (int j = 0; j < P::kStepBlocks; ++j) {
      uint32_t a[kMTiles][4];
      float d[kMTiles][2], d16[kMTiles][2], mn[kMTiles][2];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          if constexpr (P::kHalfScales) {
            P::block(raw[mt][h], j, a[mt][h], a[mt][2 + h], d[mt][h], d16[mt][h], mn[mt][h]);
          } else {
            P::block(raw[mt][h], j, a[mt][h], a[mt][2 + h], d[mt][h], mn[mt][h]);
            d16[mt][h] = d[mt][h];
          }
        }
      const int64_t kb = s * P::kStepBlocks + j;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint8_t* tile = p.tiles + (nt * p.x_blocks + kb) * kMmaTileBytes;
        const uint2 hi = __ldg(reinterpret_cast<const uint2*>(tile) + lane);
        const uint2 lo = __ldg(reinterpret_cast<const uint2*>(tile + 256) + lane);
        const float4 sx[2] = {__ldg(reinterpret_cast<const float4*>(tile + 512) + 2 * t),
                              __ldg(reinterpret_cast<const float4*>(tile + 512) + 2 * t + 1)};
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          if constexpr (P::kHalfScales) {
            // Two products per limb, each over one half of the block's columns (the other half's codes zero).
            const uint32_t first[4] = {a[mt][0], a[mt][1], 0u, 0u}, second[4] = {0u, 0u, a[mt][2], a[mt][3]};
            int c_hi[4] = {0, 0, 0, 0}, c_lo[4] = {0, 0, 0, 0}, c_hi16[4] = {0, 0, 0, 0}, c_lo16[4] = {0, 0, 0, 0};
            mma_s8_16832(c_hi, first, hi.x, hi.y);
            mma_s8_16832(c_lo, first, lo.x, lo.y);
            mma_s8_16832(c_hi16, second, hi.x, hi.y);
            mma_s8_16832(c_lo16, second, lo.x, lo.y);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float4& x = sx[e & 1];
              const float dot = fmaf(x.x, static_cast<float>(c_hi[e]), x.y * static_cast<float>(c_lo[e]));
              const float dot16 = fmaf(x.x, static_cast<float>(c_hi16[e]), x.y * static_cast<float>(c_lo16[e]));
              acc[mt][nt][e] += fmaf(d[mt][e >> 1], dot, fmaf(d16[mt][e >> 1], dot16, -mn[mt][e >> 1] * x.z));
            }
          } else {
            int c_hi[4] = {0, 0, 0, 0}, c_lo[4] = {0, 0, 0, 0};
            mma_s8_16832(c_hi, a[mt], hi.x, hi.y);
            mma_s8_16832(c_lo, a[mt], lo.x, lo.y);
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const float4& x = sx[e & 1];
              const float dot = fmaf(x.x, static_cast<float>(c_hi[e]), x.y * static_cast<float>(c_lo[e]));
              acc[mt][nt][e] += fmaf(d[mt][e >> 1], dot, -mn[mt][e >> 1] * x.z);
            }
          }
        }
      }
    }
  }

  // The warps' partial sums in warp order (the same order on every run), one output per thread and batch tile.
  const int mt_out = static_cast<int>(threadIdx.x) >> 7, lane_out = (static_cast<int>(threadIdx.x) >> 2) & 31;
  const int e_out = static_cast<int>(threadIdx.x) & 3;
  const int64_t row = row0 + 16 * mt_out + (lane_out >> 2) + 8 * (e_out >> 1);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
      partial[warp][mt][lane] = make_float4(acc[mt][nt][0], acc[mt][nt][1], acc[mt][nt][2], acc[mt][nt][3]);
    __syncthreads();
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float4 v = partial[w][mt_out][lane_out];
      sum += e_out == 0 ? v.x : (e_out == 1 ? v.y : (e_out == 2 ? v.z : v.w));
    }
    const int n = nt * kMmaTileRows + 2 * (lane_out & 3) + (e_out & 1);
    if (row < p.rows && n < p.m) p.y[static_cast<int64_t>(n) * p.rows + row] = sum;
    __syncthreads();
  }
}

// At most 4 batch tiles per launch (32 batch rows): above that the accumulators and the hoisted activation loads
// outgrow the registers (ptxas spilled at 5–8 tiles), so m = 33..64 runs as two launches, reading W twice. Q6_K, with
// its larger raw bytes and twice the products, spills from 3 tiles: 2 per launch.
template <class P>
constexpr int launch_tiles() {
  return P::kHalfScales ? 2 : 4;
}

template <class P>
Status launch(const quant::QuantView& w, const void* tiles, int m, float* y, cudaStream_t stream) {
  const int64_t x_blocks = w.cols / kQ8BlockCols;
  const unsigned blocks = static_cast<unsigned>((w.rows + kBlockRows - 1) / kBlockRows);
  constexpr int kRowsPerLaunch = launch_tiles<P>() * kMmaTileRows;
  for (int first = 0; first < m; first += kRowsPerLaunch) {
    const int rows_here = m - first < kRowsPerLaunch ? m - first : kRowsPerLaunch;
    const MmaParams p{w.data, w.rows, w.cols / P::kStepCols * P::kStepBytes, w.cols / P::kStepCols, x_blocks,
                      static_cast<const uint8_t*>(tiles) + first / kMmaTileRows * x_blocks * kMmaTileBytes, rows_here,
                      y + static_cast<int64_t>(first) * w.rows};
    switch ((rows_here + kMmaTileRows - 1) / kMmaTileRows) {
      case 1: gemm_q8_mma_kernel<P, 1><<<blocks, kThreads, 0, stream>>>(p); break;
      case 2: gemm_q8_mma_kernel<P, 2><<<blocks, kThreads, 0, stream>>>(p); break;
      case 3:
        if constexpr (launch_tiles<P>() >= 3) gemm_q8_mma_kernel<P, 3><<<blocks, kThreads, 0, stream>>>(p);
        break;
      default:
        if constexpr (launch_tiles<P>() >= 4) gemm_q8_mma_kernel<P, 4><<<blocks, kThreads, 0, stream>>>(p);
        break;
    }
    QRT_TRY(cuda_launch_status("gemm_q8_mma_kernel"));
  }
  return ok_status();
}

// The policy's step width, 0 for a format without one.
int step_cols(quant::FormatId format) {
  switch (format) {
    case quant::FormatId::kQ4_0: return mma_q8::Q4_0::kStepCols;
    case quant::FormatId::kQ8_0: return mma_q8::Q8_0::kStepCols;
    case quant::FormatId::kQ4_K: return mma_q8::Q4K::kStepCols;
    case quant::FormatId::kQ5_K: return mma_q8::Q5K::kStepCols;
    case quant::FormatId::kQ6_K: return mma_q8::Q6K::kStepCols;
    default: return 0;
  }
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
  q8_tiles_kernel<<<static_cast<unsigned>(grid), kTileThreads, 0, stream>>>(x.codes, x.scales, m, x_blocks, count,
                                                                             static_cast<uint8_t*>(tiles));
  return cuda_launch_status("q8_tiles_kernel");
}

bool gemm_q8_mma_applies(quant::FormatId format, const quant::QuantView& w) {
  const int step = step_cols(format);
  if (step == 0 || w.data == nullptr || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return false;
  if (w.rows <= 0 || w.cols <= 0 || w.cols % step != 0) return false;
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
  switch (format) {
    case quant::FormatId::kQ4_0: return launch<mma_q8::Q4_0>(w, tiles, m, y, stream);
    case quant::FormatId::kQ8_0: return launch<mma_q8::Q8_0>(w, tiles, m, y, stream);
    case quant::FormatId::kQ4_K: return launch<mma_q8::Q4K>(w, tiles, m, y, stream);
    case quant::FormatId::kQ5_K: return launch<mma_q8::Q5K>(w, tiles, m, y, stream);
    default: return launch<mma_q8::Q6K>(w, tiles, m, y, stream);  // gemm_q8_mma_applies left only Q6_K
  }
}

}  // namespace qrt::kernels
