// llama (Llama 1-3.x, TinyLlama), mistral and mixtral. In GGUF all three are `llama`: Mixtral is a llama file
// with expert_count > 0, and the converter permuted the Q/K rows for interleaved RoPE (spec/ggml.md §4.3).
#include "models/arch/arch_rules.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

Status llama_from_hf(const json& j, ModelConfig* c) {
  // LlamaConfig.attention_bias puts biases on q, k, v and o alike; mlp_bias on gate, up and down.
  QRT_ASSIGN_OR_RETURN(c->attention_bias, hf_bool(j, "attention_bias", false));
  c->attention_out_bias = c->attention_bias;
  QRT_ASSIGN_OR_RETURN(c->mlp_bias, hf_bool(j, "mlp_bias", false));
  return ok_status();
}

Status mistral_from_hf(const json& j, ModelConfig* c) {
  // MistralConfig defaults the window to 4096 (v0.1); later releases write null for full attention.
  auto it = j.find("sliding_window");
  if (it == j.end()) {
    c->sliding_window = 4096;
  } else if (!it->is_null()) {
    QRT_ASSIGN_OR_RETURN(c->sliding_window, hf_int(j, "sliding_window", 0));
  }
  return ok_status();
}

Status mixtral_from_hf(const json& j, ModelConfig* c) {
  QRT_ASSIGN_OR_RETURN(c->sliding_window, hf_int(j, "sliding_window", 0));
  QRT_ASSIGN_OR_RETURN(c->experts, hf_int(j, "num_local_experts", 8));
  QRT_ASSIGN_OR_RETURN(c->experts_used, hf_int(j, "num_experts_per_tok", 2));
  c->expert_ffn = c->ffn;       // intermediate_size is each expert's width
  c->normalize_topk = true;     // Mixtral renormalizes the top-k router weights
  return ok_status();
}

Status llama_from_gguf(const MetadataView&, std::string_view, ModelConfig* c) {
  c->rope.layout = RopeLayout::kInterleaved;
  if (c->experts > 0) {
    c->architecture = "mixtral";
    c->normalize_topk = true;  // llama.cpp's llama MoE always renormalizes
  }
  return ok_status();
}

}  // namespace

const std::vector<ArchRules>& llama_family_rules() {
  static const std::vector<ArchRules> rules = {
      {"llama", {"llama"}, "llama", 1e-6f, 10000.0f, llama_from_hf, llama_from_gguf},
      {"mistral", {"mistral"}, "", 1e-6f, 10000.0f, mistral_from_hf, nullptr},
      {"mixtral", {"mixtral"}, "", 1e-5f, 1e6f, mixtral_from_hf, nullptr},
  };
  return rules;
}

}  // namespace qrt::arch
