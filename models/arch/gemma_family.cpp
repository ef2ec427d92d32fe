// gemma2 and gemma3 (text): the llama layout with embeddings scaled by sqrt(hidden), RMSNorm weights applied as
// (1 + w), norms after the attention and the MLP as well as before, GeGLU with the tanh GELU, q·k scaled by
// query_pre_attn_scalar^-1/2 and windowed attention on some layers (gemma2: every other layer, with soft-capped
// attention scores and final logits; gemma3: five local layers to one global, local layers on their own unscaled
// RoPE base, q/k norms). Hugging Face's modeling_gemma2 / modeling_gemma3 are the reference semantics.
//
// GGUF (llama.cpp's "gemma2" / "gemma3"): the converter stored every norm as 1 + w, so the offset is 0 there; it
// records neither query_pre_attn_scalar nor the window pattern, which llama.cpp derives as below (the 27B models,
// 46 and 62 layers, scale by hidden / heads, the others by head_dim; patterns 2 and 6; local RoPE base 10000).
#include <cmath>

#include "models/arch/arch_rules.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

// What every Gemma shares, whatever the source.
void gemma_common(ModelConfig* c) {
  c->embedding_scale = std::sqrt(static_cast<float>(c->hidden));
  c->post_norms = true;
}

// A soft-capping value: null = off, absent = the config class's default.
Result<float> hf_softcap(const json& j, const char* key, float fallback) {
  if (j.contains(key) && j[key].is_null()) return 0.0f;
  QRT_ASSIGN_OR_RETURN(float cap, hf_float(j, key, fallback));
  if (cap < 0.0f) return invalid_argument(std::string("config.json: ") + key + " must not be negative");
  return cap;
}

Status gemma_from_hf(const json& j, ModelConfig* c, bool gemma3) {
  gemma_common(c);
  // The activation config.json names was read already; Gemma's default when it names none.
  auto named = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  if (!named("hidden_activation") && !named("hidden_act")) c->activation = Activation::kGeluTanh;
  c->norm_weight_offset = 1.0f;
  QRT_ASSIGN_OR_RETURN(c->tied_embeddings, hf_bool(j, "tie_word_embeddings", true));  // Gemma's default
  QRT_ASSIGN_OR_RETURN(c->head_dim, hf_int(j, "head_dim", 256));
  QRT_ASSIGN_OR_RETURN(c->attention_bias, hf_bool(j, "attention_bias", false));
  c->attention_out_bias = c->attention_bias;
  QRT_ASSIGN_OR_RETURN(float scalar, hf_float(j, "query_pre_attn_scalar", 256.0f));
  if (!(scalar > 0.0f)) return invalid_argument("config.json: query_pre_attn_scalar must be positive");
  c->attention_scale = 1.0f / std::sqrt(scalar);
  QRT_ASSIGN_OR_RETURN(c->attn_softcap, hf_softcap(j, "attn_logit_softcapping", gemma3 ? 0.0f : 50.0f));
  QRT_ASSIGN_OR_RETURN(c->final_softcap, hf_softcap(j, "final_logit_softcapping", gemma3 ? 0.0f : 30.0f));
  if (!gemma3) return hf_window_layers(j, nullptr, 2, c);
  c->qk_norm = true;
  QRT_ASSIGN_OR_RETURN(c->rope_local_theta, hf_float(j, "rope_local_base_freq", 10000.0f));
  if (!(c->rope_local_theta > 0.0f)) return invalid_argument("config.json: rope_local_base_freq must be positive");
  return hf_window_layers(j, "sliding_window_pattern", 6, c);
}

Status gemma2_from_hf(const json& j, ModelConfig* c) { return gemma_from_hf(j, c, false); }
Status gemma3_from_hf(const json& j, ModelConfig* c) { return gemma_from_hf(j, c, true); }

Status gemma_from_gguf(const MetadataView& m, std::string_view prefix, ModelConfig* c, bool gemma3) {
  const std::string p(prefix);
  gemma_common(c);
  c->activation = Activation::kGeluTanh;
  c->rope.layout = RopeLayout::kHalfSplit;
  const bool is_27b = c->layers == (gemma3 ? 62 : 46);
  c->attention_scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? c->hidden / c->heads : c->head_dim));
  c->sliding_window_pattern = gemma3 ? 6 : 2;
  if (m.has(p + "attention.sliding_window_pattern")) {
    QRT_ASSIGN_OR_RETURN(uint32_t pattern, m.get_u32(p + "attention.sliding_window_pattern"));
    c->sliding_window_pattern = static_cast<int>(pattern);
  }
  if (gemma3) {
    c->rope_local_theta = 10000.0f;
    return ok_status();
  }
  c->attn_softcap = 50.0f;
  c->final_softcap = 30.0f;
  if (m.has(p + "attn_logit_softcapping")) {
    QRT_ASSIGN_OR_RETURN(c->attn_softcap, m.get_f32(p + "attn_logit_softcapping"));
  }
  if (m.has(p + "final_logit_softcapping")) {
    QRT_ASSIGN_OR_RETURN(c->final_softcap, m.get_f32(p + "final_logit_softcapping"));
  }
  if (c->attn_softcap < 0.0f || c->final_softcap < 0.0f)
    return invalid_argument("GGUF metadata: " + p + "*_logit_softcapping must not be negative");
  return ok_status();
}

Status gemma2_from_gguf(const MetadataView& m, std::string_view prefix, ModelConfig* c) {
  return gemma_from_gguf(m, prefix, c, false);
}
Status gemma3_from_gguf(const MetadataView& m, std::string_view prefix, ModelConfig* c) {
  return gemma_from_gguf(m, prefix, c, true);
}

}  // namespace

Status hf_window_layers(const json& j, const char* pattern_key, int default_pattern, ModelConfig* c) {
  QRT_ASSIGN_OR_RETURN(c->sliding_window, hf_int(j, "sliding_window", 4096));
  auto types = j.find("layer_types");
  if (types == j.end() || types->is_null()) {
    c->sliding_window_pattern = default_pattern;
    if (pattern_key != nullptr) {
      QRT_ASSIGN_OR_RETURN(c->sliding_window_pattern, hf_int(j, pattern_key, default_pattern));
    }
    if (c->sliding_window_pattern < 0)
      return invalid_argument(std::string("config.json: ") + pattern_key + " must not be negative");
    return ok_status();
  }
  if (!types->is_array() || static_cast<int>(types->size()) != c->layers)
    return format_error("config.json: layer_types must list one type per layer (" + std::to_string(c->layers) + ")");
  std::vector<bool> global;
  for (const json& t : *types) {
    if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
      return format_error("config.json: layer_types holds " + t.dump() +
                          " (expected \"sliding_attention\" or \"full_attention\")");
    global.push_back(t == "full_attention");
  }
  int first_global = 0;
  while (first_global < c->layers && !global[static_cast<size_t>(first_global)]) ++first_global;
  if (first_global == c->layers) {  // every layer windowed
    c->sliding_window_pattern = 0;
    return ok_status();
  }
  const int pattern = first_global + 1;
  for (int l = 0; l < c->layers; ++l)
    if (global[static_cast<size_t>(l)] != ((l + 1) % pattern == 0))
      return unsupported("config.json: layer_types " + types->dump() + " (supported: one global layer every n)");
  c->sliding_window_pattern = pattern;
  if (pattern == 1) c->sliding_window = 0;  // every layer global
  return ok_status();
}

const std::vector<ArchRules>& gemma_family_rules() {
  static const std::vector<ArchRules> rules = {
      {"gemma2", {"gemma2"}, "gemma2", 1e-6f, 10000.0f, gemma2_from_hf, gemma2_from_gguf},
      {"gemma3", {"gemma3_text"}, "gemma3", 1e-6f, 1000000.0f, gemma3_from_hf, gemma3_from_gguf},
  };
  return rules;
}

}  // namespace qrt::arch
