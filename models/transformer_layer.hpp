// One layer's weights on the backend (Transformer::Layer), shared by the Transformer's translation units.
#pragma once

#include "models/transformer.hpp"

namespace qrt {

struct Transformer::Layer {
  WeightHandle attn_norm, q, k, v, o, q_bias, k_bias, v_bias, o_bias, q_norm, k_norm;
  WeightHandle ffn_norm, gate, up, down, gate_bias, up_bias, down_bias;
  WeightHandle attn_post_norm, ffn_post_norm;  // Gemma's norms on the block outputs
  // DeepSeek's latent attention (q is attn_q or attn_q_b): q's low rank and its norm, the latent and shared RoPE key
  // projections, the latent's norm, and the per-head stacks folded from kv_b (models/mla_weights.hpp).
  WeightHandle q_a, q_a_norm, kv_latent, k_rope, kv_a_norm, q_absorb, v_expand;
  bool moe = false;  // the MLP is the experts (else dense: DeepSeek's leading layers)
  WeightHandle gate_shexp, up_shexp, down_shexp;  // DeepSeek's shared experts (this rank's slice, or whole)
  int64_t shared_ffn = 0;                          // their width here
  bool shared_replicated = false;                  // whole on every rank (blocks the split would cut)
  ScopedBuffer choice_bias;                       // DeepSeek-V3's routing bias [experts]
  bool windowed = false;                       // attends through config.sliding_window (its local RoPE with it)
  // gpt-oss: this rank's heads' sink logits [heads_], the router's bias, and the expert biases as [experts, width]
  // tables (gate / up: this rank's columns; down: on rank 0 when the experts are split, whose sum it joins once).
  ScopedBuffer sinks, gate_exps_bias, up_exps_bias, down_exps_bias;
  WeightHandle router_bias;
  WeightHandle router, gate_exps, up_exps, down_exps;
  int64_t expert_ffn = 0;          // this rank's expert intermediate width
  bool experts_replicated = false;  // every rank holds whole experts: the MoE output needs no all-reduce
};

}  // namespace qrt
