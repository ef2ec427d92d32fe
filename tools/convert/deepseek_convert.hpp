// DeepSeek (llama.cpp's deepseek2 GGUF) into a Hugging Face layout for convert-model's UQFF export: the config.json
// fields of DeepseekV2Config / DeepseekV3Config, and kv_b_proj rebuilt from the split attn_k_b / attn_v_b tensors of
// llama.cpp's current converter.
#pragma once

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/quant_tensor.hpp"
#include "models/model_config.hpp"
#include "qrt/status.hpp"

namespace qrt::convert {

// Sets model_type (deepseek_v3 for sigmoid routing, or renormalized weights that are scaled too, which only V3's code
// does; else deepseek_v2) and the latent attention, routing and YaRN fields. What config.json cannot say as the GGUF
// does is refused: latent norms with another epsilon than rms_norm_eps' 1e-6 default, sigmoid routing without the
// choice bias (has_choice_bias: the file's exp_probs_b).
Status deepseek_hf_config(const ModelConfig& c, bool has_choice_bias, nlohmann::ordered_json* j);

// Every layer's attn_k_b [heads, kv_lora, nope] and attn_v_b [heads, v, kv_lora] replaced by the attn_kv_b
// [heads * (nope + v), kv_lora] they were split from, in F32 (the split files' blocks run along other rows); *keep
// owns the bytes. Tables without them are left as they are.
Status merge_deepseek_kv_b(const ModelConfig& c, TensorTable* tensors,
                           std::vector<std::shared_ptr<std::vector<uint8_t>>>* keep);

}  // namespace qrt::convert
