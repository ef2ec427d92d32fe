// The block of the int8 tensor-core GEMM (gemm_q8_mma.hpp): 32 weight rows times up to 4 batch tiles of 8 rows, its
// output written through the caller's store, so that the dense GEMM (gemm_q8_mma.cu, row n of y) and the grouped
// experts (kernels/moe/expert_gemm_mma.cu, the slot of chunk row n) share every product and reduction.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemm_q8_mma_formats.cuh"
#include "kernels/linear/mma_int8.cuh"

namespace qrt::kernels::mma_block {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kMTiles = 2;  // 16-row A tiles per block
constexpr int kBlockRows = 16 * kMTiles;
static_assert(kThreads == kMTiles * 32 * 4, "the reduction gives each thread one output of the block's tiles");

struct MmaParams {
  const uint8_t* data;
  int64_t rows;
  int64_t row_bytes;
  int64_t steps;     // per row
  int64_t x_blocks;  // 32-column blocks per row
  const uint8_t* tiles;
  int m;
  float* y;
  // Formats with a separate scale array (kSeparateScales): the matrix's (expert 0's) and its bytes per row.
  const uint8_t* scales = nullptr;
  int64_t scale_row_bytes = 0;
  float global_scale = 1.0f;  // kGlobalScale formats (NVFP4): the tensor's, applied to each output
  // kAffineGroups formats (AFQ): the bias array (laid out as the scales), log2 of the group size, the arrays' dtype.
  const uint8_t* biases = nullptr;
  int group_shift = 0;
  quant::ScalarType scale_type = quant::ScalarType::kF32;
};


// Whether policy P reads a scale array apart from its rows.
template <class P>
__host__ __device__ constexpr bool separate_scales() {
  if constexpr (requires { P::kSeparateScales; }) {
    return P::kSeparateScales;
  } else {
    return false;
  }
}

// Whether policy P's outputs are multiplied by the tensor's global scale (NVFP4).
template <class P>
__host__ __device__ constexpr bool global_scale() {
  if constexpr (requires { P::kGlobalScale; }) {
    return P::kGlobalScale;
  } else {
    return false;
  }
}

// Whether policy P has a scale and a bias per group of the tensor's group size in two separate arrays (AFQ).
template <class P>
__host__ __device__ constexpr bool affine_groups() {
  if constexpr (requires { P::kAffineGroups; }) {
    return P::kAffineGroups;
  } else {
    return false;
  }
}

// Bytes of P's separate scale array (and bias array) per row of w (0 for a format without one).
template <class P>
int64_t scale_row_bytes(const quant::QuantView& w) {
  if constexpr (affine_groups<P>()) {
    return w.cols / w.params.group_size * quant::float_scale_bytes(w.params.scale_type);
  } else if constexpr (separate_scales<P>()) {
    return w.cols / P::kScaleGroupCols;
  } else {
    return 0;
  }
}

// log2 of w's group size (kAffineGroups policies; 0 for the others).
template <class P>
int group_shift(const quant::QuantView& w) {
  int shift = 0;
  if constexpr (affine_groups<P>()) {
    while ((1 << shift) < w.params.group_size) ++shift;
  }
  return shift;
}

// P's parameters of matrix w (expert 0's for a stack) with x_blocks 32-column blocks per row; the caller sets tiles,
// m and y.
template <class P>
MmaParams matrix_params(const quant::QuantView& w) {
  MmaParams p{w.data, w.rows, w.cols / P::kStepCols * P::kStepBytes, w.cols / P::kStepCols, w.cols / kQ8BlockCols,
              nullptr, 0, nullptr};
  p.scales = w.scales;
  p.scale_row_bytes = scale_row_bytes<P>(w);
  p.global_scale = w.params.global_scale;
  p.biases = w.biases;
  p.group_shift = group_shift<P>(w);
  p.scale_type = w.params.scale_type;
  return p;
}

// Whether policy P has a minimum per 16 columns (Q2_K): block() then gives m for columns 0..15 and m16 for 16..31,
// taken against the activations' Σx of each half (the tile's fourth scale float holds columns 0..15's).
template <class P>
__host__ __device__ constexpr bool half_mins() {
  if constexpr (requires { P::kHalfMins; }) {
    return P::kHalfMins;
  } else {
    return false;
  }
}

// Whether policy P's blocks can have a minimum (m, m16 not always 0): the policies whose block() sets m = 0 say
// kMins = false, so that the products skip the multiply by Σx (a runtime 0 · Σx cannot be folded away: Σx may be
// infinite).
template <class P>
__host__ __device__ constexpr bool has_mins() {
  if constexpr (requires { P::kMins; }) {
    return P::kMins;
  } else {
    return true;
  }
}

// A product's two limbs (mma_int8.cuh's exact int32 sums of hi and lo codes) as one float in units of d_lo:
// d_hi · hi + d_lo · lo = d_lo · (254 · hi + lo), since d_hi = 254 · d_lo (q8_activations.hpp; d_lo is that quotient
// rounded, a relative 6e-8 apart). One conversion instead of two: integer-to-float conversions run at an eighth of the
// float rate (16 per clock and SM against 128), and at two per element they set the pace of the products (eight per
// pair of mma). Exact as an int32: a block's dots are at most 32 · 128 · 127 in magnitude, 254 times that < 2^31.
__device__ __forceinline__ float limb_sum(int c_hi, int c_lo) {
  return static_cast<float>(dp4a::limbs_int(c_hi, c_lo));
}

// Whether policy P decodes its codes in block() from little state kept by load() (the grid i-quants): the kernel
// then loops over a step's blocks instead of unrolling them, so that one block's decoded values are live at a time.
template <class P>
__host__ __device__ constexpr bool decodes_per_block() {
  if constexpr (requires { P::kDecodePerBlock; }) {
    return P::kDecodePerBlock;
  } else {
    return false;
  }
}

// A lane's raw bytes of step s of a row (and of the row's separate scale bytes, and bias bytes, for the formats
// that have them; shift and type: MmaParams::group_shift and scale_type).
template <class P>
__device__ __forceinline__ typename P::Raw load_step(const uint8_t* row, const uint8_t* scale_row,
                                                     const uint8_t* bias_row, int shift, quant::ScalarType type,
                                                     int64_t s, int t) {
  if constexpr (affine_groups<P>()) {
    return P::load(row, mma_q8::GroupScales{scale_row, bias_row, shift, type}, s, t);
  } else if constexpr (separate_scales<P>()) {
    return P::load(row, scale_row, s, t);
  } else {
    return P::load(row, s, t);
  }
}

// Block j of a lane's raw step in one form for every policy: the code words of columns 4t.. (k0) and 16 + 4t..
// (k16), their scales d and d16 and minimums m and m16 (each pair equal where the format has one per block).
template <class P>
__device__ __forceinline__ void block_halves(const typename P::Raw& raw, int j, uint32_t& k0, uint32_t& k16, float& d,
                                             float& d16, float& m, float& m16) {
  if constexpr (half_mins<P>()) {
    P::block(raw, j, k0, k16, d, d16, m, m16);
  } else if constexpr (P::kHalfScales) {
    P::block(raw, j, k0, k16, d, d16, m);
    m16 = m;
  } else {
    P::block(raw, j, k0, k16, d, m);
    d16 = d;
    m16 = m;
  }
}

// One block's scales of an A tile's two rows (g: [0], g + 8: [1]): d for columns 0..15, d16 for 16..31, the
// minimums m and m16 likewise (each pair equal where the format has one per block).
struct TileScales {
  float d[2], d16[2], m[2], m16[2];
};

// A lane's share of one B tile (write_tile's layout): its hi and lo code words and the scale quadruples of batch rows
// 2t and 2t + 1 (the C fragment's columns).
struct BTile {
  uint2 hi, lo;
  float4 sx[2];
};

__device__ __forceinline__ BTile load_b_tile(const uint8_t* tile, int lane, int t) {
  return {__ldg(reinterpret_cast<const uint2*>(tile) + lane), __ldg(reinterpret_cast<const uint2*>(tile + 256) + lane),
          {__ldg(reinterpret_cast<const float4*>(tile + 512) + 2 * t),
           __ldg(reinterpret_cast<const float4*>(tile + 512) + 2 * t + 1)}};
}

// acc, the C fragment of one A tile (codes a, scales s) and one B tile (b), += the block's scaled products.
template <class P>
__device__ __forceinline__ void multiply_tile(float (&acc)[4], const uint32_t (&a)[4], const TileScales& s,
                                              const BTile& b) {
  if constexpr (P::kHalfScales) {
    // Two products per limb, each over one half of the block's columns (the other half's codes zero).
    const uint32_t first[4] = {a[0], a[1], 0u, 0u}, second[4] = {0u, 0u, a[2], a[3]};
    int c_hi[4] = {0, 0, 0, 0}, c_lo[4] = {0, 0, 0, 0}, c_hi16[4] = {0, 0, 0, 0}, c_lo16[4] = {0, 0, 0, 0};
    mma_s8_16832(c_hi, first, b.hi.x, b.hi.y);
    mma_s8_16832(c_lo, first, b.lo.x, b.lo.y);
    mma_s8_16832(c_hi16, second, b.hi.x, b.hi.y);
    mma_s8_16832(c_lo16, second, b.lo.x, b.lo.y);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float4& x = b.sx[e & 1];
      float a_e = fmaf(s.d[e >> 1] * x.y, limb_sum(c_hi[e], c_lo[e]), acc[e]);
      a_e = fmaf(s.d16[e >> 1] * x.y, limb_sum(c_hi16[e], c_lo16[e]), a_e);
      // The minimums against Σx: of the whole block, or of each half (x.w: columns 0..15).
      if constexpr (half_mins<P>()) {
        a_e = fmaf(-s.m[e >> 1], x.w, fmaf(-s.m16[e >> 1], x.z - x.w, a_e));
      } else if constexpr (has_mins<P>()) {
        a_e = fmaf(-s.m[e >> 1], x.z, a_e);
      }
      acc[e] = a_e;
    }
  } else {
    int c_hi[4] = {0, 0, 0, 0}, c_lo[4] = {0, 0, 0, 0};
    mma_s8_16832(c_hi, a, b.hi.x, b.hi.y);
    mma_s8_16832(c_lo, a, b.lo.x, b.lo.y);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float4& x = b.sx[e & 1];
      float a_e = fmaf(s.d[e >> 1] * x.y, limb_sum(c_hi[e], c_lo[e]), acc[e]);
      if constexpr (has_mins<P>()) a_e = fmaf(-s.m[e >> 1], x.z, a_e);
      acc[e] = a_e;
    }
  }
}

// A block's kBlockRows weight rows from row0 of the matrix at `data` (and its scale array at `scales` and bias array at
// `biases`, for the formats that have them) times NT batch tiles of 8 rows of `tiles` (m <= 8 NT); p gives the rest
// (row count and bytes, steps, x blocks). They are separate arguments so that a kernel that picks them per block (an
// expert, a chunk of slots) need not copy p into registers. Lane (g, t) owns rows g and g + 8 of each A tile and batch
// columns 2t, 2t + 1 of each B tile (the C fragment's places). store(n, row, sum) writes each output of a row < p.rows
// and a batch row n < m; `partial` is the kernel's __shared__ float4 [kWarps][kMTiles][32].
template <class P, int NT, class Store>
__device__ __forceinline__ void multiply_rows(const MmaParams& p, const uint8_t* data, const uint8_t* scales,
                                              const uint8_t* biases, const uint8_t* tiles, int m, int64_t row0,
                                              float4 (*partial)[kMTiles][32], const Store& store) {
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3;
  const uint8_t* rows[kMTiles][2];
  const uint8_t* scale_rows[kMTiles][2];
  const uint8_t* bias_rows[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = min(row0 + 16 * mt + 8 * h + g, p.rows - 1);  // past the end: a repeat, not stored
      rows[mt][h] = data + r * p.row_bytes;
      scale_rows[mt][h] = separate_scales<P>() ? scales + r * p.scale_row_bytes : nullptr;
      bias_rows[mt][h] = affine_groups<P>() ? biases + r * p.scale_row_bytes : nullptr;
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
      for (int h = 0; h < 2; ++h)
        raw[mt][h] = load_step<P>(rows[mt][h], scale_rows[mt][h], bias_rows[mt][h], p.group_shift, p.scale_type, s, t);
    // One 32-column block of the step: its codes and scales, then the products with every batch tile.
    const auto multiply_block = [&](int j) {
      uint32_t a[kMTiles][4];
      TileScales sc[kMTiles];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          block_halves<P>(raw[mt][h], j, a[mt][h], a[mt][2 + h], sc[mt].d[h], sc[mt].d16[h], sc[mt].m[h],
                          sc[mt].m16[h]);
      const int64_t kb = s * P::kStepBlocks + j;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const BTile b = load_b_tile(tiles + (nt * p.x_blocks + kb) * kMmaTileBytes, lane, t);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) multiply_tile<P>(acc[mt][nt], a[mt], sc[mt], b);
      }
    };
    if constexpr (decodes_per_block<P>()) {  // a loop, not unrolled: the decoded blocks would not all fit
#pragma unroll 1
      for (int j = 0; j < P::kStepBlocks; ++j) multiply_block(j);
    } else {
#pragma unroll
      for (int j = 0; j < P::kStepBlocks; ++j) multiply_block(j);
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
    if constexpr (global_scale<P>()) sum *= p.global_scale;
    const int n = nt * kMmaTileRows + 2 * (lane_out & 3) + (e_out & 1);
    if (row < p.rows && n < m) store(n, row, sum);
    __syncthreads();
  }
}

// At most 4 batch tiles per block (32 batch rows): above that the accumulators and the hoisted activation loads outgrow
// the registers (ptxas spilled at 5–8 tiles), so larger batches take a launch per this many tiles, each reading W again
// (from L2 where the matrix fits it: every 8B projection in Q4_K; a grid of chunks instead pushed the kernels at 255
// registers into spills). Q6_K, with its larger raw bytes and twice the products, spills from 3 tiles: 2 per launch, as
// Q3_K and Q2_K (68 bytes at 3: its second minimum per block). IQ4_NL's table lookups spilled 40 bytes at 4: 3 per
// launch, as Q5_1 (12 bytes at 4: its minimum and fifth bits).
template <class P>
__host__ __device__ constexpr int launch_tiles() {
  return P::kHalfScales ? 2 : std::is_same_v<P, mma_q8::Iq4Nl> || std::is_same_v<P, mma_q8::Q5_1> ? 3 : 4;
}

// One warp writes one tile of the rearranged activations (gemm_q8_mma.hpp): 32-column block kb of the 8 batch rows
// x_row(0) .. x_row(7) (a row of the q8 activations, or -1 for a row past the batch: zeros). Lane 4g + t writes row
// g's hi codes of columns 4t .. 4t+3 and 16+4t .. 16+4t+3 at 8 (4g + t), the lo codes 256 bytes on, and lanes 0..7
// the scales of their rows.
template <class XRow>
__device__ __forceinline__ void write_tile(const int8_t* __restrict__ codes, const float* __restrict__ scales,
                                           int64_t x_blocks, int64_t kb, const XRow& x_row, uint8_t* tile) {
  const int lane = static_cast<int>(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int64_t n = x_row(g);
  uint2 hi = make_uint2(0u, 0u), lo = make_uint2(0u, 0u);
  if (n >= 0) {
    const auto* c = reinterpret_cast<const uint8_t*>(codes) + (n * x_blocks + kb) * kQ8BlockCodeBytes;
    hi = make_uint2(dp4a::ldg_u32(c + 4 * t), dp4a::ldg_u32(c + 16 + 4 * t));
    lo = make_uint2(dp4a::ldg_u32(c + 32 + 4 * t), dp4a::ldg_u32(c + 48 + 4 * t));
  }
  reinterpret_cast<uint2*>(tile)[lane] = hi;
  reinterpret_cast<uint2*>(tile + 256)[lane] = lo;
  if (lane < kMmaTileRows) {
    const int64_t row = x_row(lane);
    float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row >= 0) s = __ldg(reinterpret_cast<const float4*>(scales) + row * x_blocks + kb);
    reinterpret_cast<float4*>(tile + 512)[lane] = s;
  }
}

}  // namespace qrt::kernels::mma_block
