// DeepSeek's latent decode attention on the tensor cores (attention_latent_mma.cu): the latent kernel's partial
// results for an f16 or bf16 cache, its 16 query heads per block the m16 of mma.sync. attention_latent() takes it
// where it applies.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/attention/attention.hpp"
#include "kernels/attention/attention_latent.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// An f16 or bf16 cache of one KV head (values are keys), 16-byte aligned, rows a multiple of 32 up to 576 wide, on a
// device whose blocks may opt in to `shared_optin` bytes of shared memory.
bool attention_latent_mma_applies(const AttentionShape& shape, const void* k, uint64_t shared_optin);

// Per (row, head, split) of `plan`: the running max (natural log units), the sum of exp and the unnormalized output,
// as the latent kernel writes them for attention_latent's merge.
Status attention_latent_mma_partials(const float* q, const int32_t* q_pos, const void* k, const int32_t* key_pos,
                                     const int32_t* key_count, const AttentionShape& shape,
                                     const AttentionLatentPlan& plan, float* ws_max, float* ws_sum, float* ws_out,
                                     cudaStream_t stream);

// A prompt's rows over the latent cache (or any rows of one sequence) without a workspace: one split per row, the
// output normalized in the kernel (no merge), tiles a row sees no key of skipped. What a prompt over an f16 or bf16
// latent cache takes (the per-head kernel reads every row once per query head on the CUDA cores).
bool attention_latent_rows_applies(const AttentionShape& shape, const void* k, uint64_t shared_optin);
Status attention_latent_rows(const float* q, const int32_t* q_pos, const void* k, const int32_t* key_pos,
                             const int32_t* key_count, const AttentionShape& shape, float* out, cudaStream_t stream);

}  // namespace qrt::kernels
