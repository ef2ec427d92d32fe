#include "tools/convert/deepseek_convert.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "models/tensor_names.hpp"
#include "models/tensor_values.hpp"

namespace qrt::convert {
Status deepseek_hf_config(const ModelConfig& c, bool has_choice_bias, nlohmann::ordered_json* j) {
  if (c.latent_norm_eps != 1e-6f)
    return unsupported("config.json cannot express DeepSeek's latent norm epsilon " +
                       std::to_string(c.latent_norm_eps) + " (the modeling code fixes 1e-6; GGUF uses rms_norm_eps)");
  if (c.router_sigmoid && !has_choice_bias)
    return unsupported("config.json cannot express sigmoid routing without exp_probs_b (DeepSeek-V3's noaux_tc needs "
                       "its correction bias)");
  const bool v3 = c.router_sigmoid || (c.normalize_topk && c.routed_scale != 1.0f && c.experts_used > 1);
  nlohmann::ordered_json& o = *j;
  o["model_type"] = v3 ? "deepseek_v3" : "deepseek_v2";
  o.erase("head_dim");  // DeepSeek's is nope + rope
  o["q_lora_rank"] = c.q_lora_rank > 0 ? nlohmann::ordered_json(c.q_lora_rank) : nlohmann::ordered_json(nullptr);
  o["kv_lora_rank"] = c.kv_lora_rank;
  o["qk_nope_head_dim"] = c.qk_nope_dim;
  o["qk_rope_head_dim"] = c.qk_rope_dim;
  o["v_head_dim"] = c.v_head_dim;
  o["attention_bias"] = false;
  if (c.experts > 0) {
    o.erase("num_experts");
    o["n_routed_experts"] = c.experts;
    o["n_shared_experts"] = c.expert_ffn > 0 ? c.shared_expert_ffn / c.expert_ffn : 0;
    o["first_k_dense_replace"] = c.leading_dense_layers;
    o["moe_layer_freq"] = 1;
    o["routed_scaling_factor"] = c.routed_scale;
    o["scoring_func"] = c.router_sigmoid ? "sigmoid" : "softmax";
    o["topk_method"] = c.expert_groups <= 1 ? (c.router_sigmoid ? "noaux_tc" : "greedy")
                       : c.group_score_top2 ? "noaux_tc"
                                            : "group_limited_greedy";
    o["n_group"] = c.expert_groups;
    o["topk_group"] = c.expert_groups_used;
    o["intermediate_size"] = c.ffn;
  }
  if (c.rope.scaling == RopeScaling::kYarn) {
    // DeepSeek's YaRN: mscale == mscale_all_dim leaves cos/sin unscaled (as GGUF's deepseek2 does) and scales q·k by
    // mscale(factor, mscale_all_dim)^2, which gives back the file's scale.
    const double plain = 1.0 / std::sqrt(static_cast<double>(c.qk_nope_dim + c.qk_rope_dim));
    const double m = c.rope.factor > 1.0f ? (std::sqrt(c.attention_scale / plain) - 1.0) /
                                                (0.1 * std::log(static_cast<double>(c.rope.factor)))
                                          : 0.0;
    o["rope_scaling"] = {{"type", "yarn"},
                         {"factor", c.rope.factor},
                         {"original_max_position_embeddings", c.rope.original_context},
                         {"beta_fast", c.rope.yarn_beta_fast},
                         {"beta_slow", c.rope.yarn_beta_slow},
                         {"mscale", m},
                         {"mscale_all_dim", m}};
  }
  return ok_status();
}

Status merge_deepseek_kv_b(const ModelConfig& c, TensorTable* tensors,
                           std::vector<std::shared_ptr<std::vector<uint8_t>>>* keep) {
  using names::LayerTensor;
  const int64_t heads = c.heads, nope = c.qk_nope_dim, v = c.v_head_dim, lora = c.kv_lora_rank;
  for (int l = 0; l < c.layers; ++l) {
    const std::string k_b = names::layer_tensor(l, LayerTensor::kAttnKB);
    const std::string v_b = names::layer_tensor(l, LayerTensor::kAttnVB);
    if (!tensors->count(k_b) && !tensors->count(v_b)) continue;
    if (!tensors->count(k_b) || !tensors->count(v_b))
      return format_error("layer " + std::to_string(l) + " holds only one of " + k_b + " and " + v_b);
    const QuantTensor &kt = tensors->at(k_b), &vt = tensors->at(v_b);
    if (kt.shape != std::vector<int64_t>{heads, lora, nope} || vt.shape != std::vector<int64_t>{heads, v, lora})
      return invalid_argument(kt.name + " / " + vt.name + ": expected [" + std::to_string(heads) + ", " +
                              std::to_string(lora) + ", " + std::to_string(nope) + "] and [" + std::to_string(heads) +
                              ", " + std::to_string(v) + ", " + std::to_string(lora) + "]");
    QRT_ASSIGN_OR_RETURN(const std::vector<float> kv, tensor_values(kt));
    QRT_ASSIGN_OR_RETURN(const std::vector<float> vv, tensor_values(vt));
    auto bytes = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(heads * (nope + v) * lora) * 4);
    float* out = reinterpret_cast<float*>(bytes->data());
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t d = 0; d < nope; ++d)  // k_b holds each head's key rows transposed
        for (int64_t j = 0; j < lora; ++j)
          out[(h * (nope + v) + d) * lora + j] = kv[static_cast<size_t>((h * lora + j) * nope + d)];
      std::memcpy(out + (h * (nope + v) + nope) * lora, vv.data() + h * v * lora,
                  static_cast<size_t>(v * lora) * sizeof(float));
    }
    QuantTensor merged;
    merged.name = names::layer_tensor(l, LayerTensor::kAttnKvB) + " (from " + kt.name + " and " + vt.name + ")";
    merged.format = quant::FormatId::kF32;
    merged.shape = {heads * (nope + v), lora};
    merged.file = kt.file;
    merged.data = {bytes->data(), bytes->size()};
    keep->push_back(bytes);
    tensors->erase(k_b);
    tensors->erase(v_b);
    (*tensors)[names::layer_tensor(l, LayerTensor::kAttnKvB)] = merged;
  }
  return ok_status();
}

}  // namespace qrt::convert
