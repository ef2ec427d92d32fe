// qwen2 (q/k/v biases), qwen3 (per-head q/k RMSNorm, explicit head_dim) and qwen3moe (q/k norm, experts with an
// optional top-k renormalization). All use half-split RoPE, in Hugging Face and GGUF files alike.
#include "models/arch/arch_rules.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

Status qwen2_from_hf(const json& j, ModelConfig* c) {
  c->attention_bias = true;  // Qwen2 always has q/k/v biases and never an o bias
  c->attention_out_bias = false;
  return hf_qwen_sliding_window(j, c);
}

Status qwen3_from_hf(const json& j, ModelConfig* c) {
  QRT_ASSIGN_OR_RETURN(c->head_dim, hf_int(j, "head_dim", 128));  // Qwen3Config's default
  c->qk_norm = true;
  QRT_ASSIGN_OR_RETURN(c->attention_bias, hf_bool(j, "attention_bias", false));
  c->attention_out_bias = c->attention_bias;
  return hf_qwen_sliding_window(j, c);
}

Status qwen3moe_from_hf(const json& j, ModelConfig* c) {
  c->qk_norm = true;
  QRT_ASSIGN_OR_RETURN(c->attention_bias, hf_bool(j, "attention_bias", false));
  c->attention_out_bias = c->attention_bias;
  QRT_ASSIGN_OR_RETURN(c->experts, hf_int(j, "num_experts", 128));
  QRT_ASSIGN_OR_RETURN(c->experts_used, hf_int(j, "num_experts_per_tok", 8));
  QRT_ASSIGN_OR_RETURN(c->expert_ffn, hf_int(j, "moe_intermediate_size", 768));
  QRT_ASSIGN_OR_RETURN(c->normalize_topk, hf_bool(j, "norm_topk_prob", false));
  // Dense layers mixed among MoE layers cannot be expressed by one ModelConfig.
  QRT_ASSIGN_OR_RETURN(int sparse_step, hf_int(j, "decoder_sparse_step", 1));
  if (sparse_step != 1)
    return unsupported("config.json: decoder_sparse_step " + std::to_string(sparse_step) + " (dense layers among MoE)");
  if (auto it = j.find("mlp_only_layers"); it != j.end() && !it->is_null() && !(it->is_array() && it->empty()))
    return unsupported("config.json: mlp_only_layers " + it->dump() + " (dense layers among MoE)");
  return hf_qwen_sliding_window(j, c);
}

Status qwen2_from_gguf(const MetadataView&, std::string_view, ModelConfig* c) {
  c->rope.layout = RopeLayout::kHalfSplit;
  c->attention_bias = true;
  c->attention_out_bias = false;
  return ok_status();
}

Status qwen3_from_gguf(const MetadataView&, std::string_view, ModelConfig* c) {
  c->rope.layout = RopeLayout::kHalfSplit;
  c->qk_norm = true;
  return ok_status();
}

}  // namespace

const std::vector<ArchRules>& qwen_family_rules() {
  static const std::vector<ArchRules> rules = {
      {"qwen2", {"qwen2"}, "qwen2", 1e-6f, 10000.0f, qwen2_from_hf, qwen2_from_gguf},
      {"qwen3", {"qwen3"}, "qwen3", 1e-6f, 10000.0f, qwen3_from_hf, qwen3_from_gguf},
      {"qwen3moe", {"qwen3_moe"}, "qwen3moe", 1e-6f, 10000.0f, qwen3moe_from_hf, qwen3_from_gguf},
  };
  return rules;
}

}  // namespace qrt::arch
