// The fast decode GEMV kernel shared by every per-family policy (gemv_lanes*.hpp): y[m, rows] = x[m, cols] · Wᵀ.
// Included only by the family .cu files (gemv_ggml.cu, gemv_afq.cu, gemv_mx.cu), which instantiate it per format.
//
// Work split: a block of W warps (W = 1, 2 or 4, chosen per launch so that small matrices still spread over every
// SM); warp w of block b owns rows [(b·W + w)·kRows, +kRows). The warp streams those rows' packed bytes through a
// private ring of kStages shared-memory buffers with cp.async (16 bytes per lane per copy, .cg: cached in L2 only,
// so the streamed weights do not evict x from L1), decodes from shared memory in registers, accumulates in fp32
// and reduces with warp shuffles. Nothing is shared between warps, so the only barriers are __syncwarp.
//
// Bytes moved: every packed byte of W (and the separate scales) once from DRAM; x (4·m·cols bytes) from L2/L1 per
// warp; y once. W dominates at decode batch sizes, so the bound is DRAM bandwidth, except for 4-bit formats from
// about batch 4, where decoding plus m FMAs per weight outgrow the issue budget (numbers in bench/NOTES-gemv.md).
//
// Requirements (checked by staged_applies; otherwise gemv() runs the generic kernel): W's data pointer and x are
// 16-byte aligned (cudaMalloc gives 256), each packed row is a whole number of 16-byte copies (Q4_0, Q8_0, Q4_K,
// Q5_K: cols a multiple of 256; Q6_K: of 2048; AFQ, MXFP4: always), cols is a multiple of the policy's
// kColsMultiple, and the separate scale/bias arrays are aligned to their element size. Row strides are implied by
// cols (rows are packed back to back).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "kernels/cuda/cp_async.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_facts.hpp"
#include "kernels/cuda/programmatic_launch.cuh"
#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/gemv_lanes.hpp"

namespace qrt::kernels::gemv_staged {

constexpr int kMaxWarpsPerBlock = 4;
// Dynamic shared memory a block may use without the cudaFuncSetAttribute opt-in (the same on every GPU CUDA 13
// supports). Policies are sized to fit it so that launches need no per-device attribute calls.
constexpr int kSmemWithoutOptIn = 48 * 1024;

struct StagedParams {
  const uint8_t* data;    // [rows, packed_row_bytes] packed W
  const uint8_t* scales;  // separate group parts or nullptr
  const uint8_t* biases;
  int64_t rows;
  int64_t cols;
  int64_t groups_per_row;
  int group_shift;
  float global_scale;
  const float* x;  // [m, cols]
  float* y;        // [m, rows]
};

// One warp's pass over its kRows rows: streams their packed bytes (src[r], row r's first byte) chunk by chunk
// through the warp's ring and sets acc[r][i] = this lane's share of row r · x row i, where x row i of a chunk
// starts at x_rows(args, i) with args.x = x + the chunk's first column. args carries the rows' scale parts and
// row0/valid_rows; the chunk fields are set here. Leaves no copy in flight, so the ring can be reused at once.
template <class P, int M, class XRows>
__device__ __forceinline__ void stream_rows(uint8_t* ring, const uint8_t* const (&src)[P::kRows], int64_t cols,
                                            const float* x, const XRows& x_rows, gemv_lanes::ChunkArgs& args,
                                            int lane, float (&acc)[P::kRows][M]) {
  constexpr int R = P::kRows;
  constexpr int S = P::kStages;
  constexpr int CB = gemv_lanes::chunk_bytes<P>();
  static_assert(S >= 2, "the ring needs a buffer being filled and one being read");
  const int chunks = gemv_lanes::chunk_count<P>(cols);

  // Copies chunk c of every row into ring slot `slot`; one commit group per call, empty past the last chunk, so
  // that cp.async.wait_group<S - 2> always means "chunk c has landed".
  auto issue = [&](int c, int slot) {
    if (c < chunks) {
      const int bytes = gemv_lanes::bytes_in_chunk<P>(cols, c);
      const int64_t offset = static_cast<int64_t>(c) * CB;
      uint8_t* dst = ring + slot * (R * CB);
#pragma unroll
      for (int r = 0; r < R; ++r)
        for (int i = 16 * lane; i < bytes; i += 16 * 32) cp_async_16(dst + r * CB + i, src[r] + offset + i);
    }
    cp_async_commit();
  };

#pragma unroll
  for (int s = 0; s < S - 1; ++s) issue(s, s);

#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int i = 0; i < M; ++i) acc[r][i] = 0.0f;

  args.scratch = reinterpret_cast<float*>(ring + S * R * CB);
  args.x_stride = cols;
  int read_slot = 0;
  int write_slot = S - 1;
  for (int c = 0; c < chunks; ++c) {
    cp_async_wait<S - 2>();
    // Every lane's copies of chunk c are visible to the warp, and every lane has finished reading the slot that
    // the next issue overwrites (it held chunk c - 1) and the scratch that prepare() rewrites.
    __syncwarp();
    issue(c + S - 1, write_slot);
    write_slot = write_slot + 1 == S ? 0 : write_slot + 1;

    args.stage = ring + read_slot * (R * CB);
    args.col0 = static_cast<int64_t>(c) * gemv_lanes::chunk_cols<P>();
    args.cols = gemv_lanes::cols_in_chunk<P>(cols, c);
    args.x = x + args.col0;
    if constexpr (P::kHasPrepare) {
      P::prepare(args, lane);
      __syncwarp();
    }
    P::template compute<M>(args, lane, acc, x_rows);
    read_slot = read_slot + 1 == S ? 0 : read_slot + 1;
  }
  cp_async_wait<0>();  // no copy may still target shared memory when the warp exits or refills the ring
  __syncwarp();        // nor may a lane still read the ring or the scratch when another starts the next pass
}

// acc[r][i] summed over the warp's lanes, stored by lane (r·M + i) mod 32 at y_row(i)[row0 + r] for the valid
// rows and the first `count` batch rows (every lane holds the sum, so the stores spread over the lanes).
template <int R, int M, class YRow>
__device__ __forceinline__ void store_warp_sums(const float (&acc)[R][M], int64_t row0, int valid, int lane, int count,
                                                const YRow& y_row) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int i = 0; i < M; ++i) {
      float v = acc[r][i];
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
      if (r < valid && i < count && lane == ((r * M + i) & 31)) y_row(i)[row0 + r] = v;
    }
  }
}

// The rows of this thread's warp: the first in *row0, and how many of R lie in a matrix of `rows` (0: none, the whole
// warp leaves; no block-wide barrier follows in the kernels that ask).
template <int R>
__device__ __forceinline__ int warp_rows(int64_t rows, int64_t* row0) {
  *row0 = (static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)) * R;
  return *row0 >= rows ? 0 : static_cast<int>(min(static_cast<int64_t>(R), rows - *row0));
}

// The chunk arguments that stay fixed over a warp's rows [row0, row0 + valid): the matrix's group layout and tensor
// scale from p, its scale parts (an expert's, for the experts' kernel) from scales / biases.
__device__ __forceinline__ gemv_lanes::ChunkArgs rows_args(const StagedParams& p, int64_t row0, int valid,
                                                           const uint8_t* scales, const uint8_t* biases) {
  gemv_lanes::ChunkArgs args;
  args.row0 = row0;
  args.valid_rows = valid;
  args.scales = scales;
  args.biases = biases;
  args.groups_per_row = p.groups_per_row;
  args.group_shift = p.group_shift;
  args.global_scale = p.global_scale;
  return args;
}

template <class P, int M>
__global__ void __launch_bounds__(kMaxWarpsPerBlock * 32, 1) gemv_staged_kernel(const StagedParams p) {
  constexpr int R = P::kRows;
  extern __shared__ __align__(16) uint8_t smem[];
  const int lane = static_cast<int>(threadIdx.x & 31);
  int64_t row0;
  const int valid = warp_rows<R>(p.rows, &row0);
  const int64_t row_bytes = gemv_lanes::packed_row_bytes<P>(p.cols);
  // The weights are no kernel's output: the warp's rows start into L2 before x, the previous kernel's output, is
  // waited for (programmatic_launch.cuh); every thread waits, those of a warp past the last row too.
  allow_next_grid();
  if (lane == 0 && valid > 0) prefetch_to_l2(p.data + row0 * row_bytes, static_cast<uint64_t>(valid * row_bytes));
  wait_for_previous_grid();
  if (valid == 0) return;

  uint8_t* const ring = smem + (threadIdx.x >> 5) * gemv_lanes::warp_smem_bytes<P>();
  const uint8_t* src[R];
#pragma unroll
  for (int r = 0; r < R; ++r) src[r] = p.data + (row0 + min(r, valid - 1)) * row_bytes;

  gemv_lanes::ChunkArgs args = rows_args(p, row0, valid, p.scales, p.biases);
  float acc[R][M];
  stream_rows<P, M>(ring, src, p.cols, p.x, gemv_lanes::ContiguousX{}, args, lane, acc);
  store_warp_sums<R, M>(acc, row0, valid, lane, M, [&](int i) { return p.y + i * p.rows; });
}

inline bool aligned_to(const void* p, uintptr_t n) { return reinterpret_cast<uintptr_t>(p) % n == 0; }

// Whether the staged kernel of policy P can run on this W and x (see the requirements above).
template <class P>
bool staged_applies(const quant::QuantView& w, const float* x) {
  static_assert(gemv_lanes::warp_smem_bytes<P>() <= kSmemWithoutOptIn, "one warp's ring must fit a block");
  if (w.rows <= 0 || w.cols <= 0 || w.data == nullptr || x == nullptr) return false;
  if (w.cols % P::kColsMultiple != 0) return false;
  if (!aligned_to(w.data, 16) || !aligned_to(x, 16)) return false;
  if (gemv_lanes::packed_row_bytes<P>(w.cols) % 16 != 0) return false;
  if (w.cols / gemv_lanes::chunk_cols<P>() >= INT_MAX) return false;
  if ((w.rows + P::kRows - 1) / P::kRows >= INT_MAX) return false;  // grid.x with one warp per block
  return true;
}

// Launches policy P's kernel for batch m (1..kGemvMaxBatch; gemv() checked it). `name` labels launch errors.
template <class P>
Status launch_staged(const char* name, const quant::QuantView& w, const float* x, int m, float* y,
                     cudaStream_t stream) {
  QRT_ASSIGN_OR_RETURN(const cuda::DeviceFacts facts, cuda::current_device_facts());
  constexpr int per_warp = gemv_lanes::warp_smem_bytes<P>();
  int warps = std::min(kMaxWarpsPerBlock, kSmemWithoutOptIn / per_warp);
  const int64_t row_groups = (w.rows + P::kRows - 1) / P::kRows;
  // Fewer warps per block for small matrices, so that at least two blocks land on every SM where there are rows
  // enough (1024-row k/v projections would otherwise leave half of an H100 idle).
  while (warps > 1 && (row_groups + warps - 1) / warps < 2 * static_cast<int64_t>(facts.sm_count)) warps /= 2;
  const int64_t blocks = (row_groups + warps - 1) / warps;

  const gemv_lanes::GroupLayout groups = gemv_lanes::group_layout<P>(w);
  const StagedParams params{w.data, w.scales, w.biases, w.rows, w.cols, groups.groups_per_row, groups.group_shift,
                            w.params.global_scale, x, y};
  return with_batch(m, [&](auto batch) -> Status {
    constexpr int M = decltype(batch)::value;
    return launch_programmatic(name, gemv_staged_kernel<P, M>, static_cast<unsigned>(blocks),
                               static_cast<unsigned>(warps * 32), static_cast<size_t>(warps * per_warp), stream,
                               params);
  });
}

}  // namespace qrt::kernels::gemv_staged
