// What every input format becomes: a normalized config, the tokenizer assets and the weights, all backed by
// memory mappings that this object keeps alive.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "loader/quant_tensor.hpp"

namespace qrt {

class GgufMetadata;  // loader/gguf_metadata.hpp

enum class SourceKind { kUqff, kGguf, kOllama, kHfCheckpoint };

// Tokenizer inputs as found: HF JSON files (text) and/or GGUF `tokenizer.ggml.*` metadata (kept by the GGUF
// reader); the tokenizer module turns them into a tokenizer.
struct TokenizerAssets {
  std::string tokenizer_json;         // contents of tokenizer.json, if present
  std::string tokenizer_config_json;  // contents of tokenizer_config.json, if present
  std::string chat_template;          // chat_template.jinja or tokenizer_config's template, if present
  std::string generation_config_json;
};

struct ModelSource {
  SourceKind kind = SourceKind::kGguf;
  std::string path;       // what the user named
  std::string hf_config_json;  // config.json as found (UQFF, HF checkpoints, Ollama tensor models); models/ maps it
  TokenizerAssets tokenizer;
  TensorTable tensors;
  // GGUF and Ollama sources: every metadata key (architecture keys, tokenizer.ggml.*), for models/ and the
  // tokenizer; null for other kinds.
  std::shared_ptr<const GgufMetadata> gguf_metadata;
  // Owners of the mappings the tensors point into (files, kept open for the source's lifetime).
  std::vector<std::shared_ptr<const void>> keep_alive;
};

}  // namespace qrt
