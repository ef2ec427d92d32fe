// Decode attention split over the sequence (flash-decoding): a block per (split, KV head, query row) scores its
// slice of the keys for every query head of the GQA group, so each K and V row is read once per group, not once
// per query head; a second kernel merges the splits' partial results by log-sum-exp. The number of splits is fixed
// at launch (so a captured graph keeps its grid) while the keys per split follow the current key count, read on the
// device: every length keeps all splits busy.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/attention.hpp"
#include "kernels/linear/q8_activations.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// The largest GQA group (query heads per KV head) the split kernel takes; larger groups use attention().
constexpr int kSplitMaxGroup = 16;

struct AttentionSplitPlan {
  int splits = 0;         // blocks along the sequence per (KV head, query row)
  int chunk_capacity = 0; // the most keys one split can be given (a multiple of 32)
  uint64_t workspace_bytes = 0;
  uint64_t shared_bytes = 0;
};

// How `shape` (tokens, capacity, heads, head_dim) is split, and the workspace it needs: per (row, head, split) a
// running max, a denominator and head_dim unnormalized outputs. splits = 0 when the split kernel does not apply
// (a group above kSplitMaxGroup, a head_dim that is not a multiple of 4 or above 256, or more shared memory than a
// block may use without opting in).
AttentionSplitPlan plan_attention_split(const AttentionShape& shape);

// Whether the cache arrays k and v of this element type are aligned for the split kernel's reads of 4 elements at
// once (16 bytes for f32, 8 for f16 and bf16, 4 for fp8, 2 for q8_0's blocks); the caches qrt allocates always are.
bool attention_split_aligned(const void* k, const void* v, KvType type);

// The same result as attention() (same arguments), through the split and merge kernels; workspace holds
// plan.workspace_bytes of device memory. With shape.table_stride > 0 the query rows are as many sequences of one
// paged pool, each with its own key count and block table (AttentionShape): a batched decode step in one launch.
// With q8.codes set (head_dim a multiple of 32), the merge also writes out quantized for the integer-dot GEMV of the
// output projection (q8_activations.hpp's layout of [tokens, heads * head_dim]), saving that GEMV's quantize kernel.
// k and v must pass attention_split_aligned.
Status attention_split(const float* q, const int32_t* q_pos, const void* k, const void* v, const int32_t* key_pos,
                       const int32_t* key_count, const AttentionShape& shape, const AttentionSplitPlan& plan,
                       float* workspace, float* out, cudaStream_t stream, Q8Activations q8 = {});

}  // namespace qrt::kernels
