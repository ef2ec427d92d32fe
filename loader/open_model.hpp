// The loader's one entry point: decides whether a path or name is a UQFF export, a GGUF file, an Ollama model
// or a Hugging Face checkpoint, and opens it.
#pragma once

#include <string>

#include "loader/model_source.hpp"
#include "qrt/status.hpp"

namespace qrt {

struct OpenOptions {
  bool verify_digests = false;  // Ollama: check each blob's sha256 against its digest
};

// What `path_or_name` is, without opening it (for messages and `inspect-model`).
Result<SourceKind> detect_source_kind(const std::string& path_or_name);
const char* source_kind_name(SourceKind kind);

Result<ModelSource> open_model_source(const std::string& path_or_name, const OpenOptions& options = {});

}  // namespace qrt
