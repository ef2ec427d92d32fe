// The per-lane arithmetic of the fast decode GEMV kernels (gemv_staged.cuh), written once as __host__ __device__
// code so that the same functions run inside the CUDA kernels and, one lane at a time, in the CPU emulation test
// (tests/unit/gemv_lanes) that checks every lane mapping against the CPU reference without a GPU.
//
// The scheme every fast kernel shares ("staged rows"):
//   * One warp owns kRows consecutive weight rows and walks along them in chunks of kTilesPerChunk tiles; a tile is
//     256 columns of one row (kTileBytes packed bytes), and each lane owns 8 of those columns.
//   * The warp copies each chunk of its rows' packed bytes into shared memory with 16-byte cp.async copies (fully
//     coalesced whatever the block size: GGML blocks are 18/34/210 bytes and only 2-byte aligned) through a ring of
//     kStages buffers, so kStages-1 chunks are in flight while one is decoded.
//   * prepare() (optional) turns the chunk's per-block scale fields into floats in a per-warp scratch area once, so
//     that the 8 lanes sharing a sub-block do not each decode them; compute() then decodes the lane's 8 weights of
//     every staged row in registers straight from the packed bytes and accumulates x · w in fp32. The lane's 8 x
//     values (per batch row) are loaded once per tile and reused for all kRows rows.
//   * Weights become floats exactly: a byte b is turned into the float 2^23 + b by writing it under the exponent
//     bits 0x4B000000 (one PRMT) and the constant 2^23 (+ the format's code offset) is subtracted (one FADD). This
//     avoids the integer-to-float converter, which runs at 1/8 of the FMA rate on Hopper.
//
// Layout of the staging area of one warp: stage s, row r at byte (s * kRows + r) * kChunkBytes; the scratch floats
// follow the kStages stages.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#if !defined(QRT_SIMT)
#include <cuda_fp8.h>
#endif
#endif

#include "kernels/quant/formats.hpp"

// Unrolls the loops over batch rows and staged rows in device code, so that the register arrays they index stay in
// registers; host compilers (the CPU emulation) see nothing.
#if defined(__CUDA_ARCH__)
#define QRT_GEMV_UNROLL _Pragma("unroll")
#else
#define QRT_GEMV_UNROLL
#endif

namespace qrt::kernels::gemv_lanes {

constexpr int kWarpLanes = 32;
constexpr int kTileCols = 256;  // columns one warp covers per tile: 8 per lane
constexpr int kLaneCols = 8;

// ---- Bit and load helpers (host emulation beside each device instruction) ----

// PTX prmt.b32 in its generic mode: byte n of the result is byte (sel >> 4n) & 7 of the 8-byte value {b, a}
// (a = bytes 0..3); when bit 3 of that selector nibble is set, the selected byte's top bit is replicated instead.
QRT_HD uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
#if defined(__CUDA_ARCH__) && !defined(QRT_SIMT)  // the SIMT layer runs the host emulation below
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
#else
  const uint64_t src = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t d = 0;
  for (int n = 0; n < 4; ++n) {
    const uint32_t ctl = (sel >> (4 * n)) & 0xFu;
    uint32_t byte = static_cast<uint32_t>(src >> (8 * (ctl & 7u))) & 0xFFu;
    if (ctl & 8u) byte = (byte & 0x80u) ? 0xFFu : 0x00u;
    d |= byte << (8 * n);
  }
  return d;
#endif
}

constexpr float kMagic = 8388608.0f;  // 2^23: the float whose low mantissa byte is an integer's value

// The four bytes of w as exact floats, each minus `offset`: (2^23 + byte) - (2^23 + offset). `magic_plus_offset` is
// 2^23 + offset (exact for offsets below 2^23).
QRT_HD void bytes_to_floats(uint32_t w, float magic_plus_offset, float out[4]) {
  out[0] = quant::bits_to_f32(prmt(w, 0x4B000000u, 0x7650u)) - magic_plus_offset;
  out[1] = quant::bits_to_f32(prmt(w, 0x4B000000u, 0x7651u)) - magic_plus_offset;
  out[2] = quant::bits_to_f32(prmt(w, 0x4B000000u, 0x7652u)) - magic_plus_offset;
  out[3] = quant::bits_to_f32(prmt(w, 0x4B000000u, 0x7653u)) - magic_plus_offset;
}

// A small unsigned integer (below 2^23) as an exact float, without the integer-to-float converter.
QRT_HD float small_uint_to_float(uint32_t v) { return quant::bits_to_f32(0x4B000000u | v) - kMagic; }

// IEEE half bits -> float, exact (the hardware conversion on the device, the bit-level decoder on the host).
QRT_HD float half_bits_to_f32(uint32_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(static_cast<unsigned short>(h)));
#else
  return quant::fp16_to_f32(static_cast<uint16_t>(h));
#endif
}

// Four E4M3 (FN) codes, byte n of w, as exact floats: two hardware fp8x2 -> half2 conversions on the device (every
// E4M3 value, subnormals and NaN included, is a half), the scalar decoder on the host and under the SIMT layer.
QRT_HD void e4m3x4_to_floats(uint32_t w, float out[4]) {
#if defined(__CUDA_ARCH__) && !defined(QRT_SIMT)
  const __half2_raw lo = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w & 0xFFFFu), __NV_E4M3);
  const __half2_raw hi = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> 16), __NV_E4M3);
  const float2 a = __half22float2(__half2(lo)), b = __half22float2(__half2(hi));
  out[0] = a.x;
  out[1] = a.y;
  out[2] = b.x;
  out[3] = b.y;
#else
  for (int n = 0; n < 4; ++n) out[n] = quant::e4m3_to_f32(static_cast<uint8_t>(w >> (8 * n)));
#endif
}

// Loads from the staging area (shared memory on the device). Pointers must be aligned to the load's width, except
// ld_u32_a2, which reads a 32-bit little-endian value at a 2-byte aligned address as two halves.
QRT_HD uint32_t ld_u16(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint16_t*>(p);
#else
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
#endif
}
QRT_HD uint32_t ld_u32(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const uint32_t*>(p);
#else
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
#endif
}
QRT_HD uint32_t ld_u32_a2(const uint8_t* p) { return ld_u16(p) | (ld_u16(p + 2) << 16); }
QRT_HD void ld_f4(const float* p, float out[4]) {  // 16-byte aligned
#if defined(__CUDA_ARCH__)
  const float4 v = *reinterpret_cast<const float4*>(p);
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
#else
  std::memcpy(out, p, 16);
#endif
}

// Read-only loads from global memory (x, separate scale arrays): the non-coherent path, cached in L1 so that the
// warps of an SM share x.
QRT_HD void ldg_x4(const float* p, float out[4]) {  // 16-byte aligned
#if defined(__CUDA_ARCH__)
  const float4 v = __ldg(reinterpret_cast<const float4*>(p));
  out[0] = v.x;
  out[1] = v.y;
  out[2] = v.z;
  out[3] = v.w;
#else
  std::memcpy(out, p, 16);
#endif
}
QRT_HD uint32_t ldg_u8(const uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}
QRT_HD uint32_t ldg_u16(const uint8_t* p) {  // 2-byte aligned
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const unsigned short*>(p));
#else
  return quant::load_u16(p);
#endif
}
QRT_HD float ldg_f32(const uint8_t* p) {  // 4-byte aligned
#if defined(__CUDA_ARCH__)
  return __ldg(reinterpret_cast<const float*>(p));
#else
  return quant::load_f32(p);
#endif
}

// Element `index` of a separate F16 / BF16 / F32 scale array, as family_common.hpp's load_float_scale reads it.
template <quant::ScalarType T>
QRT_HD float ldg_scale(const uint8_t* base, int64_t index) {
  if constexpr (T == quant::ScalarType::kF16) {
    return half_bits_to_f32(ldg_u16(base + 2 * index));
  } else if constexpr (T == quant::ScalarType::kBF16) {
    return quant::bits_to_f32(ldg_u16(base + 2 * index) << 16);
  } else {
    static_assert(T == quant::ScalarType::kF32, "scale arrays are F16, BF16 or F32");
    return ldg_f32(base + 4 * index);
  }
}

// dot of 4 weights with 4 x values, as one multiply and three fused multiply-adds on the device.
QRT_HD float dot4(const float w[4], const float x[4], float acc) {
  acc += w[0] * x[0];
  acc += w[1] * x[1];
  acc += w[2] * x[2];
  acc += w[3] * x[3];
  return acc;
}
QRT_HD float sum4(const float x[4]) { return (x[0] + x[1]) + (x[2] + x[3]); }

// ---- What compute() and prepare() see of one staged chunk ----

struct ChunkArgs {
  const uint8_t* stage;  // [kRows][kChunkBytes]: the chunk's packed bytes of each of the warp's rows
  float* scratch;        // per-warp floats written by prepare(), read by compute()
  const float* x;        // x + col0: batch row i of the chunk starts at x + i * x_stride
  int64_t x_stride;      // = cols
  int64_t col0;          // first matrix column of the chunk
  int cols;              // columns in the chunk (a multiple of 32; of 256 for the GGML formats)
  int64_t row0;          // matrix row of staged row 0
  int valid_rows;        // staged rows r >= valid_rows lie past the matrix and repeat row valid_rows - 1
  // Separate per-group parts (AFQ, MXFP4): [rows, groups_per_row] arrays, group = column >> group_shift.
  const uint8_t* scales;
  const uint8_t* biases;
  int64_t groups_per_row;
  int group_shift;
  float global_scale = 1.0f;  // QuantParams::global_scale (FP8 per tensor, NVFP4)
};

// Where batch row i of x begins (a.x already points at the chunk's first column). The dense GEMV's rows follow each
// other (ContiguousX); the experts' kernel gathers a pass's slots from anywhere in x (expert_gemv_staged.cu), with
// the offsets in registers: compute() is inlined with i unrolled, so neither costs a load.
struct ContiguousX {
  QRT_HD const float* operator()(const ChunkArgs& a, int i) const { return a.x + i * a.x_stride; }
};

// The matrix row whose bytes staged row r holds.
QRT_HD int64_t staged_row(const ChunkArgs& a, int r) { return a.row0 + (r < a.valid_rows ? r : a.valid_rows - 1); }

// ---- The policy contract (one struct per fast format; see gemv_lanes_ggml.hpp and gemv_lanes_afq_mx.hpp) ----
//   kTileBytes      packed bytes of one 256-column tile of a row
//   kTilesPerChunk  tiles staged per row and pipeline step (kTilesPerChunk · kTileBytes a multiple of 16)
//   kRows           rows per warp: x is loaded once per tile and used for all of them
//   kStages         depth of the cp.async ring (kStages - 1 chunks in flight while one is decoded)
//   kScratchFloats  per-warp floats prepare() writes
//   kColsMultiple   the fast kernel needs cols % kColsMultiple == 0 (else the generic kernel runs)
//   kGroupCols      columns per entry of the separate scale arrays: -1 none, 0 params.group_size, else fixed
//   kHasPrepare     whether prepare() does anything (a __syncwarp separates it from compute())
//   QRT_HD static void prepare(const ChunkArgs&, int lane);
//   template <int M, class XRows> QRT_HD static void compute(const ChunkArgs&, int lane, float (&acc)[kRows][M],
//                                                            const XRows& x_rows);
//       acc[r][i] += this lane's share of Σ_c W[row r, col0 + c] · x_rows(a, i)[c] over the chunk

// The lane policy of each format's fast kernel, specialized next to the policies (gemv_lanes_ggml.hpp,
// gemv_lanes_afq_mx.hpp); `type` is void for formats without one. ScaleType matters only to formats whose separate
// scale arrays come in several dtypes (AFQ: F16, BF16, F32); the others ignore it.
template <quant::FormatId Id, quant::ScalarType ScaleType>
struct LanePolicy {
  using type = void;
};

// groups_per_row and group_shift of ChunkArgs for a tensor (group sizes are powers of two: 32, 64 or 128).
struct GroupLayout {
  int64_t groups_per_row = 0;
  int group_shift = 0;
};
template <class P>
GroupLayout group_layout(const quant::QuantView& w) {
  GroupLayout g;
  const int cols_per_group = P::kGroupCols == 0 ? w.params.group_size : P::kGroupCols;
  if (cols_per_group <= 0) return g;
  g.groups_per_row = w.cols / cols_per_group;
  while ((1 << g.group_shift) < cols_per_group) ++g.group_shift;
  return g;
}

// ---- Chunk geometry, shared by the kernel and the emulation ----

template <class P>
QRT_HD constexpr int chunk_cols() {
  return P::kTilesPerChunk * kTileCols;
}
template <class P>
QRT_HD constexpr int chunk_bytes() {
  static_assert((P::kTilesPerChunk * P::kTileBytes) % 16 == 0, "a chunk must be whole 16-byte copies");
  return P::kTilesPerChunk * P::kTileBytes;
}
template <class P>
QRT_HD constexpr int warp_smem_bytes() {
  return P::kStages * P::kRows * chunk_bytes<P>() + 4 * P::kScratchFloats;
}
// Packed bytes of one row of `cols` columns (exact: GGML rows hold whole tiles, the others are 4 or 8 bits per
// column with cols a multiple of 32).
template <class P>
QRT_HD int64_t packed_row_bytes(int64_t cols) {
  return cols * P::kTileBytes / kTileCols;
}
template <class P>
QRT_HD int chunk_count(int64_t cols) {
  return static_cast<int>((cols + chunk_cols<P>() - 1) / chunk_cols<P>());
}
template <class P>
QRT_HD int cols_in_chunk(int64_t cols, int chunk) {
  const int64_t left = cols - static_cast<int64_t>(chunk) * chunk_cols<P>();
  return static_cast<int>(left < chunk_cols<P>() ? left : chunk_cols<P>());
}
template <class P>
QRT_HD int bytes_in_chunk(int64_t cols, int chunk) {
  return cols_in_chunk<P>(cols, chunk) * P::kTileBytes / kTileCols;
}

}  // namespace qrt::kernels::gemv_lanes
