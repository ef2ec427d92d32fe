// Text <-> token ids for every tokenizer qrt loads: byte-level BPE (GPT-2, Llama 3, Qwen, DeepSeek, ...),
// SentencePiece (Llama 2, Mistral, Phi-3, ...) and WordPiece (BERT). A Tokenizer is built from a plain
// TokenizerSpec (tokenizer_spec.hpp), which one of the front ends below fills:
//
//   QRT_ASSIGN_OR_RETURN(TokenizerSpec spec, tokenizer_spec_from_hf_json(json_text, config_text));
//   QRT_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::create(std::move(spec)));
//   QRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode("Hello world", /*add_special=*/true));
//
// A Tokenizer is immutable once built: encode and decode may run on many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer/tokenizer_spec.hpp"
#include "qrt/status.hpp"

namespace qrt {

namespace tokenizer_detail {
struct TokenizerState;  // lookup tables and compiled regexes (tokenizer.cpp)
}

class Tokenizer {
 public:
  // Checks the spec (ids in range, merges naming existing tokens, regexes that compile, ...) and builds the
  // lookup tables. Every error names spec.source.
  static Result<Tokenizer> create(TokenizerSpec spec);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids for `text` (any bytes; invalid UTF-8 is encoded byte by byte where the model can). add_special
  // adds BOS/EOS/SEP as the spec says. parse_special also matches special (control) tokens written in the
  // text, such as "<|im_start|>" in a rendered chat template; user-defined added tokens always match.
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special, bool parse_special = false) const;

  // The text of a sequence of ids (raw bytes: a sequence cut inside a UTF-8 character gives a partial
  // character). skip_special leaves out control tokens (BOS, EOS, <|im_end|>, ...).
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // One token's decoded bytes, as decode gives them inside a sequence (no leading-space trimming); empty for
  // an id out of range. For streaming output.
  std::string_view token_to_piece(int32_t id) const;
  // The token's text as stored in the vocabulary; empty for an id out of range.
  std::string_view token_text(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view text) const;
  TokenType token_type(int32_t id) const;

  size_t vocab_size() const;
  int32_t bos_id() const;  // -1 when the vocabulary has none
  int32_t eos_id() const;
  int32_t eot_id() const;  // end of turn (<|eot_id|>, <|im_end|>, <|end|>, ...): from the spec or by its text
  int32_t unk_id() const;
  int32_t pad_id() const;
  // Whether generation stops at this id: EOS, EOT, EOM and the known end-of-turn texts.
  bool is_end_of_generation(int32_t id) const;
  const std::string& chat_template() const;
  const TokenizerSpec& spec() const;

 private:
  explicit Tokenizer(std::unique_ptr<tokenizer_detail::TokenizerState> state);
  std::unique_ptr<tokenizer_detail::TokenizerState> state_;
};

// ---- Front ends -------------------------------------------------------------------------------------------

// Hugging Face `tokenizer.json` text, and optionally `tokenizer_config.json` text (empty when absent) for
// bos/eos/unk/pad tokens, add_bos_token/add_eos_token and the chat template. Supported: models BPE and
// WordPiece; normalizers Sequence, Prepend, Replace, Lowercase, Strip, StripAccents, BertNormalizer, NFC, NFD,
// NFKC, NFKD; pre-tokenizers Sequence, Split, ByteLevel, Digits, Metaspace, WhitespaceSplit, BertPreTokenizer,
// Punctuation, Whitespace; post-processors TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel,
// Sequence; decoders ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, WordPiece, Sequence. Anything else
// is an error naming it.
Result<TokenizerSpec> tokenizer_spec_from_hf_json(std::string_view tokenizer_json,
                                                  std::string_view tokenizer_config_json = {},
                                                  std::string source = "tokenizer.json");

// The `tokenizer.*` values of a GGUF file, as plain data (the GGUF reader fills this).
struct GgufTokenizerMetadata {
  std::string source;                 // the file, for messages
  std::string model;                  // tokenizer.ggml.model: "llama", "gpt2", "bert"
  std::string pre;                    // tokenizer.ggml.pre, empty when absent
  std::vector<std::string> tokens;    // tokenizer.ggml.tokens
  std::vector<float> scores;          // tokenizer.ggml.scores, empty when absent
  std::vector<int32_t> token_types;   // tokenizer.ggml.token_type, empty when absent
  std::vector<std::string> merges;    // tokenizer.ggml.merges ("left right"), empty when absent
  // tokenizer.ggml.<name>_token_id, absent keys left as nullopt.
  std::optional<int64_t> bos_id, eos_id, eot_id, eom_id, unk_id, sep_id, pad_id, cls_id, mask_id;
  std::optional<bool> add_bos, add_eos, add_sep, add_space_prefix, remove_extra_whitespaces;
  std::string chat_template;          // tokenizer.chat_template
};

// The GGUF tokenizer as llama.cpp defines it (spec/ggml.md §5): "llama" -> SentencePiece, "gpt2" -> byte-level
// BPE with the split regexes named by `pre`, "bert" -> WordPiece.
Result<TokenizerSpec> tokenizer_spec_from_gguf(const GgufTokenizerMetadata& meta);

// The split regexes llama.cpp uses for a `tokenizer.ggml.pre` value, applied one after another (each isolates
// its matches inside the pieces the previous one made). Unknown names are an error; "" means "default".
Result<std::vector<std::string>> gguf_pre_tokenizer_regexes(std::string_view pre);

// A SentencePiece `tokenizer.model` (ModelProto bytes) of BPE type, as Llama 2 and Mistral ship: pieces,
// scores and types, BOS/EOS/UNK ids, the dummy-prefix and extra-whitespace flags. Unigram models and models
// with a non-identity character map are unsupported.
Result<TokenizerSpec> tokenizer_spec_from_sentencepiece(std::string_view model, std::string source = "tokenizer.model");

// tiktoken ranks ("<base64 bytes> <rank>" per line, as in Llama 3's tokenizer.model and qwen.tiktoken) with
// the split regexes to use; ranks become ids and merge priorities, and a piece that is itself a token is
// emitted whole (tiktoken's rule) when ignore_merges is set. Special tokens are appended as control tokens
// from id `first_special_id` (or after the last rank when -1).
Result<TokenizerSpec> tokenizer_spec_from_tiktoken(std::string_view ranks_text, std::vector<std::string> regexes,
                                                   bool ignore_merges, std::vector<std::string> special_tokens = {},
                                                   std::string source = "tiktoken");

// GPT-2 style files: `encoder.json`/`vocab.json` (token -> id) and `vocab.bpe`/`merges.txt` (one merge per
// line, an optional "#version" first line), byte-level, split by `regexes` (the GPT-2 regex when empty).
Result<TokenizerSpec> tokenizer_spec_from_bpe_files(std::string_view vocab_json, std::string_view merges_text,
                                                    std::vector<std::string> regexes, bool ignore_merges,
                                                    std::string source = "vocab.json");

}  // namespace qrt
