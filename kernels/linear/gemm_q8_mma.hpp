// Small-batch GEMM on the int8 tensor cores: y[m, rows] = x[m, cols] · Wᵀ for 1 <= m <= 256 with x quantized to two
// int8 limbs per 32 columns (q8_activations.hpp) and W in Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
// IQ4_NL, IQ4_XS, the grid i-quants (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S), TQ1_0, TQ2_0, MXFP4 (GGML's
// blocks or OCP's nibble stream with separate scale bytes), NVFP4 or AFQ2..AFQ8 (scales and biases per group in
// separate arrays), each 32-column block of W taken as int8 codes (IQ4_NL's, IQ4_XS's and MXFP4's: table levels; the
// grid i-quants': signed grid magnitudes) times a float scale (one per 16 columns for Q2_K, Q3_K, Q6_K, NVFP4, IQ2_XS,
// IQ2_S and IQ1_M) minus a minimum times Σx (Q4_1, Q5_1, Q4_K, Q5_K, AFQ's bias; Q2_K one per 16 columns against each
// half's Σx), as the CPU reference defines them.
//
// Why: the integer-dot GEMV (gemv_dp4a.hpp) multiplies every weight once per batch row, so at 8 rows it runs about
// 5x longer than at one (measured on an H200: 212 µs against 43 µs for the 8B gate/up), and above 8 rows the
// backend dequantizes every weight to fp16 for cuBLAS on each decode step. Here one mma.sync m16n8k32 multiplies 16
// weight rows by 8 batch rows over a 32-column block (mma_int8.cuh): the weights are read once from DRAM whatever m,
// the multiplications cost a few instructions per 4096 products, and decode batches of 2..64 sequences (continuous
// batching) stay bound by the weight bytes. Up to 256 rows (wide batches, short prompts) it may still beat
// dequantizing every weight to fp16 for cuBLAS (2 bytes per weight written and read again on top of the packed
// ones); launch tuning measures which per shape.
//
// Activations are first rearranged (q8_to_mma_tiles) into the B fragments' order: for each 8-row batch tile and
// 32-column block, 640 bytes = the 32 lanes' 8 bytes of hi codes, the same of lo codes, then the 8 rows' scale
// quadruples {d_hi, d_lo, Σx, Σx of columns 0..15}; rows past m are zeros. A warp then reads each fragment as one
// contiguous 256-byte load instead of 8 scattered rows.
//
// Work split: a block of 8 warps owns 32 weight rows (two 16-row m16 tiles; the A fragments of rows g and g + 8 are
// one row's bytes each, loaded once per step); warp w takes the row's 256-column steps w, w + 8, ... (K split
// inside the block, so a 4096-row matrix still spreads over 128 blocks), every batch tile in turn; the eight warps'
// float sums meet in shared memory in a fixed order, so results repeat bit for bit. A launch takes up to 4 batch tiles
// (launch_tiles: 32 rows; 16 or 24 for some formats), so larger batches run as several launches; after the first,
// a matrix that fits the L2 cache (50 MB on an H100) is read from there. From kMmaTallMinBatch rows one launch of
// a second block shape (gemm_q8_mma_tall.cuh) takes the whole batch instead: 64 weight rows decoded once into shared
// memory for 64 batch rows, each warp summing its outputs over the whole width.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/q8_activations.hpp"
#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

constexpr int kMmaMaxBatch = 256;
constexpr int kMmaTileRows = 8;  // batch rows per B fragment
constexpr int kMmaTileBytes = 640;
// The smallest batch taken by the shared-memory block; below it the small-batch one, a launch per 4 batch tiles. On an
// H100 (f6adc08) a 4096 x 4096 Q4_K matrix took 94 us at 64 rows in the shared-memory block (64 blocks: half the SMs
// idle) against 18 us per 32 rows in the small one, so it starts where launch tuning times it (128 rows, its
// bucket for 65 and more) and is kept only where that timing finds it faster.
constexpr int kMmaTallMinBatch = 65;

// Device bytes of the rearranged activations for m rows of cols columns (cols a multiple of 32).
inline uint64_t q8_mma_tile_bytes(int64_t m, int64_t cols) {
  const uint64_t tiles = static_cast<uint64_t>((m + kMmaTileRows - 1) / kMmaTileRows);
  return tiles * static_cast<uint64_t>(cols / kQ8BlockCols) * kMmaTileBytes;
}

// x's q8 activations (m rows of cols columns) into the fragment order above, at `tiles` (16-byte aligned,
// q8_mma_tile_bytes(m, cols) long).
Status q8_to_mma_tiles(Q8ConstActivations x, int64_t m, int64_t cols, void* tiles, cudaStream_t stream);

// Whether gemm_q8_mma handles this format and W (a policy for the format; W's data 16-byte aligned; cols a whole
// number of the policy's steps).
bool gemm_q8_mma_applies(quant::FormatId format, const quant::QuantView& w);

// y [m, w.rows] = x · Wᵀ from the rearranged activations.
Status gemm_q8_mma(quant::FormatId format, const quant::QuantView& w, const void* tiles, int m, float* y,
                   cudaStream_t stream);

}  // namespace qrt::kernels
