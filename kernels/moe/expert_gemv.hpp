// Per-slot expert projection over a stacked [experts, out, in] weight in any format, reading only the experts
// the router selected.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/q8_activations.hpp"
#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

struct ExpertGemvShape {
  int64_t tokens = 0;
  int top_k = 0;
  int experts = 0;
  bool shared_input = true;  // x has one row per token (else one row per slot)
};

// y[t * top_k + s] = x[row] · W[ids[t, s]]ᵀ with row = t (shared input) or t * top_k + s.
//   expert0: the view of expert 0's [out, in] matrix (rows = out) on the device;
//   per_expert: the part sizes of one expert, so expert e's parts start at e * per_expert in each part;
//   ids: [tokens, top_k] int32; x: [tokens or tokens * top_k, in]; y: [tokens * top_k, out].
// An id outside [0, experts) cannot be reported from the device: that slot's output row is NaN.
// One warp per (slot, output row), fp32 accumulation; every slot re-reads its expert's rows, so this is the
// one-token path (a decode step's slots name distinct experts); batches go through expert_gemv_grouped.
Status expert_gemv(quant::FormatId format, const quant::QuantView& expert0, const quant::PartSizes& per_expert,
                   const int32_t* ids, const ExpertGemvShape& shape, const float* x, float* y, cudaStream_t stream);

// The same result, bit for bit, for a batch of tokens, grouped by expert: a first kernel sorts the slots by their
// expert (counts, offsets, then slot lists in `workspace`), a second runs a block per (expert, 4 output rows) over
// that expert's slots, 8 at a time, so each expert's rows come from DRAM once per batch (the later chunks re-read
// them from L2) instead of once per slot. Each slot's sum is taken in the per-slot kernel's order.
//   workspace: expert_gemv_grouped_workspace_bytes(shape) of device memory.
// Not applicable (returns unsupported) above kGroupedMaxExperts experts.
constexpr int kGroupedMaxExperts = 8192;
uint64_t expert_gemv_grouped_workspace_bytes(const ExpertGemvShape& shape);
Status expert_gemv_grouped(quant::FormatId format, const quant::QuantView& expert0, const quant::PartSizes& per_expert,
                           const int32_t* ids, const ExpertGemvShape& shape, const float* x, float* y, void* workspace,
                           cudaStream_t stream);

// The one-token path on integer dot products (kernels/linear/gemv_dp4a.hpp): x already quantized to two int8 limbs
// (one row per token with a shared input, else one per slot, expert0.cols columns), each slot's expert rows read with
// the dense-model GEMV's per-format loads, 32, 64 or 128 threads per row (as many as its items need, so that narrow
// expert matrices keep every thread of a block loading), instead of a warp per row decoding whole blocks into
// registers. Applies where gemv_dp4a_applies to expert 0's matrix and every expert's parts start as
// aligned as expert 0's. An invalid id gives that slot's row NaN, as expert_gemv.
bool expert_gemv_dp4a_applies(quant::FormatId format, const quant::QuantView& expert0,
                              const quant::PartSizes& per_expert);
Status expert_gemv_dp4a(quant::FormatId format, const quant::QuantView& expert0, const quant::PartSizes& per_expert,
                        const int32_t* ids, const ExpertGemvShape& shape, Q8ConstActivations x, float* y,
                        cudaStream_t stream);

}  // namespace qrt::kernels
