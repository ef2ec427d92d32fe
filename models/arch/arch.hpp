// Architecture rules: Hugging Face config.json or GGUF metadata -> ModelConfig feature flags.
// Supported: llama (Llama 1-3.x incl. rope scaling, TinyLlama), mistral, qwen2, qwen3, mixtral, qwen3moe, phi3,
// gemma2, gemma3 (text), gpt-oss, deepseek2 and deepseek3 (Hugging Face checkpoints).
//
// RoPE layout: Hugging Face checkpoints rotate half-split pairs; GGUF `llama` files were converted with Q/K rows
// permuted for interleaved pairs (spec/ggml.md §4.3), other GGUF architectures keep half-split.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "loader/quant_tensor.hpp"
#include "models/model_config.hpp"
#include "qrt/status.hpp"

namespace qrt::arch {

// Read access to GGUF key/value metadata, implemented by the GGUF reader. Getters fail with a Status naming the
// key when it is absent or has another type; integer getters accept any integer type whose value fits.
class MetadataView {
 public:
  virtual ~MetadataView() = default;
  virtual bool has(std::string_view key) const = 0;
  virtual bool is_array(std::string_view key) const = 0;
  virtual Result<uint32_t> get_u32(std::string_view key) const = 0;
  virtual Result<float> get_f32(std::string_view key) const = 0;  // f32 or f64
  virtual Result<bool> get_bool(std::string_view key) const = 0;
  virtual Result<std::string> get_string(std::string_view key) const = 0;
  virtual Result<std::vector<uint32_t>> get_u32_array(std::string_view key) const = 0;
  virtual Result<uint64_t> get_array_length(std::string_view key) const = 0;
};

// A MetadataView over a JSON object {"key": value}: integers read as u32, numbers as f32, arrays of integers
// as u32 arrays. For tests and tools that describe GGUF metadata without a GGUF file.
class JsonMetadataView final : public MetadataView {
 public:
  explicit JsonMetadataView(nlohmann::json object) : object_(std::move(object)) {}
  bool has(std::string_view key) const override;
  bool is_array(std::string_view key) const override;
  Result<uint32_t> get_u32(std::string_view key) const override;
  Result<float> get_f32(std::string_view key) const override;
  Result<bool> get_bool(std::string_view key) const override;
  Result<std::string> get_string(std::string_view key) const override;
  Result<std::vector<uint32_t>> get_u32_array(std::string_view key) const override;
  Result<uint64_t> get_array_length(std::string_view key) const override;

 private:
  Result<const nlohmann::json*> find(std::string_view key) const;
  nlohmann::json object_;
};

// config.json -> ModelConfig, by "model_type" ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe").
Result<ModelConfig> config_from_hf(const nlohmann::json& config);

// GGUF metadata -> ModelConfig, by "general.architecture" ("llama" covers Mistral and Mixtral, "qwen2",
// "qwen3", "qwen3moe"). GGUF does not record biases, q/k norms or tied embeddings for `llama`: call
// apply_tensor_presence with the canonical tensors afterwards.
Result<ModelConfig> config_from_gguf(const MetadataView& metadata);

// Sets the flags that GGUF leaves to the tensors: attention q/k/v and output biases, MLP biases, q/k norms and
// tied embeddings (no "output"), from which canonical tensors of layer 0 exist.
void apply_tensor_presence(const TensorTable& canonical, ModelConfig* config);

// The architectures config_from_hf accepts (model_type values) and config_from_gguf accepts.
std::vector<std::string_view> supported_hf_model_types();
std::vector<std::string_view> supported_gguf_architectures();

}  // namespace qrt::arch
