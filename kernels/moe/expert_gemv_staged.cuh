// The staged GEMV (kernels/linear/gemv_staged.cuh) over a stack of experts, for the float formats that have a lane
// policy: AFQ2/3/5/6, MXFP4 and NVFP4 (when the integer-dot kernel is off), MXFP8, FP8, FP8_BLOCK, F32, F16, BF16.
// Without it their experts took the generic kernel (a 256-float buffer per lane, one warp per row re-reading x per
// block). Included only by the family files (expert_gemv_staged_afq.cu, expert_gemv_staged_float.cu).
//
// Work split as the dense staged kernel's: warp w of block b owns rows [(b·W + w)·kRows, +kRows) of one expert's
// matrix and streams them through its cp.async ring. grid.y is
//   * one token: the slots (expert ids[slot], x row = the slot's token or the slot itself); a bad id gives the
//     slot's rows NaN;
//   * a batch: the experts (group_expert_slots' lists); the block's rows multiply every slot of its expert in
//     passes of up to 8, so an expert's rows come from DRAM once per batch (later passes find them in L2) and one
//     decode of a weight serves up to 8 slots. A pass is as wide as its slots (1, 2, 4 or 8).
// Each slot's sum is taken as the one-token kernel takes it (the same lanes, chunks and order), so a token decoded
// in a batch gets the bits it gets alone.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "kernels/linear/gemv_staged.cuh"
#include "kernels/moe/expert_gemv.hpp"

namespace qrt::kernels::staged_experts {

struct Experts {
  const int32_t* ids;
  int64_t first_slot;  // one token: slot of blockIdx.y 0
  int top_k;
  int experts;
  bool shared_input;  // x row = slot / top_k, else x row = slot
  uint64_t data_stride, scales_stride, biases_stride;  // bytes per expert in each part
  // Set: the batch kernel (expert e's slots are order[offsets[e] .. offsets[e + 1])).
  const int32_t* offsets = nullptr;
  const int32_t* order = nullptr;
};

constexpr int kPassSlots = 8;

// Batch row i of a pass starts offset[i] floats into x. The offsets sit in the warp's shared memory, not in
// registers: the 8-slot passes of AFQ's 3, 5 and 6 bits already need 250 registers, and 8 more made ptxas spill.
struct GatheredX {
  const int64_t* offset;
  __device__ __forceinline__ const float* operator()(const gemv_lanes::ChunkArgs& a, int i) const {
    return a.x + offset[i];
  }
};

__device__ __forceinline__ int64_t x_row_of(const Experts& e, int64_t slot) {
  return e.shared_input ? slot / e.top_k : slot;
}

// One pass of the warp over slots[0 .. n) (1 <= n <= M; the slots past n repeat the last, computed, not stored).
// offsets: the warp's kPassSlots int64s of shared memory.
template <class P, int M>
__device__ __forceinline__ void pass(const gemv_staged::StagedParams& p, const Experts& e, uint8_t* ring,
                                     int64_t* offsets, const uint8_t* const (&src)[P::kRows],
                                     gemv_lanes::ChunkArgs& args, const int32_t* slots, int n, int lane) {
  if (lane < M) offsets[lane] = x_row_of(e, slots[lane < n ? lane : n - 1]) * p.cols;
  __syncwarp();
  float acc[P::kRows][M];
  gemv_staged::stream_rows<P, M>(ring, src, p.cols, p.x, GatheredX{offsets}, args, lane, acc);
  gemv_staged::store_warp_sums<P::kRows, M>(acc, args.row0, args.valid_rows, lane, n, [&](int i) {
    return p.y + static_cast<int64_t>(slots[i]) * p.rows;
  });
}

// Shared memory of one warp: its ring, then the pass's x offsets.
template <class P>
QRT_HD constexpr int warp_bytes() {
  static_assert(gemv_lanes::warp_smem_bytes<P>() % 16 == 0, "the offsets and the next warp's ring stay aligned");
  return gemv_lanes::warp_smem_bytes<P>() + 8 * kPassSlots;
}

template <class P, bool kBatch>
__global__ void __launch_bounds__(gemv_staged::kMaxWarpsPerBlock * 32, 1)
    expert_gemv_staged_kernel(const gemv_staged::StagedParams p, const Experts e) {
  constexpr int R = P::kRows;
  extern __shared__ __align__(16) uint8_t smem[];
  allow_next_grid();
  wait_for_previous_grid();  // the expert ids (or the batch's slot lists) and x are earlier kernels'
  const int lane = static_cast<int>(threadIdx.x & 31);
  int64_t row0;
  const int valid = gemv_staged::warp_rows<R>(p.rows, &row0);
  if (valid == 0) return;

  int expert;
  int32_t begin = 0, end = 0;
  int32_t slot = 0;
  if constexpr (kBatch) {
    expert = static_cast<int>(blockIdx.y);
    begin = e.offsets[expert];
    end = e.offsets[expert + 1];
    if (begin == end) return;  // an expert no slot chose
  } else {
    slot = static_cast<int32_t>(e.first_slot + blockIdx.y);
    expert = e.ids[slot];
    if (expert < 0 || expert >= e.experts) {  // not reportable from here: the slot's rows become NaN
      if (lane < valid) p.y[static_cast<int64_t>(slot) * p.rows + row0 + lane] = __int_as_float(0x7fc00000);
      return;
    }
  }

  const uint64_t ue = static_cast<uint64_t>(expert);
  uint8_t* const ring = smem + (threadIdx.x >> 5) * warp_bytes<P>();
  int64_t* const offsets = reinterpret_cast<int64_t*>(ring + gemv_lanes::warp_smem_bytes<P>());
  const int64_t row_bytes = gemv_lanes::packed_row_bytes<P>(p.cols);
  const uint8_t* data = p.data + ue * e.data_stride;
  const uint8_t* src[R];
#pragma unroll
  for (int r = 0; r < R; ++r) src[r] = data + (row0 + min(r, valid - 1)) * row_bytes;

  gemv_lanes::ChunkArgs args =
      gemv_staged::rows_args(p, row0, valid, p.scales == nullptr ? nullptr : p.scales + ue * e.scales_stride,
                             p.biases == nullptr ? nullptr : p.biases + ue * e.biases_stride);

  if constexpr (!kBatch) {
    pass<P, 1>(p, e, ring, offsets, src, args, &slot, 1, lane);
  } else {
    for (int32_t c = begin; c < end; c += kPassSlots) {
      const int n = min(end - c, kPassSlots);
      if (n == 1) {
        pass<P, 1>(p, e, ring, offsets, src, args, e.order + c, n, lane);
      } else if (n == 2) {
        pass<P, 2>(p, e, ring, offsets, src, args, e.order + c, n, lane);
      } else if (n <= 4) {
        pass<P, 4>(p, e, ring, offsets, src, args, e.order + c, n, lane);
      } else {
        pass<P, kPassSlots>(p, e, ring, offsets, src, args, e.order + c, n, lane);
      }
    }
  }
}

// Whether policy P's rows can be streamed for every expert of the stack: the dense kernel's checks on expert 0, and
// every expert's parts starting as aligned as expert 0's (16 bytes for the packed rows, the scale dtype's size for
// the scale and bias arrays).
template <class P>
bool applies(const quant::QuantView& expert0, const quant::PartSizes& per_expert, const float* x, int scale_bytes) {
  if (!gemv_staged::staged_applies<P>(expert0, x) || per_expert.data % 16 != 0) return false;
  if (scale_bytes > 0 && (per_expert.scales % scale_bytes != 0 || per_expert.biases % scale_bytes != 0 ||
                          !gemv_staged::aligned_to(expert0.scales, scale_bytes) ||
                          (expert0.biases != nullptr && !gemv_staged::aligned_to(expert0.biases, scale_bytes))))
    return false;
  return true;
}

// One launch's arguments. blocks_y: the slots of this launch (one token) or the experts (e.offsets set); busy_y: how
// many of those rows of blocks have work (at most the batch's slots).
struct Launch {
  const char* name;
  const quant::QuantView& expert0;
  const Experts& e;
  int64_t blocks_y;
  int64_t busy_y;
  const float* x;
  float* y;
  cudaStream_t stream;
};

template <class P>
Status launch(const Launch& l) {
  const quant::QuantView& expert0 = l.expert0;
  QRT_ASSIGN_OR_RETURN(const cuda::DeviceFacts facts, cuda::current_device_facts());
  constexpr int per_warp = warp_bytes<P>();
  int warps = std::min(gemv_staged::kMaxWarpsPerBlock, gemv_staged::kSmemWithoutOptIn / per_warp);
  const int64_t row_groups = (expert0.rows + P::kRows - 1) / P::kRows;
  // As the dense kernel: fewer warps per block while the grid would leave SMs with under two blocks (expert
  // matrices are narrow: 768 rows of Qwen3-30B-A3B's gate make 192 warps per slot).
  while (warps > 1 && (row_groups + warps - 1) / warps * l.busy_y < 2 * static_cast<int64_t>(facts.sm_count))
    warps /= 2;
  const int64_t blocks_x = (row_groups + warps - 1) / warps;
  const gemv_lanes::GroupLayout groups = gemv_lanes::group_layout<P>(expert0);
  const gemv_staged::StagedParams params{expert0.data, expert0.scales, expert0.biases,       expert0.rows,
                                         expert0.cols, groups.groups_per_row, groups.group_shift,
                                         expert0.params.global_scale, l.x, l.y};
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(l.blocks_y));
  const unsigned threads = static_cast<unsigned>(warps * 32);
  const size_t smem = static_cast<size_t>(warps * per_warp);
  if (l.e.offsets != nullptr)
    return launch_programmatic(l.name, expert_gemv_staged_kernel<P, true>, grid, threads, smem, l.stream, params, l.e);
  return launch_programmatic(l.name, expert_gemv_staged_kernel<P, false>, grid, threads, smem, l.stream, params, l.e);
}

// The family files' entry points (expert_gemv_staged_afq.cu, expert_gemv_staged_float.cu): nullopt for a format
// the family does not serve.
std::optional<bool> afq_applies(quant::FormatId format, const quant::QuantView& expert0,
                                const quant::PartSizes& per_expert, const float* x);
std::optional<Status> afq_launch(quant::FormatId format, const Launch& l);
std::optional<bool> float_applies(quant::FormatId format, const quant::QuantView& expert0,
                                  const quant::PartSizes& per_expert, const float* x);
std::optional<Status> float_launch(quant::FormatId format, const Launch& l);

}  // namespace qrt::kernels::staged_experts
