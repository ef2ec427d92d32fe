// DeepSeek's multi-head latent attention folded for a cache of [RoPE key | latent] rows (ModelConfig::kv_lora_rank).
//
// Per head h, with the latent c (kv_lora, normed) and kv_b's rows for h split into K_h [nope, kv_lora] and
// V_h [v, kv_lora]: key_h = [K_h c | k_rope], value_h = V_h c. The score q_h · key_h equals
// [q_rope | K_hᵀ q_nope] · [k_rope | c], and the output Σ p value_h equals V_h (Σ p c). So the cache stores one row
// [k_rope | c] per token for all heads (multi-query attention of width rope + kv_lora whose values are its keys),
// each query is mapped by q_absorb_h = [[0 I], [K_hᵀ 0]] (the RoPE part passed through, the rest absorbed) and
// each head's attention output [o_rope | o_c] by v_expand_h = [0 V_h]. Both are built here once from kv_b (or from
// llama.cpp's split k_b / v_b) as stacks that the experts' projection (Backend::linear_experts) applies per head.
#pragma once

#include "loader/quant_tensor.hpp"
#include "loader/tensor_slice.hpp"
#include "models/model_config.hpp"
#include "qrt/status.hpp"

namespace qrt {

struct MlaStacks {
  SlicedTensor q_absorb;  // [heads, rope + kv_lora, nope + rope]
  SlicedTensor v_expand;  // [heads, v, rope + kv_lora]
};

// The stacks of heads [first_head, first_head + heads) of layer `layer`, from canonical attn_kv_b
// [all heads * (nope + v), kv_lora] or attn_k_b [all heads, kv_lora, nope] with attn_v_b [all heads, v, kv_lora]
// (*consumed gets the names read). Their format is the source's when it is F32, F16 or BF16 (the values are
// moved, not rounded), F32 otherwise.
Result<MlaStacks> build_mla_stacks(const TensorTable& tensors, int layer, const ModelConfig& c, int first_head,
                                   int heads, std::vector<std::string>* consumed);

// Internal names of attn_kv_a_mqa's two row ranges (models/fused_tensors.cpp splits it): the latent's
// [kv_lora, hidden] and the shared RoPE key's [rope, hidden].
std::string mla_latent_name(int layer);
std::string mla_rope_key_name(int layer);

}  // namespace qrt
