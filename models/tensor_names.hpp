// Canonical tensor names (GGUF's, without the ".weight" suffix) and the maps from Hugging Face and GGUF file
// names to them. The transformer only ever asks for canonical names.
//
//   token_embd, output_norm, output, rope_freqs, rope_factors_long, rope_factors_short
//   blk.N.attn_norm, blk.N.attn_q, blk.N.attn_k, blk.N.attn_v, blk.N.attn_output, blk.N.attn_q_norm,
//   blk.N.attn_k_norm, blk.N.ffn_norm, blk.N.ffn_gate, blk.N.ffn_up, blk.N.ffn_down, blk.N.ffn_gate_inp,
//   blk.N.ffn_gate_exps, blk.N.ffn_up_exps, blk.N.ffn_down_exps        (+ ".bias" for biases)
//   blk.N.post_attention_norm, blk.N.post_ffw_norm: Gemma's norms on the attention and MLP outputs
//   blk.N.attn_sinks: gpt-oss's per-head sink logits; blk.N.ffn_*_exps.bias: its expert biases
//   blk.N.attn_qkv, blk.N.ffn_gate_up: fused projections, split before use
//   blk.N.attn_q_a, attn_q_a_norm, attn_q_b, attn_kv_a_mqa, attn_kv_a_norm, attn_kv_b (attn_k_b, attn_v_b),
//   ffn_{gate,up,down}_shexp, exp_probs_b.bias: DeepSeek's latent attention, shared experts and choice bias
//
// Expert tensors are stacked: blk.N.ffn_gate_exps is [experts, expert_ffn, hidden]. Hugging Face MoE
// checkpoints store one tensor per expert (mlp.experts.E.gate_proj); canonicalize() stacks them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loader/quant_tensor.hpp"
#include "qrt/status.hpp"

namespace qrt::names {

inline constexpr std::string_view kTokenEmbd = "token_embd";
inline constexpr std::string_view kOutputNorm = "output_norm";
inline constexpr std::string_view kOutput = "output";
inline constexpr std::string_view kRopeFreqs = "rope_freqs";
// LongRoPE's per-pair divisors in GGUF (llama.cpp's phi3): [rot_dim / 2] each.
inline constexpr std::string_view kRopeFactorsLong = "rope_factors_long";
inline constexpr std::string_view kRopeFactorsShort = "rope_factors_short";
inline constexpr std::string_view kBiasSuffix = ".bias";

enum class LayerTensor {
  kAttnNorm,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnOutput,
  kAttnQNorm,
  kAttnKNorm,
  kFfnNorm,
  kFfnGate,
  kFfnUp,
  kFfnDown,
  kFfnGateInp,
  kFfnGateExps,
  kFfnUpExps,
  kFfnDownExps,
  // Fused projections (Phi-3), split into the ones above when the model is built (models/fused_tensors.hpp):
  kAttnQkv,    // [q_dim + 2 kv_dim, hidden]: q, k, v rows
  kFfnGateUp,  // [2 ffn, hidden]: gate, up rows (GGUF stores it as ffn_up of 2 ffn rows)
  // Gemma's post-norms on the attention and MLP outputs, before the residual adds.
  kAttnPostNorm,
  kFfnPostNorm,
  kAttnSinks,  // gpt-oss: one logit per query head [heads]
  // DeepSeek's latent attention (ModelConfig::kv_lora_rank): q through a low rank (q_a, its norm, q_b), the latent
  // and the shared RoPE key (kv_a_mqa), the latent's norm, its per-head expansion to keys and values (kv_b; newer
  // llama.cpp files split it into k_b [heads, kv_lora, nope] and v_b [heads, v, kv_lora]).
  kAttnQA,
  kAttnQANorm,
  kAttnQB,
  kAttnKvAMqa,
  kAttnKvANorm,
  kAttnKvB,
  kAttnKB,
  kAttnVB,
  // Shared experts (a dense MLP beside the routed ones) and the router's choice bias (exp_probs_b.bias).
  kFfnGateShexp,
  kFfnUpShexp,
  kFfnDownShexp,
  kExpProbsB,
};

// "attn_q", "ffn_gate_exps", ...
std::string_view layer_tensor_suffix(LayerTensor t);
// "blk.3.attn_q"
std::string layer_tensor(int layer, LayerTensor t);
// "blk.3.attn_q.bias"
std::string bias_of(std::string_view weight_name);

// Where a file tensor goes: a canonical name, and for one expert's slice of a stacked tensor, its index.
struct CanonicalName {
  std::string name;
  int expert = -1;  // >= 0: expert slice of the stacked tensor `name`
  bool operator==(const CanonicalName&) const = default;
};

// Hugging Face names (model.layers.N.self_attn.q_proj.weight, model.embed_tokens.weight, lm_head.weight,
// model.norm.weight, mlp.experts.E.{gate,up,down}_proj / block_sparse_moe.experts.E.w{1,3,2}, and the stacked
// <experts>.{gate,up,down}_proj of UQFF exports ...).
// nullopt for names the transformer does not use (e.g. rotary_emb.inv_freq).
// `sandwich_norms`: the checkpoint norms each block before and after (Gemma: input_layernorm,
// post_attention_layernorm, pre_feedforward_layernorm, post_feedforward_layernorm), so post_attention_layernorm is
// the attention output's post-norm, not the MLP's input norm as in llama.
std::optional<CanonicalName> canonical_from_hf(std::string_view hf_name, bool sandwich_norms = false);
// Whether a Hugging Face checkpoint's names are Gemma's sandwich norms (it has a pre_feedforward_layernorm).
bool has_sandwich_norms(const TensorTable& hf_tensors);

// GGUF names (blk.N.attn_q.weight, token_embd.weight, ...; legacy per-expert blk.N.ffn_gate.E.weight).
std::optional<CanonicalName> canonical_from_gguf(std::string_view gguf_name);

enum class NameScheme { kHuggingFace, kGguf };

// A table keyed by canonical names. Each QuantTensor keeps its file name for error messages. Stacked expert
// tensors built here own their bytes through `storage`, which must outlive the table's spans.
struct CanonicalTensors {
  TensorTable tensors;
  std::vector<std::shared_ptr<const std::vector<uint8_t>>> storage;
  std::vector<std::string> ignored;  // file tensors with no canonical name
};

// Renames every tensor of `source` and stacks per-expert tensors into [experts, out, in] (all experts of one
// tensor must be present, with the same format, shape and params). Stacking copies the packed parts
// unchanged, expert after expert, which is the layout of a stacked tensor for every format whose parts are
// row-major. A source that already presents experts stacked (GGUF ffn_*_exps) is passed through.
Result<CanonicalTensors> canonicalize(const TensorTable& source, NameScheme scheme);

// The Hugging Face (and UQFF) name of a canonical tensor ("blk.3.attn_q" -> "model.layers.3.self_attn.q_proj.weight",
// "blk.0.ffn_gate_exps" -> the stacked "model.layers.0.mlp.experts.gate_proj.weight"; biases keep ".bias"), the
// inverse of canonical_from_hf. The architecture picks its own module names: Mixtral's block_sparse_moe.gate and
// .experts, gpt-oss's mlp.router and its sink logits (self_attn.sinks, a parameter without a suffix).
std::optional<std::string> hf_from_canonical(std::string_view canonical, std::string_view architecture,
                                             bool sandwich_norms = false);

}  // namespace qrt::names
