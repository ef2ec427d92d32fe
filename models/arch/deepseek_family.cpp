// deepseek2 (DeepSeek-V2, V2-Lite, V2.5) and deepseek3 (DeepSeek-V3, R1): multi-head latent attention (low-rank q
// and kv, a RoPE part and a part without it in each query and key head, one shared RoPE key; ModelConfig), a
// mixture of experts after first_k_dense_replace dense layers, with shared experts beside the routed ones and
// routing by groups (V2: softmax scores, a group scored by its best expert; V3: sigmoid scores with a choosing
// bias, a group scored by its two best). DeepSeek's modeling_deepseek.py (the checkpoints' own code) and
// transformers' modeling_deepseek_v2 / v3 are the reference semantics; where they differ it is said below.
#include <cmath>
#include <optional>
#include <string>

#include "models/arch/arch_rules.hpp"

namespace qrt::arch {
namespace {

using nlohmann::json;

// DeepSeek's YaRN magnitude: 0.1 m ln(s) + 1 for a context stretched by s > 1.
double deepseek_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }

Status deepseek_from_hf(const json& j, ModelConfig* c, bool v3) {
  // DeepseekV2Config / DeepseekV3Config's defaults for what config.json leaves out; q_lora_rank null means q comes
  // from one projection.
  const bool q_direct = j.contains("q_lora_rank") && j["q_lora_rank"].is_null();
  QRT_ASSIGN_OR_RETURN(c->q_lora_rank, hf_int(j, "q_lora_rank", q_direct ? 0 : 1536));
  QRT_ASSIGN_OR_RETURN(c->kv_lora_rank, hf_int(j, "kv_lora_rank", 512));
  QRT_ASSIGN_OR_RETURN(c->qk_nope_dim, hf_int(j, "qk_nope_head_dim", 128));
  QRT_ASSIGN_OR_RETURN(c->qk_rope_dim, hf_int(j, "qk_rope_head_dim", 64));
  QRT_ASSIGN_OR_RETURN(c->v_head_dim, hf_int(j, "v_head_dim", 128));
  if (c->q_lora_rank < 0 || c->kv_lora_rank <= 0 || c->qk_nope_dim <= 0 || c->qk_rope_dim <= 0 ||
      c->qk_rope_dim % 2 != 0 || c->v_head_dim <= 0)
    return invalid_argument("config.json: multi-head latent attention needs positive kv_lora_rank, " +
                            std::string("qk_nope_head_dim, v_head_dim and an even qk_rope_head_dim"));
  c->head_dim = c->qk_nope_dim + c->qk_rope_dim;
  // Every query head reads the one shared latent: the per-head keys exist only inside kv_b_proj.
  c->kv_heads = c->heads;
  QRT_ASSIGN_OR_RETURN(c->attention_bias, hf_bool(j, "attention_bias", false));
  if (c->attention_bias) return unsupported("config.json: DeepSeek attention with biases (attention_bias true)");

  QRT_ASSIGN_OR_RETURN(c->extra_layers, hf_int(j, "num_nextn_predict_layers", 0));
  if (c->extra_layers < 0) return invalid_argument("config.json: num_nextn_predict_layers must not be negative");
  QRT_ASSIGN_OR_RETURN(c->experts, hf_int(j, "n_routed_experts", 0));
  if (c->experts == 0) return ok_status();  // every layer dense
  QRT_ASSIGN_OR_RETURN(c->experts_used, hf_int(j, "num_experts_per_tok", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c->expert_ffn, hf_int(j, "moe_intermediate_size", std::nullopt));
  QRT_ASSIGN_OR_RETURN(int shared, hf_int(j, "n_shared_experts", 0));
  if (shared < 0) return invalid_argument("config.json: n_shared_experts must not be negative");
  c->shared_expert_ffn = shared * c->expert_ffn;
  QRT_ASSIGN_OR_RETURN(c->leading_dense_layers, hf_int(j, "first_k_dense_replace", 0));
  QRT_ASSIGN_OR_RETURN(int frequency, hf_int(j, "moe_layer_freq", 1));
  if (frequency != 1)
    return unsupported("config.json: moe_layer_freq " + std::to_string(frequency) +
                       " (dense layers among the MoE layers after the leading ones)");
  if (c->leading_dense_layers < 0 || c->leading_dense_layers > c->layers)
    return invalid_argument("config.json: first_k_dense_replace " + std::to_string(c->leading_dense_layers) +
                            " outside [0, num_hidden_layers]");
  QRT_ASSIGN_OR_RETURN(c->normalize_topk, hf_bool(j, "norm_topk_prob", false));
  QRT_ASSIGN_OR_RETURN(c->routed_scale, hf_float(j, "routed_scaling_factor", 1.0f));
  // DeepSeek-V2's code scales the weights only when it does not renormalize them; V3's does both.
  if (!v3 && c->normalize_topk && c->experts_used > 1) c->routed_scale = 1.0f;

  std::string scoring = v3 ? "sigmoid" : "softmax";
  if (auto it = j.find("scoring_func"); it != j.end() && it->is_string()) scoring = it->get<std::string>();
  if (scoring != "softmax" && scoring != "sigmoid")
    return unsupported("config.json: scoring_func \"" + scoring + "\" (supported: softmax, sigmoid)");
  c->router_sigmoid = scoring == "sigmoid";
  std::string method = v3 ? "noaux_tc" : "greedy";
  if (auto it = j.find("topk_method"); it != j.end() && it->is_string()) method = it->get<std::string>();
  if (method == "greedy") return ok_status();
  if (method != "group_limited_greedy" && method != "noaux_tc")
    return unsupported("config.json: topk_method \"" + method + "\" (supported: greedy, group_limited_greedy, " +
                       "noaux_tc)");
  QRT_ASSIGN_OR_RETURN(c->expert_groups, hf_int(j, "n_group", 1));
  QRT_ASSIGN_OR_RETURN(c->expert_groups_used, hf_int(j, "topk_group", c->expert_groups));
  if (c->expert_groups <= 0 || c->experts % c->expert_groups != 0 || c->expert_groups_used <= 0 ||
      c->expert_groups_used > c->expert_groups ||
      int64_t{c->expert_groups_used} * (c->experts / c->expert_groups) < c->experts_used)
    return invalid_argument("config.json: " + std::to_string(c->experts) + " experts in n_group " +
                            std::to_string(c->expert_groups) + " groups of which topk_group " +
                            std::to_string(c->expert_groups_used) + " are used cannot supply " +
                            std::to_string(c->experts_used) + " experts per token");
  // noaux_tc: the correction bias joins the choice and a group counts its two best (biased) scores.
  c->group_score_top2 = c->expert_choice_bias = method == "noaux_tc";
  return ok_status();
}

Status deepseek2_from_hf(const json& j, ModelConfig* c) { return deepseek_from_hf(j, c, false); }
Status deepseek3_from_hf(const json& j, ModelConfig* c) { return deepseek_from_hf(j, c, true); }

// llama.cpp's deepseek2 (V2, V2.5, V3 and R1 alike). Files from its current converter describe the absorbed
// form (key_length = kv_lora + rope, value_length = kv_lora, the per-head sizes in key_length_mla /
// value_length_mla, one KV head, attn_k_b / attn_v_b tensors); older ones the expanded form (key_length = nope +
// rope, value_length = v, attn_kv_b). llama.cpp uses rms_norm_eps for the latent norms too, cancels YaRN's cos/sin
// magnitude (cos/sin unscaled) and scales q·k by (1 + yarn_log_multiplier ln(factor))^2 / sqrt(nope + rope).
Status deepseek_from_gguf(const MetadataView& m, std::string_view prefix, ModelConfig* c) {
  const std::string p(prefix);
  auto u32 = [&](const std::string& key, std::optional<uint32_t> fallback) -> Result<int> {
    QRT_ASSIGN_OR_RETURN(uint32_t v, gguf_uniform_u32(m, p + key, fallback));
    if (v > (1u << 30)) return out_of_range("GGUF metadata: " + p + key + " = " + std::to_string(v) + " is too large");
    return static_cast<int>(v);
  };
  QRT_ASSIGN_OR_RETURN(c->kv_lora_rank, u32("attention.kv_lora_rank", std::nullopt));
  QRT_ASSIGN_OR_RETURN(c->q_lora_rank, u32("attention.q_lora_rank", 0));
  QRT_ASSIGN_OR_RETURN(int key_length, u32("attention.key_length", std::nullopt));
  QRT_ASSIGN_OR_RETURN(int value_length, u32("attention.value_length", std::nullopt));
  const bool absorbed = m.has(p + "attention.key_length_mla");
  QRT_ASSIGN_OR_RETURN(c->head_dim, u32("attention.key_length_mla", static_cast<uint32_t>(key_length)));
  QRT_ASSIGN_OR_RETURN(c->v_head_dim, u32("attention.value_length_mla", static_cast<uint32_t>(value_length)));
  QRT_ASSIGN_OR_RETURN(c->qk_rope_dim, u32("rope.dimension_count", std::nullopt));
  c->qk_nope_dim = c->head_dim - c->qk_rope_dim;
  if (c->kv_lora_rank <= 0 || c->qk_rope_dim <= 0 || c->qk_rope_dim % 2 != 0 || c->qk_nope_dim <= 0 ||
      c->v_head_dim <= 0 || (absorbed && (key_length != c->kv_lora_rank + c->qk_rope_dim ||
                                          value_length != c->kv_lora_rank)))
    return invalid_argument("GGUF metadata: " + p + "attention key_length " + std::to_string(key_length) +
                            ", value_length " + std::to_string(value_length) + ", kv_lora_rank " +
                            std::to_string(c->kv_lora_rank) + " and rope.dimension_count " +
                            std::to_string(c->qk_rope_dim) + " do not describe latent attention");
  c->kv_heads = c->heads;
  c->latent_norm_eps = c->norm_eps;
  c->rope.layout = RopeLayout::kInterleaved;
  c->rope.rot_dim = c->qk_rope_dim;
  double scale = 1.0 / std::sqrt(static_cast<double>(c->head_dim));
  if (c->rope.scaling == RopeScaling::kYarn) {
    c->rope.attn_factor = 1.0f;
    float log_mul = 0.0f;
    if (m.has(p + "rope.scaling.yarn_log_multiplier")) {
      QRT_ASSIGN_OR_RETURN(log_mul, m.get_f32(p + "rope.scaling.yarn_log_multiplier"));
    }
    const double mscale = 1.0 + log_mul * std::log(static_cast<double>(c->rope.factor));
    scale *= mscale * mscale;
  }
  c->attention_scale = static_cast<float>(scale);
  if (c->experts == 0) return ok_status();
  QRT_ASSIGN_OR_RETURN(c->leading_dense_layers, u32("leading_dense_block_count", 0));
  QRT_ASSIGN_OR_RETURN(int shared, u32("expert_shared_count", 0));
  c->shared_expert_ffn = shared * c->expert_ffn;
  c->normalize_topk = false;
  if (m.has(p + "expert_weights_norm")) {
    QRT_ASSIGN_OR_RETURN(c->normalize_topk, m.get_bool(p + "expert_weights_norm"));
  }
  if (m.has(p + "expert_weights_scale")) {
    QRT_ASSIGN_OR_RETURN(c->routed_scale, m.get_f32(p + "expert_weights_scale"));
  }
  QRT_ASSIGN_OR_RETURN(int gating, u32("expert_gating_func", 1));  // absent in V2 files: softmax
  if (gating != 1 && gating != 2)
    return unsupported("GGUF metadata: " + p + "expert_gating_func " + std::to_string(gating) +
                       " (supported: 1 softmax, 2 sigmoid)");
  c->router_sigmoid = gating == 2;
  // Groups as DeepSeek's code scores them: a group's best score under softmax (V2's group_limited_greedy), the
  // sum of its two best biased scores under sigmoid (V3's noaux_tc). Files without the keys route without groups,
  // as llama.cpp did before it read them.
  QRT_ASSIGN_OR_RETURN(c->expert_groups, u32("expert_group_count", 1));
  QRT_ASSIGN_OR_RETURN(c->expert_groups_used, u32("expert_group_used_count", static_cast<uint32_t>(c->expert_groups)));
  c->group_score_top2 = c->router_sigmoid;
  if (c->expert_groups < 1 || c->experts % c->expert_groups != 0 || c->expert_groups_used < 1 ||
      c->expert_groups_used > c->expert_groups ||
      int64_t{c->expert_groups_used} * (c->experts / c->expert_groups) < c->experts_used)
    return invalid_argument("GGUF metadata: " + std::to_string(c->experts) + " experts in " +
                            std::to_string(c->expert_groups) + " groups of which " +
                            std::to_string(c->expert_groups_used) + " are used cannot supply " +
                            std::to_string(c->experts_used) + " experts per token");
  return ok_status();
}

}  // namespace

Status finish_deepseek_rope(const json& j, ModelConfig* c) {
  if (c->kv_lora_rank <= 0) return ok_status();
  // RoPE on the qk_rope_head_dim part only, on adjacent pairs: the code de-interleaves each head's pairs before
  // rotating halves (transformers: rope_interleave), which is the same rotation of (2i, 2i + 1) on q and k alike.
  c->rope.rot_dim = c->qk_rope_dim;
  c->rope.layout = RopeLayout::kInterleaved;
  double scale = 1.0 / std::sqrt(static_cast<double>(c->qk_nope_dim + c->qk_rope_dim));
  if (c->rope.scaling == RopeScaling::kYarn) {
    // DeepSeek's YaRN: cos/sin scaled by mscale(factor, mscale) / mscale(factor, mscale_all_dim) (defaults 1 and 0,
    // mscale(s, 0) = 1), and the softmax scale by mscale(factor, mscale_all_dim)^2.
    auto it = j.find("rope_scaling");
    if (it == j.end() || !it->is_object()) it = j.find("rope_parameters");
    if (it == j.end() || !it->is_object()) return format_error("config.json: YaRN without its rope_scaling object");
    const json& params = *it;
    QRT_ASSIGN_OR_RETURN(float mscale, hf_float(params, "mscale", 1.0f));
    QRT_ASSIGN_OR_RETURN(float mscale_all_dim, hf_float(params, "mscale_all_dim", 0.0f));
    const double f = c->rope.factor;
    QRT_ASSIGN_OR_RETURN(c->rope.attn_factor,
                         hf_float(params, "attention_factor",
                                  static_cast<float>(deepseek_mscale(f, mscale) / deepseek_mscale(f, mscale_all_dim))));
    if (mscale_all_dim != 0.0f) scale *= deepseek_mscale(f, mscale_all_dim) * deepseek_mscale(f, mscale_all_dim);
  }
  c->attention_scale = static_cast<float>(scale);
  return ok_status();
}

const std::vector<ArchRules>& deepseek_family_rules() {
  static const std::vector<ArchRules> rules = {
      {"deepseek2", {"deepseek_v2"}, "deepseek2", 1e-6f, 10000.0f, deepseek2_from_hf, deepseek_from_gguf},
      {"deepseek3", {"deepseek_v3"}, "", 1e-6f, 10000.0f, deepseek3_from_hf, nullptr},
  };
  return rules;
}

}  // namespace qrt::arch
