// GGUF tokenizer metadata (tokenizer.ggml.*, spec/ggml.md §5) from a Hugging Face tokenizer.json, as llama.cpp's
// converter writes it: byte-level BPE tokenizers (GPT-2, Llama 3, Qwen2 style) become the "gpt2" model with their
// tokens, token types (added special tokens control, other added tokens user-defined), merges and the
// pre-tokenizer's name, plus the BOS/EOS ids of tokenizer_config.json (or config.json) and the chat template.
// SentencePiece-style tokenizers (Llama 2, Mistral v1: byte fallback, "▁" for spaces) become the "llama" model
// with scores from the merge ranks (spm_vocab.hpp).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "qrt/status.hpp"
#include "tools/convert/gguf_writer.hpp"

namespace qrt::convert {

// tokenizer_config_json and chat_template may be empty; hf_config gives bos/eos ids when tokenizer_config.json
// does not name the tokens.
Status add_gguf_tokenizer(GgufWriter& w, const std::string& tokenizer_json, const std::string& tokenizer_config_json,
                          const std::string& chat_template, const nlohmann::json& hf_config);

}  // namespace qrt::convert
