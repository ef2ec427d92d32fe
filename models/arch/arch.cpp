#include "models/arch/arch.hpp"

#include <cmath>
#include <limits>

#include "models/arch/arch_rules.hpp"
#include "models/tensor_names.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

std::vector<const ArchRules*> all_rules() {
  std::vector<const ArchRules*> out;
  for (const auto* family :
       {&llama_family_rules(), &qwen_family_rules(), &phi_family_rules(), &gemma_family_rules(), &gpt_oss_rules(),
                         &deepseek_family_rules()})
    for (const ArchRules& r : *family) out.push_back(&r);
  return out;
}

std::string join(const std::vector<std::string_view>& items) {
  std::string s;
  for (auto item : items) s += (s.empty() ? "" : ", ") + std::string(item);
  return s;
}

// YaRN's attention magnitude correction for a context stretched by `scale` (Peng et al.).
double yarn_mscale(double scale, double mscale = 1.0) { return scale <= 1.0 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

Status check_positive(const ModelConfig& c) {
  auto bad = [](const char* what, int v) {
    return invalid_argument(std::string("config: ") + what + " must be positive, found " + std::to_string(v));
  };
  if (c.vocab_size <= 0) return bad("vocab size", c.vocab_size);
  if (c.hidden <= 0) return bad("hidden size", c.hidden);
  if (c.layers <= 0) return bad("layer count", c.layers);
  if (c.heads <= 0) return bad("head count", c.heads);
  if (c.kv_heads <= 0) return bad("kv head count", c.kv_heads);
  if (c.head_dim <= 0) return bad("head dim", c.head_dim);
  if (c.heads % c.kv_heads != 0)
    return invalid_argument("config: " + std::to_string(c.heads) + " heads are not a multiple of " +
                            std::to_string(c.kv_heads) + " kv heads");
  if (c.experts > 0 && (c.experts_used <= 0 || c.experts_used > c.experts || c.expert_ffn <= 0))
    return invalid_argument("config: MoE with " + std::to_string(c.experts) + " experts needs 1 <= experts used (" +
                            std::to_string(c.experts_used) + ") <= experts and a positive expert FFN width");
  if (c.experts == 0 && c.ffn <= 0) return bad("FFN width", c.ffn);
  if (!(c.norm_eps > 0.0f)) return invalid_argument("config: norm epsilon must be positive");
  return ok_status();
}

// LongRoPE as Hugging Face's Phi-3 reads it: short_factor and long_factor (one divisor per rotary pair); the original
// context from the config's top level (then factor = max_position_embeddings / original) or rope_scaling; cos/sin
// scaled by attention_factor, else sqrt(1 + ln(factor) / ln(original)) when factor > 1.
Status read_hf_longrope(const json& j, const json& params, ModelConfig* c) {
  RopeConfig& r = c->rope;
  r.scaling = RopeScaling::kLongRope;
  const int pairs = r.rot_dim / 2;
  for (auto [key, out] : {std::pair{"short_factor", &r.short_factor}, std::pair{"long_factor", &r.long_factor}}) {
    auto it = params.find(key);
    if (it == params.end() || !it->is_array() || static_cast<int>(it->size()) != pairs)
      return format_error(std::string("config.json: rope_scaling.") + key + " must be a list of " +
                          std::to_string(pairs) + " numbers (one per rotary pair)");
    for (const json& v : *it) {
      if (!v.is_number() || !(v.get<double>() > 0.0) || !std::isfinite(v.get<double>()))
        return format_error(std::string("config.json: rope_scaling.") + key + " holds " + v.dump() +
                            ", not a positive number");
      out->push_back(v.get<float>());
    }
  }
  double factor = 1.0;
  if (j.contains("original_max_position_embeddings") && !j["original_max_position_embeddings"].is_null()) {
    QRT_ASSIGN_OR_RETURN(r.original_context, hf_int(j, "original_max_position_embeddings", std::nullopt));
    if (r.original_context <= 0)
      return invalid_argument("config.json: original_max_position_embeddings must be positive");
    factor = static_cast<double>(c->context_length) / r.original_context;
  } else {
    QRT_ASSIGN_OR_RETURN(r.original_context, hf_int(params, "original_max_position_embeddings", c->context_length));
    QRT_ASSIGN_OR_RETURN(float f, hf_float(params, "factor", 1.0f));
    factor = f;
  }
  if (r.original_context <= 0) return invalid_argument("config.json: LongRoPE needs a positive original context");
  r.factor = static_cast<float>(factor);
  const double attn = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(r.original_context));
  QRT_ASSIGN_OR_RETURN(r.attn_factor, hf_float(params, "attention_factor", static_cast<float>(attn)));
  return ok_status();
}

// rope_theta, rope_scaling (transformers 4.x) or rope_parameters (5.x), partial_rotary_factor.
Status read_hf_rope(const json& j, const ArchRules& rules, ModelConfig* c) {
  const json* params = nullptr;
  if (auto it = j.find("rope_parameters"); it != j.end() && it->is_object()) params = &*it;
  else if (auto it2 = j.find("rope_scaling"); it2 != j.end() && !it2->is_null()) params = &*it2;
  if (params != nullptr && !params->is_object()) return format_error("config.json: rope_scaling is not an object");

  std::optional<float> theta_in_params;
  if (params != nullptr && params->contains("rope_theta")) {
    QRT_ASSIGN_OR_RETURN(float t, hf_float(*params, "rope_theta", std::nullopt));
    theta_in_params = t;
  }
  QRT_ASSIGN_OR_RETURN(c->rope.theta, hf_float(j, "rope_theta", theta_in_params.value_or(rules.hf_default_rope_theta)));
  float partial = 1.0f;
  QRT_ASSIGN_OR_RETURN(partial, hf_float(j, "partial_rotary_factor", 1.0f));
  if (params != nullptr && params->contains("partial_rotary_factor")) {
    QRT_ASSIGN_OR_RETURN(partial, hf_float(*params, "partial_rotary_factor", 1.0f));
  }
  if (!(partial > 0.0f && partial <= 1.0f))
    return invalid_argument("config.json: partial_rotary_factor " + std::to_string(partial) + " outside (0, 1]");
  c->rope.rot_dim = static_cast<int>(c->head_dim * partial);
  c->rope.layout = RopeLayout::kHalfSplit;
  if (params == nullptr) return ok_status();

  std::string type = "default";
  for (const char* key : {"rope_type", "type"}) {
    auto it = params->find(key);
    if (it == params->end() || it->is_null()) continue;
    if (!it->is_string()) return format_error(std::string("config.json: rope_scaling.") + key + " is not a string");
    type = it->get<std::string>();
    break;
  }
  if (type == "default") return ok_status();
  if (type == "longrope" || type == "su") return read_hf_longrope(j, *params, c);
  QRT_ASSIGN_OR_RETURN(c->rope.factor, hf_float(*params, "factor", std::nullopt));
  if (!(c->rope.factor > 0.0f)) return invalid_argument("config.json: rope_scaling.factor must be positive");
  if (type == "linear") {
    c->rope.scaling = RopeScaling::kLinear;
  } else if (type == "llama3") {
    c->rope.scaling = RopeScaling::kLlama3;
    QRT_ASSIGN_OR_RETURN(c->rope.low_freq_factor, hf_float(*params, "low_freq_factor", std::nullopt));
    QRT_ASSIGN_OR_RETURN(c->rope.high_freq_factor, hf_float(*params, "high_freq_factor", std::nullopt));
    QRT_ASSIGN_OR_RETURN(c->rope.original_context, hf_int(*params, "original_max_position_embeddings", std::nullopt));
  } else if (type == "yarn") {
    // Hugging Face's YaRN: the original context defaults to max_position_embeddings; cos/sin are scaled by
    // attention_factor, else mscale / mscale_all_dim ratio, else 0.1 ln(factor) + 1.
    c->rope.scaling = RopeScaling::kYarn;
    QRT_ASSIGN_OR_RETURN(c->rope.original_context,
                         hf_int(*params, "original_max_position_embeddings", c->context_length));
    QRT_ASSIGN_OR_RETURN(c->rope.yarn_beta_fast, hf_float(*params, "beta_fast", 32.0f));
    QRT_ASSIGN_OR_RETURN(c->rope.yarn_beta_slow, hf_float(*params, "beta_slow", 1.0f));
    QRT_ASSIGN_OR_RETURN(c->rope.yarn_truncate, hf_bool(*params, "truncate", true));
    QRT_ASSIGN_OR_RETURN(float mscale, hf_float(*params, "mscale", 0.0f));
    QRT_ASSIGN_OR_RETURN(float mscale_all_dim, hf_float(*params, "mscale_all_dim", 0.0f));
    double attn = yarn_mscale(c->rope.factor);
    if (mscale != 0.0f && mscale_all_dim != 0.0f)
      attn = yarn_mscale(c->rope.factor, mscale) / yarn_mscale(c->rope.factor, mscale_all_dim);
    QRT_ASSIGN_OR_RETURN(c->rope.attn_factor, hf_float(*params, "attention_factor", static_cast<float>(attn)));
  } else {
    return unsupported("config.json: rope scaling type \"" + type +
                       "\" (supported: default, linear, llama3, yarn, longrope)");
  }
  return ok_status();
}

// The MLP activation: hidden_activation (what Gemma's modeling code reads) before hidden_act.
Status read_hf_activation(const json& j, ModelConfig* c) {
  for (const char* key : {"hidden_activation", "hidden_act"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    const std::string name = it->is_string() ? it->get<std::string>() : it->dump();
    if (name == "silu" || name == "swish") {
      c->activation = Activation::kSilu;
    } else if (name == "gelu_pytorch_tanh" || name == "gelu_new" || name == "gelu_fast") {
      c->activation = Activation::kGeluTanh;  // all three are the tanh approximation
    } else {
      return unsupported(std::string("config.json: ") + key + " " + it->dump() +
                         " (supported: silu, gelu_pytorch_tanh)");
    }
    return ok_status();
  }
  return ok_status();
}

Status read_hf_token_ids(const json& j, ModelConfig* c) {
  QRT_ASSIGN_OR_RETURN(c->bos_token_id, hf_int(j, "bos_token_id", -1));
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return ok_status();
  if (it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_number_integer()) return format_error("config.json: eos_token_id list holds a non-integer");
      const int id = (*it)[i].get<int>();
      if (i == 0) c->eos_token_id = id;
      else c->extra_eos_token_ids.push_back(id);
    }
    return ok_status();
  }
  QRT_ASSIGN_OR_RETURN(c->eos_token_id, hf_int(j, "eos_token_id", -1));
  return ok_status();
}

// Gemma 3's multimodal checkpoints (gemma-3-4b and larger): the text model's config under text_config, which leaves
// out what equals Gemma3TextConfig's defaults; token ids at the top level win. The vision tower is not run (its
// tensors are ignored, tensor_names.hpp).
Result<ModelConfig> gemma3_text_of_multimodal(const json& j) {
  auto it = j.find("text_config");
  if (it == j.end() || !it->is_object())
    return format_error("config.json: a multimodal gemma3 config without a text_config object");
  json text = *it;
  const json defaults = {{"vocab_size", 262208},      {"hidden_size", 2304},           {"intermediate_size", 9216},
                         {"num_hidden_layers", 26},    {"num_attention_heads", 8},      {"num_key_value_heads", 4},
                         {"head_dim", 256},            {"max_position_embeddings", 131072}, {"rms_norm_eps", 1e-6},
                         {"rope_theta", 1000000.0},    {"bos_token_id", 2},             {"eos_token_id", 1}};
  for (const auto& [key, value] : defaults.items())
    if (!text.contains(key)) text[key] = value;
  for (const char* key : {"bos_token_id", "eos_token_id"})
    if (j.contains(key) && !j[key].is_null()) text[key] = j[key];
  text["model_type"] = "gemma3_text";
  return config_from_hf(text);
}

}  // namespace

// ---- shared field readers -----------------------------------------------------------------------------------

Result<int> hf_int(const json& j, const char* key, std::optional<int> fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    return not_found(std::string("config.json: required key \"") + key + "\" is missing");
  }
  if (!it->is_number_integer())
    return format_error(std::string("config.json: \"") + key + "\" should be an integer, found " + it->dump());
  const int64_t v = it->get<int64_t>();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    return out_of_range(std::string("config.json: \"") + key + "\" = " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

Result<float> hf_float(const json& j, const char* key, std::optional<float> fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (fallback) return *fallback;
    return not_found(std::string("config.json: required key \"") + key + "\" is missing");
  }
  if (!it->is_number()) return format_error(std::string("config.json: \"") + key + "\" should be a number, found " + it->dump());
  const double v = it->get<double>();
  if (!std::isfinite(v)) return format_error(std::string("config.json: \"") + key + "\" is not finite");
  return static_cast<float>(v);
}

Result<bool> hf_bool(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return format_error(std::string("config.json: \"") + key + "\" should be a boolean, found " + it->dump());
  return it->get<bool>();
}

Status hf_qwen_sliding_window(const json& j, ModelConfig* c) {
  QRT_ASSIGN_OR_RETURN(bool use, hf_bool(j, "use_sliding_window", false));
  if (!use) return ok_status();
  QRT_ASSIGN_OR_RETURN(int window, hf_int(j, "sliding_window", 4096));
  QRT_ASSIGN_OR_RETURN(int max_window_layers, hf_int(j, "max_window_layers", 28));
  if (max_window_layers >= c->layers) return ok_status();  // every layer is below the switch: full attention
  if (max_window_layers > 0)
    return unsupported("config.json: sliding window on layers " + std::to_string(max_window_layers) +
                       " and above only (max_window_layers); one window for all layers is supported");
  c->sliding_window = window;
  return ok_status();
}

Result<uint32_t> gguf_uniform_u32(const MetadataView& m, const std::string& key, std::optional<uint32_t> fallback) {
  if (!m.has(key)) {
    if (fallback) return *fallback;
    return not_found("GGUF metadata: required key " + key + " is missing");
  }
  if (!m.is_array(key)) return m.get_u32(key);
  QRT_ASSIGN_OR_RETURN(std::vector<uint32_t> values, m.get_u32_array(key));
  if (values.empty()) return format_error("GGUF metadata: " + key + " is an empty array");
  for (uint32_t v : values)
    if (v != values[0])
      return unsupported("GGUF metadata: " + key + " differs between layers (" + std::to_string(values[0]) + " vs " +
                         std::to_string(v) + ")");
  return values[0];
}

// ---- Hugging Face -------------------------------------------------------------------------------------------

Result<ModelConfig> config_from_hf(const json& j) {
  if (!j.is_object()) return format_error("config.json: not a JSON object");
  auto mt = j.find("model_type");
  if (mt == j.end() || !mt->is_string()) return not_found("config.json: no \"model_type\" string");
  const std::string model_type = mt->get<std::string>();
  const ArchRules* rules = nullptr;
  for (const ArchRules* r : all_rules())
    for (auto t : r->hf_model_types)
      if (t == model_type) rules = r;
  if (model_type == "gemma3") return gemma3_text_of_multimodal(j);
  if (rules == nullptr)
    return unsupported("config.json: model_type \"" + model_type + "\" (supported: " + join(supported_hf_model_types()) +
                       ")");
  ModelConfig c;
  c.architecture = std::string(rules->name);
  QRT_ASSIGN_OR_RETURN(c.vocab_size, hf_int(j, "vocab_size", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c.hidden, hf_int(j, "hidden_size", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c.layers, hf_int(j, "num_hidden_layers", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c.heads, hf_int(j, "num_attention_heads", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c.kv_heads, hf_int(j, "num_key_value_heads", c.heads));
  if (c.heads <= 0) return invalid_argument("config.json: num_attention_heads must be positive");
  QRT_ASSIGN_OR_RETURN(c.head_dim, hf_int(j, "head_dim", c.hidden / c.heads));
  QRT_ASSIGN_OR_RETURN(c.ffn, hf_int(j, "intermediate_size", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c.context_length, hf_int(j, "max_position_embeddings", 0));
  QRT_ASSIGN_OR_RETURN(c.norm_eps, hf_float(j, "rms_norm_eps", rules->hf_default_norm_eps));
  QRT_ASSIGN_OR_RETURN(c.tied_embeddings, hf_bool(j, "tie_word_embeddings", false));
  QRT_TRY(read_hf_activation(j, &c));
  QRT_TRY(read_hf_token_ids(j, &c));
  // Architecture fields first (they may set head_dim), then RoPE, which depends on head_dim.
  QRT_TRY(rules->from_hf(j, &c));
  QRT_TRY(read_hf_rope(j, *rules, &c));
  QRT_TRY(finish_deepseek_rope(j, &c));
  QRT_TRY(check_positive(c));
  return c;
}

// ---- GGUF ---------------------------------------------------------------------------------------------------

Result<ModelConfig> config_from_gguf(const MetadataView& m) {
  QRT_ASSIGN_OR_RETURN(std::string arch, m.get_string("general.architecture"));
  const ArchRules* rules = nullptr;
  for (const ArchRules* r : all_rules())
    if (!r->gguf_architecture.empty() && r->gguf_architecture == arch) rules = r;
  if (rules == nullptr)
    return unsupported("GGUF general.architecture \"" + arch + "\" (supported: " +
                       join(supported_gguf_architectures()) + ")");
  const std::string p = arch + ".";
  ModelConfig c;
  c.architecture = std::string(rules->name);
  auto u32 = [&](const std::string& key, std::optional<uint32_t> fallback) -> Result<int> {
    QRT_ASSIGN_OR_RETURN(uint32_t v, gguf_uniform_u32(m, key, fallback));
    if (v > static_cast<uint32_t>(std::numeric_limits<int>::max()))
      return out_of_range("GGUF metadata: " + key + " = " + std::to_string(v) + " is out of range");
    return static_cast<int>(v);
  };
  auto f32 = [&](const std::string& key, std::optional<float> fallback) -> Result<float> {
    if (!m.has(key)) {
      if (fallback) return *fallback;
      return not_found("GGUF metadata: required key " + key + " is missing");
    }
    return m.get_f32(key);
  };
  QRT_ASSIGN_OR_RETURN(c.layers, u32(p + "block_count", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c.hidden, u32(p + "embedding_length", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c.context_length, u32(p + "context_length", 0));
  QRT_ASSIGN_OR_RETURN(c.heads, u32(p + "attention.head_count", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c.kv_heads, u32(p + "attention.head_count_kv", static_cast<uint32_t>(c.heads)));
  if (c.heads <= 0) return invalid_argument("GGUF metadata: " + p + "attention.head_count must be positive");
  QRT_ASSIGN_OR_RETURN(c.head_dim, u32(p + "attention.key_length", static_cast<uint32_t>(c.hidden / c.heads)));
  QRT_ASSIGN_OR_RETURN(int value_dim, u32(p + "attention.value_length", static_cast<uint32_t>(c.head_dim)));
  if (value_dim != c.head_dim && !m.has(p + "attention.kv_lora_rank"))  // latent attention: its rules say
    return unsupported("GGUF metadata: value_length " + std::to_string(value_dim) + " differs from key_length " +
                       std::to_string(c.head_dim));
  QRT_ASSIGN_OR_RETURN(c.experts, u32(p + "expert_count", 0));
  QRT_ASSIGN_OR_RETURN(c.ffn, u32(p + "feed_forward_length", c.experts > 0 ? std::optional<uint32_t>(0) : std::nullopt));
  if (c.experts > 0) {
    QRT_ASSIGN_OR_RETURN(c.experts_used, u32(p + "expert_used_count", std::nullopt));
    QRT_ASSIGN_OR_RETURN(c.expert_ffn, u32(p + "expert_feed_forward_length", static_cast<uint32_t>(c.ffn)));
    if (m.has(p + "expert_weights_norm")) {
      QRT_ASSIGN_OR_RETURN(c.normalize_topk, m.get_bool(p + "expert_weights_norm"));
    }
  }
  QRT_ASSIGN_OR_RETURN(c.norm_eps, f32(p + "attention.layer_norm_rms_epsilon", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c.sliding_window, u32(p + "attention.sliding_window", 0));

  // RoPE.
  QRT_ASSIGN_OR_RETURN(c.rope.theta, f32(p + "rope.freq_base", 10000.0f));
  QRT_ASSIGN_OR_RETURN(c.rope.rot_dim, u32(p + "rope.dimension_count", static_cast<uint32_t>(c.head_dim)));
  std::string scaling = "none";
  if (m.has(p + "rope.scaling.type")) {
    QRT_ASSIGN_OR_RETURN(scaling, m.get_string(p + "rope.scaling.type"));
  }
  float factor = 1.0f;
  if (m.has(p + "rope.scaling.factor")) {
    QRT_ASSIGN_OR_RETURN(factor, m.get_f32(p + "rope.scaling.factor"));
  } else if (m.has(p + "rope.scale_linear")) {  // legacy key, linear scaling implied
    QRT_ASSIGN_OR_RETURN(factor, m.get_f32(p + "rope.scale_linear"));
    if (scaling == "none" && factor != 1.0f) scaling = "linear";
  }
  c.rope.factor = factor;
  if (scaling == "linear") {
    c.rope.scaling = RopeScaling::kLinear;
  } else if (scaling == "yarn") {
    // llama.cpp multiplies rope.scaling.attn_factor by YaRN's 0.1 ln(factor) + 1 correction.
    c.rope.scaling = RopeScaling::kYarn;
    QRT_ASSIGN_OR_RETURN(c.rope.original_context, u32(p + "rope.scaling.original_context_length", std::nullopt));
    QRT_ASSIGN_OR_RETURN(c.rope.yarn_beta_fast, f32(p + "rope.scaling.yarn_beta_fast", 32.0f));
    QRT_ASSIGN_OR_RETURN(c.rope.yarn_beta_slow, f32(p + "rope.scaling.yarn_beta_slow", 1.0f));
    QRT_ASSIGN_OR_RETURN(float attn, f32(p + "rope.scaling.attn_factor", 1.0f));
    c.rope.attn_factor = static_cast<float>(attn * yarn_mscale(factor));
  } else if (scaling != "none") {
    return unsupported("GGUF metadata: " + p + "rope.scaling.type \"" + scaling + "\" (supported: none, linear, yarn)");
  }
  if (c.rope.scaling != RopeScaling::kNone && !(factor > 0.0f))
    return invalid_argument("GGUF metadata: rope scaling factor must be positive");

  // Vocabulary: the explicit key, else the token list's length.
  if (m.has(p + "vocab_size")) {
    QRT_ASSIGN_OR_RETURN(c.vocab_size, u32(p + "vocab_size", std::nullopt));
  } else if (m.has("tokenizer.ggml.tokens")) {
    QRT_ASSIGN_OR_RETURN(uint64_t n, m.get_array_length("tokenizer.ggml.tokens"));
    if (n > static_cast<uint64_t>(std::numeric_limits<int>::max()))
      return out_of_range("GGUF metadata: tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
    c.vocab_size = static_cast<int>(n);
  } else {
    return not_found("GGUF metadata: neither " + p + "vocab_size nor tokenizer.ggml.tokens gives the vocabulary size");
  }
  if (m.has("tokenizer.ggml.bos_token_id")) {
    QRT_ASSIGN_OR_RETURN(uint32_t bos, m.get_u32("tokenizer.ggml.bos_token_id"));
    c.bos_token_id = static_cast<int>(bos);
  }
  if (m.has("tokenizer.ggml.eos_token_id")) {
    QRT_ASSIGN_OR_RETURN(uint32_t eos, m.get_u32("tokenizer.ggml.eos_token_id"));
    c.eos_token_id = static_cast<int>(eos);
  }
  QRT_TRY(rules->from_gguf(m, p, &c));
  QRT_TRY(check_positive(c));
  return c;
}

void apply_tensor_presence(const TensorTable& t, ModelConfig* c) {
  using names::LayerTensor;
  auto has = [&](const std::string& name) { return t.count(name) != 0; };
  auto bias = [&](LayerTensor x) { return has(names::bias_of(names::layer_tensor(0, x))); };
  c->attention_bias = bias(LayerTensor::kAttnQ);
  c->attention_out_bias = bias(LayerTensor::kAttnOutput);
  c->mlp_bias = bias(LayerTensor::kFfnGate) || bias(LayerTensor::kFfnDown);
  c->qk_norm = has(names::layer_tensor(0, LayerTensor::kAttnQNorm));
  // DeepSeek-V3's choice bias (exp_probs_b.bias) in its first MoE layer.
  c->expert_choice_bias = c->experts > 0 && has(names::bias_of(names::layer_tensor(
                                                c->leading_dense_layers, LayerTensor::kExpProbsB)));
  c->tied_embeddings = !has(std::string(names::kOutput));
  // LongRoPE travels as two factor tensors in GGUF (read by the transformer); the metadata has no scaling type.
  if (has(std::string(names::kRopeFactorsLong)) && has(std::string(names::kRopeFactorsShort)))
    c->rope.scaling = RopeScaling::kLongRope;
}

std::vector<std::string_view> supported_hf_model_types() {
  std::vector<std::string_view> out;
  for (const ArchRules* r : all_rules()) out.insert(out.end(), r->hf_model_types.begin(), r->hf_model_types.end());
  return out;
}

std::vector<std::string_view> supported_gguf_architectures() {
  std::vector<std::string_view> out;
  for (const ArchRules* r : all_rules())
    if (!r->gguf_architecture.empty()) out.push_back(r->gguf_architecture);
  return out;
}

// ---- JsonMetadataView ---------------------------------------------------------------------------------------

Result<const json*> JsonMetadataView::find(std::string_view key) const {
  auto it = object_.find(std::string(key));
  if (it == object_.end()) return not_found("metadata key " + std::string(key) + " is missing");
  return &*it;
}

bool JsonMetadataView::has(std::string_view key) const { return object_.contains(std::string(key)); }

bool JsonMetadataView::is_array(std::string_view key) const {
  auto it = object_.find(std::string(key));
  return it != object_.end() && it->is_array();
}

Result<uint32_t> JsonMetadataView::get_u32(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const json* v, find(key));
  if (v->is_boolean()) return static_cast<uint32_t>(v->get<bool>());
  if (!v->is_number_integer() || v->get<int64_t>() < 0 || v->get<int64_t>() > 0xFFFFFFFFll)
    return format_error("metadata key " + std::string(key) + ": expected an unsigned 32-bit integer, found " + v->dump());
  return static_cast<uint32_t>(v->get<int64_t>());
}

Result<float> JsonMetadataView::get_f32(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const json* v, find(key));
  if (!v->is_number()) return format_error("metadata key " + std::string(key) + ": expected a number, found " + v->dump());
  return v->get<float>();
}

Result<bool> JsonMetadataView::get_bool(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const json* v, find(key));
  if (!v->is_boolean()) return format_error("metadata key " + std::string(key) + ": expected a boolean, found " + v->dump());
  return v->get<bool>();
}

Result<std::string> JsonMetadataView::get_string(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const json* v, find(key));
  if (!v->is_string()) return format_error("metadata key " + std::string(key) + ": expected a string, found " + v->dump());
  return v->get<std::string>();
}

Result<std::vector<uint32_t>> JsonMetadataView::get_u32_array(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const json* v, find(key));
  if (!v->is_array()) return format_error("metadata key " + std::string(key) + ": expected an array");
  std::vector<uint32_t> out;
  for (const json& e : *v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > 0xFFFFFFFFll)
      return format_error("metadata key " + std::string(key) + ": array element " + e.dump() + " is not a u32");
    out.push_back(static_cast<uint32_t>(e.get<int64_t>()));
  }
  return out;
}

Result<uint64_t> JsonMetadataView::get_array_length(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const json* v, find(key));
  if (!v->is_array()) return format_error("metadata key " + std::string(key) + ": expected an array");
  return static_cast<uint64_t>(v->size());
}

}  // namespace qrt::arch
