// Internal: what Tokenizer::create builds from a TokenizerSpec, shared by the encode/decode code and the
// per-model encoders (bpe.cpp, wordpiece.cpp). Not part of the public API.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "models/tokenizer/regex.hpp"
#include "models/tokenizer/tokenizer_spec.hpp"
#include "qrt/status.hpp"

namespace qrt::tokenizer_detail {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// What merging the pair (left id, right id) gives: its priority (lower first) and the merged token.
struct MergeRule {
  int32_t rank;
  int32_t merged;
};
inline uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct CompiledNormalizerStep {
  NormalizerStep step;
  std::optional<Regex> regex;  // kReplace
};

struct CompiledPreTokenizerStep {
  PreTokenizerStep step;
  std::optional<Regex> regex;  // kSplit, kByteLevel with use_regex, kDigits
};

// A stretch of text on its way through the pipeline, or a token already decided (an added token).
struct Fragment {
  std::string text;
  int32_t token = -1;            // >= 0: an added token, text unused
  bool at_input_start = false;   // begins at offset 0 of the caller's text (Metaspace "first")
};

struct TokenizerState {
  TokenizerSpec spec;
  std::vector<TokenType> types;  // per id
  TokenMap token_to_id;
  std::unordered_map<uint64_t, MergeRule> merges;  // kBpe
  // The token for one raw byte: the byte-level character's token (byte_level) or <0xNN> (byte_fallback);
  // -1 when the vocabulary has none.
  std::array<int32_t, 256> byte_tokens{};
  std::vector<std::string> pieces;  // per id: its decoded bytes
  std::vector<CompiledNormalizerStep> normalizer;
  std::vector<CompiledPreTokenizerStep> pre_tokenizer;
  std::vector<int32_t> end_of_generation;  // sorted

  // Added tokens, for matching: indices into spec.added_tokens grouped by first byte, longest first.
  std::array<std::vector<uint32_t>, 256> added_by_first_byte;
};

// The GPT-2 split regex (HF ByteLevel pre-tokenizer with use_regex).
const char* gpt2_split_pattern();

// Pipeline stages (pipeline.cpp).
// Compiles the normalizer and pre-tokenizer regexes of state.spec into state.normalizer / state.pre_tokenizer.
Status compile_pipeline(TokenizerState& state);
// Cuts the raw text at added tokens (leftmost, longest first): text fragments and token fragments in order.
std::vector<Fragment> split_added_tokens(const TokenizerState& state, std::string_view text, bool parse_special);
// Runs the normalizer steps on one text fragment.
Status normalize(const TokenizerState& state, RegexScratch& scratch, std::string* text);
// Runs the pre-tokenizer steps on one normalized fragment, appending the pieces.
Status pre_tokenize(const TokenizerState& state, RegexScratch& scratch, Fragment fragment,
                    std::vector<Fragment>* pieces);

// Model encoders: one pre-tokenized piece -> ids appended to *out.
void encode_bpe_piece(const TokenizerState& state, std::string_view piece, std::vector<int32_t>* out);
void encode_sentencepiece_piece(const TokenizerState& state, std::string_view piece, std::vector<int32_t>* out);
void encode_wordpiece_piece(const TokenizerState& state, std::string_view piece, std::vector<int32_t>* out);

// Builds state.merges from spec.merges or, with merges_from_ranks, from every token that splits into two
// tokens. Needs state.token_to_id.
Status build_merge_table(TokenizerState& state);

// BERT normalization (lowercase, accent stripping, control removal, spacing around CJK ideographs).
Result<std::string> bert_normalize(std::string_view text, const NormalizerStep& step);
// Unicode simple lowercase of UTF-8 text.
std::string unicode_lowercase(std::string_view text);
// Whether a code point is punctuation as BERT sees it (ASCII symbols or Unicode P*).
bool is_bert_punctuation(uint32_t cp);

}  // namespace qrt::tokenizer_detail
