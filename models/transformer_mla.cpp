// DeepSeek's multi-head latent attention on a cache of [RoPE key | latent] rows (models/mla_weights.hpp):
//
//   q      = h·Wqᵀ, or rms_norm(h·W_q_aᵀ)·W_q_bᵀ          [n, heads, nope + rope]
//   c, kr  = rms_norm(h·W_latentᵀ), h·W_rope_keyᵀ        [n, kv_lora], [n, rope]
//   key    = [kr | c]                                    the cache row: one "KV head" for every query head
//   q'_h   = q_absorb_h · q_h = [q_rope_h | K_hᵀ q_nope_h] [n, heads, rope + kv_lora]
//   RoPE on the first rope dims of q' and of key, the key written, attention with the values = the keys
//   out_h  = v_expand_h · attn_h = V_h (Σ p c)            [n, heads, v]
//   proj   = out·W_oᵀ                                    this rank's heads' partial sum
//
// The per-head products run as the experts' projection with head h as every row's expert h.
#include "models/transformer.hpp"
#include "models/transformer_layer.hpp"
#include "models/transformer_scratch.hpp"

namespace qrt {

using namespace transformer_scratch;  // NOLINT: the scratch names read as the buffers they are

Status Transformer::mla_attention(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups,
                                  int layer_index, int64_t n, const DecodeRows& decode, F32View proj) {
  const ModelConfig& c = config_;
  const Layer& L = layers_[static_cast<size_t>(layer_index)];
  Backend& be = backend_;
  auto f32 = [&](int which_buffer, int64_t rows, int64_t cols) {
    return scratch[static_cast<size_t>(which_buffer)].view<float>(rows, cols);
  };
  const int64_t qk = c.qk_nope_dim + c.qk_rope_dim, row = head_dim_;  // row = rope + kv_lora
  const F32View h = f32(kH, n, c.hidden);
  const F32View q = f32(kQ, n, heads_ * qk);
  if (c.q_lora_rank > 0) {
    const F32View q_low = f32(kK, n, c.q_lora_rank);
    QRT_TRY(be.linear(h, L.q_a, {}, q_low));
    QRT_TRY(be.rms_norm(q_low, L.q_a_norm, c.latent_norm_eps, q_low));
    QRT_TRY(be.linear(q_low, L.q, {}, q));
  } else {
    QRT_TRY(be.linear(h, L.q, {}, q));
  }
  const F32View latent = f32(kK, n, c.kv_lora_rank), rope_key = f32(kV, n, c.qk_rope_dim);
  const Backend::LinearPart kv[] = {{L.kv_latent, {}, latent}, {L.k_rope, {}, rope_key}};
  QRT_TRY(be.linear_same_input(h, kv));
  QRT_TRY(be.rms_norm(latent, L.kv_a_norm, c.latent_norm_eps, latent));
  const F32View key = f32(kUp, n, row);
  QRT_TRY(be.concat_cols(rope_key, latent, key));
  const ConstI32View head_ids = scratch[kHeadIds].view<int32_t>(n, heads_);
  const F32View queries = f32(kGate, n, heads_ * row), attn = f32(kAttn, n, heads_ * row);
  QRT_TRY(be.linear_experts(q.reshaped(n * heads_, qk), L.q_absorb, head_ids, queries.reshaped(n * heads_, row)));
  QRT_TRY(attend(scratch, groups, layer_index, n, decode, queries, key, key, attn));
  const F32View values = f32(kQ, n, heads_ * int64_t{c.v_head_dim});
  QRT_TRY(be.linear_experts(attn.reshaped(n * heads_, row), L.v_expand, head_ids,
                            values.reshaped(n * heads_, c.v_head_dim)));
  return be.linear(values, L.o, {}, proj);
}

}  // namespace qrt
