// gpt-oss (OpenAI's open-weight MoE): biases on q, k, v and o; a learned sink logit per query head in every
// softmax; a window of sliding_window keys on alternating layers (layer_types); a router with a bias whose top-k
// logits are softmaxed (the same weights as softmax-then-renormalize, ModelConfig::normalize_topk); experts with
// biases and the clamped SwiGLU (alpha 1.702, limit swiglu_limit); YaRN RoPE, in Hugging Face without truncating
// the correction range. Hugging Face's modeling_gpt_oss is the reference semantics.
//
// GGUF (llama.cpp's "gpt-oss"): the same flags; the tensors say the rest (attn_sinks, ffn_*_exps.bias), and the
// MLP's input norm is stored as post_attention_norm (Transformer reads it as ffn_norm when no post-norms are used).
#include "models/arch/arch_rules.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

void gpt_oss_common(ModelConfig* c) {
  c->attention_bias = c->attention_out_bias = true;
  c->attention_sinks = true;
  c->router_bias = c->expert_bias = true;
  c->activation = Activation::kSwigluClamped;
  c->normalize_topk = true;
}

Status gpt_oss_from_hf(const json& j, ModelConfig* c) {
  gpt_oss_common(c);
  QRT_ASSIGN_OR_RETURN(c->attention_bias, hf_bool(j, "attention_bias", true));
  if (!c->attention_bias) return unsupported("config.json: gpt-oss without attention biases (attention_bias false)");
  QRT_ASSIGN_OR_RETURN(c->head_dim, hf_int(j, "head_dim", 64));
  QRT_ASSIGN_OR_RETURN(c->experts, hf_int(j, "num_local_experts", 128));
  QRT_ASSIGN_OR_RETURN(c->experts_used, hf_int(j, "num_experts_per_tok", 4));
  c->expert_ffn = c->ffn;  // intermediate_size is each expert's width
  QRT_ASSIGN_OR_RETURN(c->swiglu_limit, hf_float(j, "swiglu_limit", 7.0f));
  if (!(c->swiglu_limit > 0.0f)) return invalid_argument("config.json: swiglu_limit must be positive");
  return hf_window_layers(j, nullptr, 2, c);
}

Status gpt_oss_from_gguf(const MetadataView&, std::string_view, ModelConfig* c) {
  gpt_oss_common(c);
  c->rope.layout = RopeLayout::kHalfSplit;
  c->sliding_window_pattern = 2;  // llama.cpp's: the even layers windowed
  return ok_status();
}

}  // namespace

const std::vector<ArchRules>& gpt_oss_rules() {
  static const std::vector<ArchRules> rules = {
      {"gpt-oss", {"gpt_oss"}, "gpt-oss", 1e-5f, 150000.0f, gpt_oss_from_hf, gpt_oss_from_gguf},
  };
  return rules;
}

}  // namespace qrt::arch
