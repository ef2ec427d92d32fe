// Shared helpers of the tokenizer oracle tests: the llama.cpp test vectors (.inp/.out) and the GGUF tokenizer
// metadata dumped to JSON by dump_gguf_vocab.py (gguf-py's GGUFReader).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "models/tokenizer/tokenizer.hpp"

namespace qrt::test {

// The whole file, or nullopt when it cannot be read.
std::optional<std::string> read_file(const std::filesystem::path& path);

// A .inp/.out pair: the test strings and, for each, the expected ids.
struct VocabVectors {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
};
// Reads <dir>/ggml-vocab-<name>.gguf.inp and .out. The .inp ends with the delimiter, so its last string is
// empty and has no .out line: it is kept, expecting no ids. *why says what went wrong on failure.
std::optional<VocabVectors> read_vocab_vectors(const std::filesystem::path& vocab_dir, const std::string& name,
                                               std::string* why);

// Where dump_gguf_vocab.py wrote the JSON dumps (set by CMake).
std::filesystem::path vocab_json_dir();
// Loads <vocab_json_dir>/<gguf file name>.json into the GGUF front end's input.
std::optional<GgufTokenizerMetadata> read_gguf_tokenizer_json(const std::filesystem::path& json_path, std::string* why);

// Encodes every vector text (no special tokens, specials not parsed) and counts exact matches; mismatches are
// described in *report (at most a few).
size_t count_matching(const Tokenizer& tokenizer, const VocabVectors& vectors, std::string* report);

}  // namespace qrt::test
