// Internal to models/arch: one ArchRules entry per architecture, and the field readers they share.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/arch/arch.hpp"

namespace qrt::arch {

struct ArchRules {
  std::string_view name;                      // ModelConfig::architecture
  std::vector<std::string_view> hf_model_types;  // config.json "model_type" values
  std::string_view gguf_architecture;         // "general.architecture", or empty
  // Hugging Face class defaults that config.json may leave out.
  float hf_default_norm_eps = 1e-6f;
  float hf_default_rope_theta = 10000.0f;
  // Architecture-specific fields, after the common ones were read into *c.
  Status (*from_hf)(const nlohmann::json& j, ModelConfig* c) = nullptr;
  Status (*from_gguf)(const MetadataView& m, std::string_view prefix, ModelConfig* c) = nullptr;
};

const std::vector<ArchRules>& llama_family_rules();  // llama, mistral, mixtral
const std::vector<ArchRules>& qwen_family_rules();   // qwen2, qwen3, qwen3moe
const std::vector<ArchRules>& phi_family_rules();    // phi3
const std::vector<ArchRules>& gemma_family_rules();  // gemma2, gemma3 (text)
const std::vector<ArchRules>& gpt_oss_rules();       // gpt-oss
const std::vector<ArchRules>& deepseek_family_rules();  // deepseek2, deepseek3
// After the common RoPE fields: DeepSeek's RoPE dims and layout, YaRN magnitudes and softmax scale (no-op for
// models without latent attention).
Status finish_deepseek_rope(const nlohmann::json& j, ModelConfig* c);
// Which layers use the window: config.json's "layer_types" when present (transformers >= 4.53), else the
// pattern key (nullptr: none) or `default_pattern` (ModelConfig::sliding_window_pattern).
Status hf_window_layers(const nlohmann::json& j, const char* pattern_key, int default_pattern, ModelConfig* c);

// ---- config.json field readers: an absent or null key gives the fallback, a wrong type an error ----------
Result<int> hf_int(const nlohmann::json& j, const char* key, std::optional<int> fallback);
Result<float> hf_float(const nlohmann::json& j, const char* key, std::optional<float> fallback);
Result<bool> hf_bool(const nlohmann::json& j, const char* key, bool fallback);
// Qwen's use_sliding_window / max_window_layers: full attention below max_window_layers, sliding above.
// ModelConfig has one window for all layers, so a mix is unsupported.
Status hf_qwen_sliding_window(const nlohmann::json& j, ModelConfig* c);

// ---- GGUF readers ---------------------------------------------------------------------------------------
// A u32 key that may also be a per-layer array with one value repeated (heads, FFN width).
Result<uint32_t> gguf_uniform_u32(const MetadataView& m, const std::string& key, std::optional<uint32_t> fallback);

}  // namespace qrt::arch
