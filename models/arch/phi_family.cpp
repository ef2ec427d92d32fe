// phi3 (Phi-3 and Phi-3.5 mini/medium): the llama layout with q, k and v fused into one qkv_proj and gate/up into
// one gate_up_proj (split into the canonical tensors when the model is built: models/fused_tensors.hpp), LongRoPE
// scaling for the 128k-context variants, and a sliding window on some. In GGUF (llama.cpp's "phi3"): attn_qkv and a
// fused ffn_up of 2 * feed_forward_length rows, the LongRoPE factors as rope_factors_long / rope_factors_short
// tensors, rope.scaling.original_context_length and rope.scaling.attn_factor.
#include "models/arch/arch_rules.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

Status phi3_from_hf(const json& j, ModelConfig* c) {
  // Phi3Config: no biases, RMSNorm eps 1e-5; sliding_window null (full) or a window for every layer.
  auto it = j.find("sliding_window");
  if (it != j.end() && !it->is_null()) {
    QRT_ASSIGN_OR_RETURN(c->sliding_window, hf_int(j, "sliding_window", 0));
  }
  return ok_status();
}

Status phi3_from_gguf(const MetadataView& m, std::string_view prefix, ModelConfig* c) {
  const std::string p(prefix);
  if (m.has(p + "rope.scaling.original_context_length")) {
    QRT_ASSIGN_OR_RETURN(uint32_t original, m.get_u32(p + "rope.scaling.original_context_length"));
    c->rope.original_context = static_cast<int>(original);
    if (original > 0) c->rope.factor = static_cast<float>(static_cast<double>(c->context_length) / original);
  }
  if (m.has(p + "rope.scaling.attn_factor")) {
    QRT_ASSIGN_OR_RETURN(c->rope.attn_factor, m.get_f32(p + "rope.scaling.attn_factor"));
  }
  return ok_status();
}

}  // namespace

const std::vector<ArchRules>& phi_family_rules() {
  static const std::vector<ArchRules> rules = {
      {"phi3", {"phi3"}, "phi3", 1e-5f, 10000.0f, phi3_from_hf, phi3_from_gguf},
  };
  return rules;
}

}  // namespace qrt::arch
