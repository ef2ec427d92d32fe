// SentencePiece-style BPE vocabularies (Llama 2, Mistral v1, TinyLlama: byte fallback, "▁" for spaces) between
// Hugging Face's tokenizer.json and GGUF's "llama" tokenizer model (spec/ggml.md §5).
//
// The two rank merges differently. tokenizer.json lists merges in priority order; GGUF gives each token a score,
// and llama.cpp merges the adjacent pair whose concatenation scores highest. So:
//   * to GGUF, a token made by a merge scores minus its place among the tokens the merges make, in the order of
//     their first merges (several merges can make one token: each token counts once); the other ordinary
//     tokens follow in id order below all of those; byte (<0xNN>), control, unknown and user-defined tokens score 0
//     (what llama.cpp's converter writes for a vocabulary trained that way: its pieces are in score order);
//   * to tokenizer.json, every split of an ordinary token into two vocabulary pieces becomes a merge, ordered by
//     the token's score (highest first), then by the pieces' ids.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qrt/status.hpp"
#include "tools/convert/gguf_writer.hpp"

namespace qrt::convert {

// A token of a tokenizer.json: from model.vocab, or from added_tokens (which override vocab entries of their id).
struct HfToken {
  std::string text;
  bool added = false;
  bool special = false;
};
// Every token by id; an id outside [0, 2^24) or a vocab entry without an integer id is an error.
Result<std::map<int32_t, HfToken>> hf_tokens_by_id(const nlohmann::json& tok);

// Whether a tokenizer.json is SentencePiece-style BPE: a BPE model with byte_fallback.
bool is_spm_tokenizer_json(const nlohmann::json& tok);

// Writes tokenizer.ggml.model "llama", tokens, scores, token_type, unknown_token_id and (when the tokenizer does not
// prepend "▁") add_space_prefix = false for a SentencePiece-style tokenizer.json. *ids gets each token's id (for the
// BOS/EOS lookups the caller does). Refuses a pre-tokenizer that would split the text before the merges.
Status add_gguf_spm_vocab(GgufWriter& w, const nlohmann::json& tok, std::map<std::string, int32_t>* ids);

// The GGUF "llama" vocabulary's fields, as convert-model reads them.
struct SpmVocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;  // llama.cpp's token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
  bool add_space_prefix = true;
};

// The fields every tokenizer.json convert-model writes starts with (version, no truncation or padding, an empty
// added_tokens list).
nlohmann::ordered_json tokenizer_json_skeleton();

// tokenizer.json for such a vocabulary: BPE with byte_fallback and the merges derived from the scores, the
// normalizer that prepends "▁" (when add_space_prefix) and turns spaces into "▁", and the matching decoder.
Result<nlohmann::ordered_json> spm_tokenizer_json(const SpmVocab& vocab);

}  // namespace qrt::convert
