// Prompt attention on the tensor cores, FlashAttention-2 style: a block per (64 query rows, head) walks the keys in
// tiles of 64, computes S = Q·Kᵀ and O += P·V with 16x16x16 wmma products on the cache's 16-bit type, and keeps
// the softmax online (running max and sum per row, O rescaled in shared memory). Key tiles that no query of the
// block can see (later positions, or before every query's sliding window) are skipped whole, which halves the work
// of a causal prompt. Same contract as attention() (attention.hpp). For head dims 64/96/128/256 a second kernel keeps
// S, P and O in registers (attention_prefill_mma, below).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/attention.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// Below this many query rows the per-head kernel (or the split decode kernel) is used.
constexpr int64_t kPrefillTcMinTokens = 16;

// Dynamic shared memory the kernel needs for this head_dim (more than 48 KiB: the launch opts in).
uint64_t attention_prefill_tc_shared_bytes(int head_dim);

// Whether the kernel takes this shape on a device whose blocks may opt in to `shared_optin` bytes: an f16 or bf16
// cache (an f32 cache keeps fp32 attention), head_dim a multiple of 16 up to 256, at least kPrefillTcMinTokens rows.
bool attention_prefill_tc_applies(const AttentionShape& shape, uint64_t shared_optin);

// Q is rounded to the cache's type for Q·Kᵀ and the probabilities for P·V; scores, softmax and O accumulate in fp32.
Status attention_prefill_tc(const float* q, const int32_t* q_pos, const void* k, const void* v, const int32_t* key_pos,
                            const int32_t* key_count, const AttentionShape& shape, float* out, cudaStream_t stream);

// The same attention with S, P and O in registers (attention_prefill_mma.cu: FlashAttention-2's layout on
// mma.sync.m16n8k16, a block per (64 query rows, head), K and V tiles of 64 keys (32 at head_dim 256)
// double-buffered in shared memory, 83-85 KB at head_dim 128), for head dims 64, 96, 128 and 256 over an f16 or bf16
// cache (the same rounding as above, so the same results up to the order of the fp32 sums) or an fp8 or q8_0 one
// (its tiles converted to fp16 in shared memory: exactly for fp8, q8_0's d · q rounded to fp16; q8_0 not at 96), K
// and V 16-byte aligned (q8_0: 4). The backend prefers it where it applies (QRT_CUDA_PREFILL_ATTENTION=shared keeps
// the kernel above for 16-bit caches, to compare).
bool attention_prefill_mma_applies(const AttentionShape& shape, const void* k, const void* v, uint64_t shared_optin);
Status attention_prefill_mma(const float* q, const int32_t* q_pos, const void* k, const void* v,
                             const int32_t* key_pos, const int32_t* key_count, const AttentionShape& shape, float* out,
                             cudaStream_t stream);

}  // namespace qrt::kernels
