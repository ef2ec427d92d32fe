// Reads a GGUF file's `tokenizer.*` keys (spec/ggml.md §5) into the plain GgufTokenizerMetadata the tokenizer's
// GGUF front end takes.
#pragma once

#include "loader/gguf_metadata.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "qrt/status.hpp"

namespace qrt {

// True when the metadata holds a vocabulary (tokenizer.ggml.tokens).
bool gguf_has_tokenizer(const GgufMetadata& metadata);

// Absent optional keys stay empty / nullopt; a key present with the wrong type is an error naming it.
Result<GgufTokenizerMetadata> gguf_tokenizer_metadata(const GgufMetadata& metadata);

}  // namespace qrt
