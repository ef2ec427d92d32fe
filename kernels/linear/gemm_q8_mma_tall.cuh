// The int8 tensor-core GEMM's block for batches of kMmaTallMinBatch rows and more (gemm_q8_mma.hpp): 64 weight rows ×
// 64 batch rows, with W decoded once per block into shared memory and shared by all eight warps.
//
// Why: the small-batch block (gemm_q8_mma_block.cuh) decodes each weight in the warp that multiplies it, for at most
// 4 batch tiles per launch, so a batch of 256 decodes every weight 8 times and launches 8 grids; its K split across
// the warps also needs an 8-way reduction per output. Here a block owns 64 rows × 64 batch rows:
//   - decode: warp w takes rows 16 (w / 2) + 8 (w % 2) + g of the block, reads its bytes of a round of 256 columns
//     (one or more of the policy's steps) and writes each 32-column block's A-fragment words and scales to shared
//     memory, so each weight is decoded once per 64 batch rows instead of once per 32;
//   - multiply: warp w owns A tiles 2 (w % 2) and 2 (w % 2) + 1 and batch tiles 2 (w / 2) and 2 (w / 2) + 1 over the
//     whole width, so the sums need no reduction and are taken in one fixed order (results repeat bit for bit);
//   - the activation tiles of a round (8 batch tiles × 8 blocks of 640 bytes, 40 KB) are copied into shared memory
//     with cp.async a round ahead, into two buffers. Loaded from global memory inside the round, as at first, each
//     of a warp's 16 tile loads per round waited out its L2 latency with only two warps per scheduler to cover it:
//     on an H100 a 4096 x 4096 Q4_K matrix took 90 us at 128 rows, about 10,000 cycles per round;
//   - a round's weight bytes are loaded into registers before the products of the round before and decoded into the
//     one weight buffer after them (24 KB), between two barriers. 104 KB per block: two blocks per SM.
// Per 32-column block a warp issues 8 mma (16 for the formats scaled per 16 columns), 6 shared loads of weights and
// 8 of activation tiles; the grid runs the batch blocks of one row block next to each other (blockIdx.x), so W is
// read from DRAM about once.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/linear/gemm_q8_mma_block.cuh"

namespace qrt::kernels::mma_tall {

using mma_block::BTile;
using mma_block::MmaParams;
using mma_block::TileScales;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kMTiles = 4;                         // 16-row A tiles per block
constexpr int kRows = 16 * kMTiles;                // weight rows per block
constexpr int kNTiles = 8;                         // 8-row batch tiles per block
constexpr int kBatchRows = kMmaTileRows * kNTiles;  // batch rows per block
constexpr int kRoundBlocks = 8;                    // 32-column blocks decoded per round
static_assert(kWarps == 2 * kMTiles, "a warp decodes one 8-row half of an A tile");
static_assert(kWarps * 4 == kMTiles * kNTiles, "a warp multiplies 2 A tiles by 2 batch tiles");

// One round of decoded weights: per block, the A fragments of each 16-row tile (lane l's four words, mma_int8.cuh)
// and each row's scales {d, d16, m, m16}.
struct Round {
  uint4 a[kRoundBlocks][kMTiles][32];
  float4 s[kRoundBlocks][kRows];
};

// One round of activation tiles: per batch tile of the block, its blocks of the round, contiguous as in p.tiles.
struct RoundX {
  uint8_t tiles[kNTiles][kRoundBlocks * kMmaTileBytes];
};
// The block's dynamic shared memory.
struct Shared {
  Round a;
  RoundX x[2];
};
static_assert(sizeof(Shared) == 106496, "104 KB: two blocks per SM in the 228 KB of a Hopper SM");

// mma_block::load_b_tile's fragment from a tile in shared memory.
__device__ __forceinline__ BTile load_b_tile_shared(const uint8_t* tile, int lane, int t) {
  return {reinterpret_cast<const uint2*>(tile)[lane], reinterpret_cast<const uint2*>(tile + 256)[lane],
          {reinterpret_cast<const float4*>(tile + 512)[2 * t], reinterpret_cast<const float4*>(tile + 512)[2 * t + 1]}};
}

// The policy's steps per round.
template <class P>
__host__ __device__ constexpr int round_steps() {
  static_assert(kRoundBlocks % P::kStepBlocks == 0, "a round is a whole number of steps");
  return kRoundBlocks / P::kStepBlocks;
}

// Rows row0 .. row0 + 63 of p's matrix times batch tiles tile0 .. tile0 + tiles - 1 (1 <= tiles <= kNTiles) of
// p.tiles; store(n, row, sum) gets each output of a row < p.rows and a batch row n < p.m. `sh` is the kernel's
// dynamic shared memory.
template <class P, class Store>
__device__ __forceinline__ void multiply_tall(const MmaParams& p, int64_t row0, int64_t tile0, int tiles, Shared& sh,
                                              const Store& store) {
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3;
  constexpr int kSteps = round_steps<P>();
  const int64_t round_count = (p.steps + kSteps - 1) / kSteps;

  // Decoding: this warp's 8-row half of an A tile; rows past the matrix repeat its last (their outputs are not
  // stored).
  const int dec_mt = warp >> 1, dec_h = warp & 1;
  const int64_t dec_row = min(row0 + 16 * dec_mt + 8 * dec_h + g, p.rows - 1);
  const uint8_t* row = p.data + dec_row * p.row_bytes;
  const uint8_t* scale_row = mma_block::separate_scales<P>() ? p.scales + dec_row * p.scale_row_bytes : nullptr;
  const uint8_t* bias_row = mma_block::affine_groups<P>() ? p.biases + dec_row * p.scale_row_bytes : nullptr;
  typename P::Raw raw[kSteps];
  const auto load_round = [&](int64_t r) {
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      const int64_t s = r * kSteps + i;
      if (s < p.steps)
        raw[i] = mma_block::load_step<P>(row, scale_row, bias_row, p.group_shift, p.scale_type, s, t);
    }
  };
  const auto store_block = [&](int i, int j, Round& out) {
    uint32_t k0, k16;
    float d, d16, m, m16;
    mma_block::block_halves<P>(raw[i], j, k0, k16, d, d16, m, m16);
    const int b = i * P::kStepBlocks + j;
    uint32_t* words = reinterpret_cast<uint32_t*>(&out.a[b][dec_mt][lane]);
    words[dec_h] = k0;  // a[0] / a[1]: row g / g + 8, columns 4t ..
    words[2 + dec_h] = k16;
    if (t == 0) out.s[b][16 * dec_mt + 8 * dec_h + g] = make_float4(d, d16, m, m16);
  };
  const auto store_round = [&](int64_t r, Round& out) {
#pragma unroll
    for (int i = 0; i < kSteps; ++i) {
      if (r * kSteps + i >= p.steps) break;
      if constexpr (mma_block::decodes_per_block<P>()) {  // one block's decoded values live at a time
#pragma unroll 1
        for (int j = 0; j < P::kStepBlocks; ++j) store_block(i, j, out);
      } else {
#pragma unroll
        for (int j = 0; j < P::kStepBlocks; ++j) store_block(i, j, out);
      }
    }
  };

  // Multiplying: A tiles 2 mg, 2 mg + 1 by batch tiles 2 ng, 2 ng + 1 (those below `tiles`).
  const int mg = warp & 1, ng = warp >> 1;
  float acc[2][2][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 2; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.0f;
  // Round r's blocks of the block's batch tiles into `out`, 16 bytes per copy, in flight until cp_async_wait.
  const auto stage_x = [&](int64_t r, RoundX& out) {
    const int64_t left = (p.steps - r * kSteps) * P::kStepBlocks;
    const int blocks = left < kRoundBlocks ? static_cast<int>(left) : kRoundBlocks;
    const int pieces_per_tile = blocks * (kMmaTileBytes / 16);
    const uint8_t* first = p.tiles + (tile0 * p.x_blocks + r * kRoundBlocks) * kMmaTileBytes;
    for (int i = static_cast<int>(threadIdx.x); i < tiles * pieces_per_tile; i += kThreads) {
      const int n = i / pieces_per_tile, piece = i - n * pieces_per_tile;
      cp_async_16(out.tiles[n] + 16 * piece, first + n * p.x_blocks * kMmaTileBytes + 16 * piece);
    }
    cp_async_commit();
  };
  // Unrolled, so that the shared offsets of each block are constants; a short last round stops early (the same for
  // every warp).
  const auto multiply_round = [&](int64_t r, const Round& in, const RoundX& in_x) {
    const int64_t left = (p.steps - r * kSteps) * P::kStepBlocks;
#pragma unroll
    for (int b = 0; b < kRoundBlocks; ++b) {
      if (b >= left) break;
      uint32_t a[2][4];
      TileScales sc[2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi) {
        const int mt = 2 * mg + mi;
        const uint4 words = in.a[b][mt][lane];
        a[mi][0] = words.x;
        a[mi][1] = words.y;
        a[mi][2] = words.z;
        a[mi][3] = words.w;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float4 v = in.s[b][16 * mt + 8 * h + g];
          sc[mi].d[h] = v.x;
          sc[mi].d16[h] = v.y;
          sc[mi].m[h] = v.z;
          sc[mi].m16[h] = v.w;
        }
      }
#pragma unroll
      for (int ni = 0; ni < 2; ++ni) {
        if (2 * ng + ni >= tiles) break;  // the same for the whole warp
        const BTile x = load_b_tile_shared(in_x.tiles[2 * ng + ni] + b * kMmaTileBytes, lane, t);
#pragma unroll
        for (int mi = 0; mi < 2; ++mi) mma_block::multiply_tile<P>(acc[mi][ni], a[mi], sc[mi], x);
      }
    }
  };

  // While round r is multiplied, round r + 1's activation tiles are in flight into the other buffer (which the
  // barrier closing round r - 1 freed) and its weight bytes in registers; once every warp is done with the weight
  // buffer they are decoded into it, and the second barrier makes both visible.
  stage_x(0, sh.x[0]);
  load_round(0);
  store_round(0, sh.a);
  cp_async_wait<0>();
  __syncthreads();
#pragma unroll 1
  for (int64_t r = 0; r < round_count; ++r) {
    const bool next = r + 1 < round_count;
    if (next) {
      stage_x(r + 1, sh.x[(r + 1) & 1]);
      load_round(r + 1);
    }
    multiply_round(r, sh.a, sh.x[r & 1]);
    if (next) {
      __syncthreads();
      store_round(r + 1, sh.a);
      cp_async_wait<0>();
      __syncthreads();
    }
  }

#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 2; ++ni)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int64_t out_row = row0 + 16 * (2 * mg + mi) + g + 8 * (e >> 1);
        const int64_t n = (tile0 + 2 * ng + ni) * kMmaTileRows + 2 * t + (e & 1);
        float sum = acc[mi][ni][e];
        if constexpr (mma_block::global_scale<P>()) sum *= p.global_scale;
        if (out_row < p.rows && n < p.m) store(static_cast<int>(n), out_row, sum);
      }
}

}  // namespace qrt::kernels::mma_tall
