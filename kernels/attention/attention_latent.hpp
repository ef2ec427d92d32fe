// Decode attention over DeepSeek's latent cache: one KV head whose rows are the keys and the values at once
// (AttentionParams::values_are_keys), 576 wide in the real models, read by every query head. The split kernel takes
// head dims up to 256, and the per-head kernel would read each row once per query head; here a block per (split,
// query row, block of up to 16 query heads) scores its slice of the rows for all its heads and sums the same rows as
// values, so each row is read once per 16 heads (twice: scores, then values, the second mostly from L2). A merge
// kernel adds the splits by log-sum-exp (the split kernel's workspace layout), any head dim.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/attention.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

constexpr int kLatentHeadsPerBlock = 16;

struct AttentionLatentPlan {
  int splits = 0;  // 0: the kernel does not apply (more than one KV head, or a row too wide for shared memory)
  int head_blocks = 0;
  int chunk_capacity = 0;
  uint64_t workspace_bytes = 0;
  uint64_t shared_bytes = 0;
};

AttentionLatentPlan plan_attention_latent(const AttentionShape& shape);

// attention() where v is k (shape.kv_heads == 1): the same arguments but one cache array; workspace holds
// plan.workspace_bytes. With shape.table_stride > 0 the rows are many sequences of one pool (attention_split). An f16
// or bf16 cache takes the tensor cores (attention_latent_mma.hpp) when `shared_optin` (the device's opt-in shared
// memory per block; 0: never) holds their tiles.
Status attention_latent(const float* q, const int32_t* q_pos, const void* k, const int32_t* key_pos,
                        const int32_t* key_count, const AttentionShape& shape, const AttentionLatentPlan& plan,
                        float* workspace, float* out, cudaStream_t stream, uint64_t shared_optin = 0);

}  // namespace qrt::kernels
