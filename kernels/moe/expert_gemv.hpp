// Per-slot expert projection over a stacked [experts, out, in] weight in any format, reading only the experts
// the router selected.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "kernels/linear/gemv_batch.hpp"
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

// The first kernel of both grouped paths: the batch's slots sorted by expert in `workspace`
// (expert_gemv_grouped_workspace_bytes(shape)): offsets [experts + 1], then order [slots], expert e's slots being
// order[offsets[e] .. offsets[e + 1]) (in no fixed order: each slot's output is computed alone). A slot whose id is
// outside [0, experts) is in no list, and its `rows` outputs in y ([slots, rows]) are set to NaN here.
struct ExpertSlotLists {
  const int32_t* offsets = nullptr;
  const int32_t* order = nullptr;
};
Status group_expert_slots(const int32_t* ids, const ExpertGemvShape& shape, int64_t rows, float* y, void* workspace,
                          cudaStream_t stream, ExpertSlotLists* lists);

// The float formats (AFQ2/3/5/6, MXFP4, NVFP4, MXFP8, FP8, FP8_BLOCK, F32, F16, BF16; of these OCP MXFP4 and NVFP4
// also have an integer-dot kernel, which the backend prefers) on the dense model's staged kernel
// (kernels/linear/gemv_staged.cuh): each expert's rows streamed through shared memory with cp.async, decoded per lane,
// instead of a warp per row decoding whole blocks into a 256-float buffer. One token: a block row per slot. A batch:
// group_expert_slots, then a block row per expert multiplying its slots up to 8 per pass, so an expert's rows come from
// DRAM once per batch; a slot's sum is the one-token kernel's, bit for bit. Applies where the dense staged kernel does
// to expert 0's matrix and x (16-byte aligned, rows whole 16-byte copies), every expert's parts start as aligned as
// expert 0's, and (AFQ) the group size is 32, 64 or 128 with F16, BF16 or F32 scales. An invalid id gives that slot's
// rows NaN, as expert_gemv.
//   workspace (grouped): expert_gemv_grouped_workspace_bytes(shape).
bool expert_gemv_staged_applies(quant::FormatId format, const quant::QuantView& expert0,
                                const quant::PartSizes& per_expert, const float* x);
Status expert_gemv_staged(quant::FormatId format, const quant::QuantView& expert0, const quant::PartSizes& per_expert,
                          const int32_t* ids, const ExpertGemvShape& shape, const float* x, float* y,
                          cudaStream_t stream);
Status expert_gemv_staged_grouped(quant::FormatId format, const quant::QuantView& expert0,
                                  const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& shape,
                                  const float* x, float* y, void* workspace, cudaStream_t stream);

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
// Up to kGemvMaxParts stacks of one format and shape with the same per-expert sizes, on the same x and ids, in one
// launch (a layer's gate and up experts: one launch and one tail instead of two): stack k's GemvPart is its expert
// 0's matrix and its output. Each output is expert_gemv_dp4a's on that stack, bit for bit.
Status expert_gemv_dp4a_stacks(quant::FormatId format, std::span<const GemvPart> stacks,
                               const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& shape,
                               Q8ConstActivations x, cudaStream_t stream);

// Several tokens on integer dot products, grouped by expert: group_expert_slots, then a block per (expert, rows) runs
// that expert's slots up to 8 at a time with each weight load serving all of them, so an expert's rows come from
// DRAM once per batch. A slot's sum is taken exactly as expert_gemv_dp4a takes it, so each token of a batch gets the
// bits it gets alone. x as expert_gemv_dp4a's (all tokens' or slots' rows); workspace as expert_gemv_grouped's.
// Applies where expert_gemv_dp4a_applies, up to kGroupedMaxExperts experts.
Status expert_gemv_dp4a_grouped(quant::FormatId format, const quant::QuantView& expert0,
                                const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& shape,
                                Q8ConstActivations x, float* y, void* workspace, cudaStream_t stream);

// Several tokens on the int8 tensor cores (kernels/moe/expert_gemm_mma.cu): the slots grouped by expert, each
// expert's list cut into chunks of up to 32 slots (16 for Q6_K), the chunk's x rows gathered into gemm_q8_mma's tile
// layout, and gemm_q8_mma's block run per (32 weight rows, chunk) on that expert's matrix. For prompts and wide
// batches, where an expert sees many slots: one load of its weights serves up to 32 of them through mma instead of
// 8 through dp4a. x as expert_gemv_dp4a's; results within the integer-dot tolerance of the float product (the
// rounding of gemm_q8_mma, not expert_gemv_dp4a's bits). gemm_q8_mma's formats (GGUF gpt-oss's MXFP4 among them);
// workspace of expert_gemm_mma_workspace_bytes (the slot lists, the chunk table and the gathered tiles).
bool expert_gemm_mma_applies(quant::FormatId format, const quant::QuantView& expert0,
                             const quant::PartSizes& per_expert, const ExpertGemvShape& shape);
uint64_t expert_gemm_mma_workspace_bytes(quant::FormatId format, const ExpertGemvShape& shape, int64_t cols);
Status expert_gemm_mma_grouped(quant::FormatId format, const quant::QuantView& expert0,
                               const quant::PartSizes& per_expert, const int32_t* ids, const ExpertGemvShape& shape,
                               Q8ConstActivations x, float* y, void* workspace, cudaStream_t stream);

}  // namespace qrt::kernels
