// Ollama's on-disk model store: `name[:tag]` -> manifest -> blobs, resolved exactly as Ollama does
// (spec/ollama.md §1). This file knows paths and manifests only; reading the blobs is the GGUF and
// safetensors readers' job.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "qrt/status.hpp"

namespace qrt::ollama {

struct ModelName {
  std::string host = "registry.ollama.ai";
  std::string ns = "library";
  std::string model;
  std::string tag = "latest";
  // "registry.ollama.ai/library/llama3.2/3b": the manifest path below manifests/.
  std::filesystem::path manifest_relative_path() const;
  std::string display() const;  // "llama3.2:3b" style, without default host/namespace
};

// Parses a user's model name ("llama3.2:3b", "hf.co/bartowski/Foo-GGUF:Q4_K_M", "localhost:5000/ns/m").
Result<ModelName> parse_model_name(const std::string& text);

// True when `text` looks like an Ollama name rather than a filesystem path (no existing file by that name, and
// it parses). Used by the loader's entry point to decide what the user meant.
bool looks_like_model_name(const std::string& text);

// The store root: $OLLAMA_MODELS if set and non-empty, else ~/.ollama/models.
Result<std::filesystem::path> store_root();

struct Layer {
  std::string media_type;
  std::string digest;  // "sha256:<64 hex>"
  uint64_t size = 0;
  std::string name;    // tensor or file name (tensor-blob models), may be empty
  std::filesystem::path blob_path;
};

struct Manifest {
  std::filesystem::path manifest_path;
  std::string manifest_digest;  // not computed here (needs hashing); empty
  Layer config;
  std::vector<Layer> layers;
  // From the config blob.
  std::string model_format;  // "" or "gguf" for GGUF models, "safetensors" for tensor-blob models
  std::string file_type;
  std::string architecture;
  bool remote = false;       // a cloud stub with no weights

  bool is_gguf() const { return model_format.empty() || model_format == "gguf"; }
  // The GGUF weights layer (the last image.model layer), if any.
  const Layer* gguf_model_layer() const;
  std::vector<const Layer*> layers_of_type(const std::string& media_type) const;
};

inline constexpr const char* kMediaModel = "application/vnd.ollama.image.model";
inline constexpr const char* kMediaTensor = "application/vnd.ollama.image.tensor";
inline constexpr const char* kMediaJson = "application/vnd.ollama.image.json";
inline constexpr const char* kMediaTemplate = "application/vnd.ollama.image.template";
inline constexpr const char* kMediaParams = "application/vnd.ollama.image.params";

// Blob file for a digest ("sha256:<hex>" -> <root>/blobs/sha256-<hex>); rejects malformed digests.
Result<std::filesystem::path> blob_path(const std::filesystem::path& root, const std::string& digest);

// Resolves `name` under `root` (case-insensitively when the exact path is missing) and reads its manifest and
// config blob. Errors name the model, the path tried and what was wrong.
Result<Manifest> open_manifest(const std::filesystem::path& root, const ModelName& name);

}  // namespace qrt::ollama
