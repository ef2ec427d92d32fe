#include "models/tensor_names.hpp"

#include "models/gpt_oss_experts.hpp"

#include <array>
#include <cstring>
#include <map>
#include <set>
#include <utility>

namespace qrt::names {
namespace {

struct SuffixEntry {
  LayerTensor tensor;
  std::string_view suffix;
};

constexpr std::array<SuffixEntry, 32> kLayerSuffixes = {{
    {LayerTensor::kAttnNorm, "attn_norm"},
    {LayerTensor::kAttnQ, "attn_q"},
    {LayerTensor::kAttnK, "attn_k"},
    {LayerTensor::kAttnV, "attn_v"},
    {LayerTensor::kAttnOutput, "attn_output"},
    {LayerTensor::kAttnQNorm, "attn_q_norm"},
    {LayerTensor::kAttnKNorm, "attn_k_norm"},
    {LayerTensor::kFfnNorm, "ffn_norm"},
    {LayerTensor::kFfnGate, "ffn_gate"},
    {LayerTensor::kFfnUp, "ffn_up"},
    {LayerTensor::kFfnDown, "ffn_down"},
    {LayerTensor::kFfnGateInp, "ffn_gate_inp"},
    {LayerTensor::kFfnGateExps, "ffn_gate_exps"},
    {LayerTensor::kFfnUpExps, "ffn_up_exps"},
    {LayerTensor::kFfnDownExps, "ffn_down_exps"},
    {LayerTensor::kAttnQkv, "attn_qkv"},
    {LayerTensor::kFfnGateUp, "ffn_gate_up"},
    {LayerTensor::kAttnPostNorm, "post_attention_norm"},
    {LayerTensor::kFfnPostNorm, "post_ffw_norm"},
    {LayerTensor::kAttnSinks, "attn_sinks"},
    {LayerTensor::kAttnQA, "attn_q_a"},
    {LayerTensor::kAttnQANorm, "attn_q_a_norm"},
    {LayerTensor::kAttnQB, "attn_q_b"},
    {LayerTensor::kAttnKvAMqa, "attn_kv_a_mqa"},
    {LayerTensor::kAttnKvANorm, "attn_kv_a_norm"},
    {LayerTensor::kAttnKvB, "attn_kv_b"},
    {LayerTensor::kAttnKB, "attn_k_b"},
    {LayerTensor::kAttnVB, "attn_v_b"},
    {LayerTensor::kFfnGateShexp, "ffn_gate_shexp"},
    {LayerTensor::kFfnUpShexp, "ffn_up_shexp"},
    {LayerTensor::kFfnDownShexp, "ffn_down_shexp"},
    {LayerTensor::kExpProbsB, "exp_probs_b"},
}};

// Hugging Face module paths inside model.layers.N (without .weight/.bias).
struct HfEntry {
  std::string_view hf;
  LayerTensor tensor;
};
constexpr std::array<HfEntry, 27> kHfLayerModules = {{
    {"input_layernorm", LayerTensor::kAttnNorm},
    {"post_attention_layernorm", LayerTensor::kFfnNorm},  // kAttnPostNorm with sandwich norms
    {"pre_feedforward_layernorm", LayerTensor::kFfnNorm},  // Gemma
    {"post_feedforward_layernorm", LayerTensor::kFfnPostNorm},
    {"self_attn.q_proj", LayerTensor::kAttnQ},
    {"self_attn.k_proj", LayerTensor::kAttnK},
    {"self_attn.v_proj", LayerTensor::kAttnV},
    {"self_attn.o_proj", LayerTensor::kAttnOutput},
    {"self_attn.q_norm", LayerTensor::kAttnQNorm},
    {"self_attn.k_norm", LayerTensor::kAttnKNorm},
    {"mlp.gate_proj", LayerTensor::kFfnGate},
    {"mlp.up_proj", LayerTensor::kFfnUp},
    {"mlp.down_proj", LayerTensor::kFfnDown},
    {"mlp.gate", LayerTensor::kFfnGateInp},               // Qwen3-MoE router
    {"block_sparse_moe.gate", LayerTensor::kFfnGateInp},  // Mixtral router
    {"self_attn.qkv_proj", LayerTensor::kAttnQkv},        // Phi-3
    {"mlp.gate_up_proj", LayerTensor::kFfnGateUp},
    {"mlp.router", LayerTensor::kFfnGateInp},  // gpt-oss router (with a bias)
    {"self_attn.q_a_proj", LayerTensor::kAttnQA},  // DeepSeek
    {"self_attn.q_a_layernorm", LayerTensor::kAttnQANorm},
    {"self_attn.q_b_proj", LayerTensor::kAttnQB},
    {"self_attn.kv_a_proj_with_mqa", LayerTensor::kAttnKvAMqa},
    {"self_attn.kv_a_layernorm", LayerTensor::kAttnKvANorm},
    {"self_attn.kv_b_proj", LayerTensor::kAttnKvB},
    {"mlp.shared_experts.gate_proj", LayerTensor::kFfnGateShexp},
    {"mlp.shared_experts.up_proj", LayerTensor::kFfnUpShexp},
    {"mlp.shared_experts.down_proj", LayerTensor::kFfnDownShexp},
}};

// DeepSeek-V3's router choice bias, a parameter without a .weight / .bias suffix.
constexpr std::string_view kHfChoiceBias = "mlp.gate.e_score_correction_bias";

// Per-expert projections: "<prefix>.E.<proj>".
struct HfExpertEntry {
  std::string_view prefix;
  std::string_view proj;
  LayerTensor tensor;
};
constexpr std::array<HfExpertEntry, 6> kHfExpertModules = {{
    {"mlp.experts", "gate_proj", LayerTensor::kFfnGateExps},
    {"mlp.experts", "up_proj", LayerTensor::kFfnUpExps},
    {"mlp.experts", "down_proj", LayerTensor::kFfnDownExps},
    {"block_sparse_moe.experts", "w1", LayerTensor::kFfnGateExps},  // Mixtral: w1 gate, w3 up, w2 down
    {"block_sparse_moe.experts", "w3", LayerTensor::kFfnUpExps},
    {"block_sparse_moe.experts", "w2", LayerTensor::kFfnDownExps},
}};

// Stacked experts as mistral.rs writes them into UQFF: "<experts>.gate_proj" [experts, out, in] whatever the
// checkpoint called its per-expert tensors (spec/uqff.md §2.7 (d)).
constexpr std::array<HfEntry, 6> kHfStackedExperts = {{
    {"mlp.experts.gate_proj", LayerTensor::kFfnGateExps},
    {"mlp.experts.up_proj", LayerTensor::kFfnUpExps},
    {"mlp.experts.down_proj", LayerTensor::kFfnDownExps},
    {"block_sparse_moe.experts.gate_proj", LayerTensor::kFfnGateExps},
    {"block_sparse_moe.experts.up_proj", LayerTensor::kFfnUpExps},
    {"block_sparse_moe.experts.down_proj", LayerTensor::kFfnDownExps},
}};

bool consume(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// A decimal index followed by '.', consumed from s. Bounded so that no name can overflow it.
std::optional<int> consume_index(std::string_view& s) {
  size_t n = 0;
  while (n < s.size() && s[n] >= '0' && s[n] <= '9') ++n;
  if (n == 0 || n > 6 || n == s.size() || s[n] != '.') return std::nullopt;
  if (n > 1 && s[0] == '0') return std::nullopt;  // "01" is not an index
  int v = 0;
  for (size_t i = 0; i < n; ++i) v = v * 10 + (s[i] - '0');
  s.remove_prefix(n + 1);
  return v;
}

// Splits "<base>.weight" / "<base>.bias"; nullopt for anything else.
std::optional<std::pair<std::string_view, bool>> split_param(std::string_view name) {
  constexpr std::string_view kWeight = ".weight";
  if (name.size() > kWeight.size() && name.substr(name.size() - kWeight.size()) == kWeight)
    return std::pair{name.substr(0, name.size() - kWeight.size()), false};
  if (name.size() > kBiasSuffix.size() && name.substr(name.size() - kBiasSuffix.size()) == kBiasSuffix)
    return std::pair{name.substr(0, name.size() - kBiasSuffix.size()), true};
  return std::nullopt;
}

CanonicalName make(std::string base, bool is_bias, int expert = -1) {
  if (is_bias) base += kBiasSuffix;
  return {std::move(base), expert};
}

bool same_params(const quant::QuantParams& a, const quant::QuantParams& b) {
  return a.group_size == b.group_size && a.scale_type == b.scale_type && a.global_scale == b.global_scale;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::string_view layer_tensor_suffix(LayerTensor t) {
  for (const auto& e : kLayerSuffixes)
    if (e.tensor == t) return e.suffix;
  return "?";
}

std::string layer_tensor(int layer, LayerTensor t) {
  return "blk." + std::to_string(layer) + "." + std::string(layer_tensor_suffix(t));
}

std::string bias_of(std::string_view weight_name) { return std::string(weight_name) + std::string(kBiasSuffix); }

bool has_sandwich_norms(const TensorTable& hf_tensors) {
  for (const auto& [name, tensor] : hf_tensors)
    if (name.find(".pre_feedforward_layernorm.") != std::string::npos) return true;
  return false;
}

std::optional<CanonicalName> canonical_from_hf(std::string_view hf_name, bool sandwich_norms) {
  // Gemma 3's multimodal checkpoints keep the text model under language_model. (transformers < 4.52) or
  // model.language_model. (later); the vision tower's tensors map to nothing.
  std::string text_model;
  if (std::string_view rest = hf_name; consume(rest, "language_model.")) {
    text_model = std::string(rest);
  } else if (consume(rest, "model.language_model.")) {
    text_model = "model." + std::string(rest);
  }
  if (!text_model.empty()) return canonical_from_hf(text_model, sandwich_norms);
  // gpt-oss's sink logits are a parameter without a ".weight" suffix.
  if (std::string_view rest = hf_name; consume(rest, "model.layers.")) {
    const auto layer = consume_index(rest);
    if (layer && rest == "self_attn.sinks") return make(layer_tensor(*layer, LayerTensor::kAttnSinks), false);
    if (layer && rest == kHfChoiceBias) return make(layer_tensor(*layer, LayerTensor::kExpProbsB), true);
  }
  auto split = split_param(hf_name);
  if (!split) return std::nullopt;
  auto [base, is_bias] = *split;
  if (base == "model.embed_tokens") return make(std::string(kTokenEmbd), is_bias);
  if (base == "model.norm") return make(std::string(kOutputNorm), is_bias);
  if (base == "lm_head") return make(std::string(kOutput), is_bias);
  if (!consume(base, "model.layers.")) return std::nullopt;
  const auto layer = consume_index(base);
  if (!layer) return std::nullopt;
  if (sandwich_norms && base == "post_attention_layernorm")
    return make(layer_tensor(*layer, LayerTensor::kAttnPostNorm), is_bias);
  for (const auto& e : kHfLayerModules)
    if (base == e.hf) return make(layer_tensor(*layer, e.tensor), is_bias);
  for (const auto& e : kHfStackedExperts)
    if (base == e.hf) return make(layer_tensor(*layer, e.tensor), is_bias);
  for (const auto& e : kHfExpertModules) {
    std::string_view rest = base;
    if (!consume(rest, e.prefix) || !consume(rest, ".")) continue;
    const auto expert = consume_index(rest);
    if (expert && rest == e.proj) return make(layer_tensor(*layer, e.tensor), is_bias, *expert);
  }
  return std::nullopt;
}

std::optional<CanonicalName> canonical_from_gguf(std::string_view gguf_name) {
  auto split = split_param(gguf_name);
  if (!split) return std::nullopt;
  auto [base, is_bias] = *split;
  for (std::string_view top : {kTokenEmbd, kOutputNorm, kOutput, kRopeFreqs, kRopeFactorsLong, kRopeFactorsShort})
    if (base == top) return make(std::string(top), is_bias);
  if (!consume(base, "blk.")) return std::nullopt;
  const auto layer = consume_index(base);
  if (!layer) return std::nullopt;
  for (const auto& e : kLayerSuffixes)
    if (base == e.suffix) return make(layer_tensor(*layer, e.tensor), is_bias);
  // Legacy per-expert tensors: blk.N.ffn_gate.E / ffn_up.E / ffn_down.E.
  constexpr std::array<std::pair<std::string_view, LayerTensor>, 3> kLegacy = {{
      {"ffn_gate.", LayerTensor::kFfnGateExps},
      {"ffn_up.", LayerTensor::kFfnUpExps},
      {"ffn_down.", LayerTensor::kFfnDownExps},
  }};
  for (const auto& [prefix, tensor] : kLegacy) {
    std::string_view rest = base;
    if (!consume(rest, prefix)) continue;
    std::string with_dot = std::string(rest) + ".";
    std::string_view idx = with_dot;
    const auto expert = consume_index(idx);
    if (expert && idx.empty()) return make(layer_tensor(*layer, tensor), is_bias, *expert);
  }
  return std::nullopt;
}

Result<CanonicalTensors> canonicalize(const TensorTable& source, NameScheme scheme) {
  CanonicalTensors out;
  // canonical stacked name -> expert index -> file tensor
  std::map<std::string, std::map<int, const QuantTensor*>> expert_slices;
  const bool sandwich = scheme == NameScheme::kHuggingFace && has_sandwich_norms(source);
  std::set<std::string> converted;  // gpt-oss experts, already in out.tensors
  if (scheme == NameScheme::kHuggingFace) {
    QRT_ASSIGN_OR_RETURN(converted, canonical_gpt_oss_experts(source, &out));
  }
  for (const auto& [file_name, tensor] : source) {
    if (converted.count(file_name)) continue;
    auto canonical =
        scheme == NameScheme::kHuggingFace ? canonical_from_hf(file_name, sandwich) : canonical_from_gguf(file_name);
    if (!canonical) {
      out.ignored.push_back(file_name);
      continue;
    }
    if (canonical->expert >= 0) {
      auto& slices = expert_slices[canonical->name];
      if (!slices.emplace(canonical->expert, &tensor).second)
        return invalid_argument("tensor " + file_name + ": expert " + std::to_string(canonical->expert) + " of " +
                                canonical->name + " appears twice");
      continue;
    }
    if (out.tensors.count(canonical->name))
      return invalid_argument("tensors " + out.tensors[canonical->name].name + " and " + file_name +
                              " both map to " + canonical->name);
    out.tensors.emplace(canonical->name, tensor);
  }

  for (const auto& [name, slices] : expert_slices) {
    if (out.tensors.count(name))
      return invalid_argument(name + " is present both stacked (" + out.tensors[name].name + ") and per expert");
    const int experts = static_cast<int>(slices.size());
    if (slices.rbegin()->first != experts - 1)
      return invalid_argument(name + ": per-expert tensors are not numbered 0.." + std::to_string(experts - 1) +
                              " (highest index " + std::to_string(slices.rbegin()->first) + ")");
    const QuantTensor& first = *slices.begin()->second;
    uint64_t data_bytes = 0, scale_bytes = 0, bias_bytes = 0;
    for (const auto& [e, t] : slices) {
      if (t->format != first.format || t->shape != first.shape || !same_params(t->params, first.params) ||
          t->data.size != first.data.size || t->scales.size != first.scales.size ||
          t->biases.size != first.biases.size)
        return invalid_argument(name + ": expert tensors differ: " + first.name + " is " +
                                std::string(quant::format_name(first.format)) + " " + shape_string(first.shape) +
                                ", " + t->name + " is " + std::string(quant::format_name(t->format)) + " " +
                                shape_string(t->shape) + " (or their params / part sizes differ)");
      if (t->data.size && !t->data.data) return invalid_argument(t->name + ": null data span");
      data_bytes += t->data.size;
      scale_bytes += t->scales.size;
      bias_bytes += t->biases.size;
    }
    // One owned buffer holding [data | scales | biases], each part expert after expert.
    auto bytes = std::make_shared<std::vector<uint8_t>>();
    bytes->reserve(data_bytes + scale_bytes + bias_bytes);
    for (const auto& [e, t] : slices) bytes->insert(bytes->end(), t->data.data, t->data.data + t->data.size);
    for (const auto& [e, t] : slices)
      if (t->scales.size) bytes->insert(bytes->end(), t->scales.data, t->scales.data + t->scales.size);
    for (const auto& [e, t] : slices)
      if (t->biases.size) bytes->insert(bytes->end(), t->biases.data, t->biases.data + t->biases.size);
    QuantTensor stacked;
    stacked.name = name + " (stacked from " + first.name + " .. " + slices.rbegin()->second->name + ")";
    stacked.format = first.format;
    stacked.shape.push_back(experts);
    stacked.shape.insert(stacked.shape.end(), first.shape.begin(), first.shape.end());
    stacked.params = first.params;
    stacked.file = first.file;
    const uint8_t* base = bytes->data();
    stacked.data = {base, data_bytes};
    stacked.scales = {scale_bytes ? base + data_bytes : nullptr, scale_bytes};
    stacked.biases = {bias_bytes ? base + data_bytes + scale_bytes : nullptr, bias_bytes};
    out.storage.push_back(std::move(bytes));
    out.tensors.emplace(name, std::move(stacked));
  }
  return out;
}

std::optional<std::string> hf_from_canonical(std::string_view canonical, std::string_view architecture,
                                             bool sandwich_norms) {
  const bool mixtral = architecture == "mixtral", gpt_oss = architecture == "gpt-oss";
  std::string_view base = canonical;
  bool is_bias = false;
  if (base.size() > kBiasSuffix.size() && base.substr(base.size() - kBiasSuffix.size()) == kBiasSuffix) {
    base.remove_suffix(kBiasSuffix.size());
    is_bias = true;
  }
  const std::string tail = is_bias ? ".bias" : ".weight";
  if (base == kTokenEmbd) return "model.embed_tokens" + tail;
  if (base == kOutputNorm) return "model.norm" + tail;
  if (base == kOutput) return "lm_head" + tail;
  if (!consume(base, "blk.")) return std::nullopt;
  const auto layer = consume_index(base);
  if (!layer) return std::nullopt;
  const std::string prefix = "model.layers." + std::to_string(*layer) + ".";
  LayerTensor tensor{};
  bool found = false;
  for (const auto& e : kLayerSuffixes)
    if (base == e.suffix) {
      tensor = e.tensor;
      found = true;
    }
  if (!found) return std::nullopt;
  const std::string_view moe = mixtral ? "block_sparse_moe." : "mlp.";
  switch (tensor) {
    case LayerTensor::kFfnGateInp: return prefix + std::string(moe) + (gpt_oss ? "router" : "gate") + tail;
    case LayerTensor::kAttnSinks: return gpt_oss && !is_bias ? std::optional(prefix + "self_attn.sinks") : std::nullopt;
    case LayerTensor::kFfnGateExps: return prefix + std::string(moe) + "experts.gate_proj" + tail;
    case LayerTensor::kFfnUpExps: return prefix + std::string(moe) + "experts.up_proj" + tail;
    case LayerTensor::kFfnDownExps: return prefix + std::string(moe) + "experts.down_proj" + tail;
    case LayerTensor::kAttnPostNorm: return prefix + "post_attention_layernorm" + tail;
    case LayerTensor::kExpProbsB: return is_bias ? std::optional(prefix + std::string(kHfChoiceBias)) : std::nullopt;
    case LayerTensor::kFfnNorm:
      return prefix + (sandwich_norms ? "pre_feedforward_layernorm" : "post_attention_layernorm") + tail;
    default: break;
  }
  for (const auto& e : kHfLayerModules)
    if (e.tensor == tensor) return prefix + std::string(e.hf) + tail;
  return std::nullopt;
}

}  // namespace qrt::names
