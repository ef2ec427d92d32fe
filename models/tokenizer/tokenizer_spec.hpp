// TokenizerSpec: everything a tokenizer is, as plain data. The front ends (HF tokenizer.json, GGUF
// `tokenizer.ggml.*` metadata, tiktoken ranks, GPT-2 vocab/merges files) fill one; Tokenizer::create checks it
// and builds the lookup structures. Nothing here depends on where the data came from.
//
// The encode pipeline the spec describes, in order:
//   1. added tokens are split out of the raw text (longest match first; `special` ones only when the caller
//      asks to parse specials),
//   2. each remaining text segment is normalized (normalizer steps),
//   3. each normalized segment is cut into pieces (pre-tokenizer steps),
//   4. each piece is turned into ids by the model (BPE merges, SentencePiece scores, or WordPiece),
//   5. with add_special, BOS / EOS / SEP are added around the result.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace qrt {

// How pieces become ids.
enum class TokenizerModelKind {
  // Merge adjacent symbols by merge rank (HF "BPE", GGUF "gpt2", tiktoken). With byte_level, the symbols are
  // the input bytes seen through the GPT-2 byte<->unicode table; otherwise they are UTF-8 characters, with
  // <0xNN> byte tokens for characters the vocabulary lacks when byte_fallback is set.
  kBpe,
  // SentencePiece BPE: merge the adjacent pair whose concatenation is the vocabulary entry with the highest
  // score (GGUF "llama"); unknown characters fall back to <0xNN> byte tokens (or unk).
  kSentencePiece,
  // Greedy longest-prefix WordPiece with a continuation prefix ("##"), for BERT (GGUF "bert").
  kWordPiece,
};

// Per-token type; the values are GGUF's `tokenizer.ggml.token_type` codes.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

// A token matched verbatim in the raw text before anything else runs.
struct AddedToken {
  int32_t id = -1;
  std::string content;
  // Special tokens (control tokens: <s>, <|im_end|>, ...) are matched only when the caller parses specials;
  // the others (user-defined tokens) are always matched.
  bool special = false;
  bool lstrip = false;  // also swallows the whitespace before it
  bool rstrip = false;  // also swallows the whitespace after it
  bool single_word = false;  // matches only when not inside a word
};

// How a split step keeps what its pattern matched (HF SplitDelimiterBehavior).
enum class SplitBehavior {
  kIsolated,            // matches and the text between them are separate pieces
  kRemoved,             // matches are dropped
  kMergedWithPrevious,  // each match is glued to the piece before it
  kMergedWithNext,      // each match is glued to the piece after it
  kContiguous,          // adjacent matches form one piece, isolated
};

// Where Metaspace-style prefixing adds its marker.
enum class PrependScheme { kAlways, kFirst, kNever };

// The Unicode normalization forms (UAX #15): canonical or compatibility decomposition, then (NFC, NFKC)
// canonical composition.
enum class UnicodeForm { kNfc, kNfd, kNfkc, kNfkd };

struct NormalizerStep {
  enum class Kind {
    kPrepend,    // text = argument + text (non-empty segments only)
    kReplace,    // every match of `pattern` (a PCRE2 regex) becomes `content`
    kLowercase,  // Unicode simple lowercase
    kStrip,      // removes leading (strip_left) / trailing (strip_right) whitespace
    kBert,       // BERT cleanup: drop controls, whitespace->' ', space around CJK, lowercase and strip accents
    kUnicode,    // Unicode normalization to `form` (HF NFC, NFD, NFKC, NFKD)
    kStripAccents,  // removes combining marks (general category M); HF StripAccents, which follows NFD or NFKD
  };
  Kind kind = Kind::kPrepend;
  std::string pattern;  // kReplace
  std::string content;  // kPrepend, kReplace
  bool strip_left = false, strip_right = false;  // kStrip
  bool lowercase = true, strip_accents = true, handle_chinese_chars = true, clean_text = true;  // kBert
  UnicodeForm form = UnicodeForm::kNfc;  // kUnicode

  static NormalizerStep prepend(std::string text) {
    NormalizerStep s;
    s.kind = Kind::kPrepend;
    s.content = std::move(text);
    return s;
  }
  static NormalizerStep replace(std::string regex, std::string with) {
    NormalizerStep s;
    s.kind = Kind::kReplace;
    s.pattern = std::move(regex);
    s.content = std::move(with);
    return s;
  }
  static NormalizerStep of_kind(Kind kind) {
    NormalizerStep s;
    s.kind = kind;
    return s;
  }
  static NormalizerStep unicode(UnicodeForm form) {
    NormalizerStep s;
    s.kind = Kind::kUnicode;
    s.form = form;
    return s;
  }
};

struct PreTokenizerStep {
  enum class Kind {
    kSplit,      // split by a PCRE2 regex (UTF, Unicode properties) with `behavior`
    kByteLevel,  // GPT-2: optional prefix space, then (use_regex) the GPT-2 split regex
    kDigits,     // isolate digits: each one (individual_digits) or runs
    kMetaspace,  // ' ' -> replacement, prefix per prepend_scheme, split before each replacement (split)
    kWhitespaceSplit,  // split on whitespace, dropping it
    kBert,       // split on whitespace (dropped) and on each punctuation character (kept)
  };
  Kind kind = Kind::kSplit;
  std::string pattern;  // kSplit
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;            // kSplit: the pattern marks what to keep; everything else is the delimiter
  bool add_prefix_space = false;  // kByteLevel
  bool use_regex = true;          // kByteLevel
  bool individual_digits = false;  // kDigits
  std::string replacement = "\xE2\x96\x81";  // kMetaspace: U+2581
  PrependScheme prepend_scheme = PrependScheme::kAlways;  // kMetaspace
  bool split = true;  // kMetaspace

  static PreTokenizerStep split_by(std::string regex, SplitBehavior how = SplitBehavior::kIsolated,
                                   bool invert_matches = false) {
    PreTokenizerStep s;
    s.kind = Kind::kSplit;
    s.pattern = std::move(regex);
    s.behavior = how;
    s.invert = invert_matches;
    return s;
  }
  static PreTokenizerStep of_kind(Kind kind) {
    PreTokenizerStep s;
    s.kind = kind;
    return s;
  }
};

// How ids become text. Each token first becomes its piece (byte-level tokens through the inverse byte table,
// <0xNN> byte tokens as their byte, `marker` as a space), the pieces are joined, then the whole text is
// trimmed as asked.
struct DecoderSpec {
  std::string marker;          // replaced by ' ' in every piece when non-empty (SentencePiece's U+2581)
  bool byte_fallback = false;  // <0xNN> tokens decode to their byte
  int strip_leading_spaces = 0;  // spaces removed from the start of the decoded text (HF Strip / Metaspace)
  bool wordpiece = false;        // "##x" joins its left neighbour, other tokens are separated by a space
  std::string wordpiece_prefix = "##";
  bool wordpiece_cleanup = false;  // " ." -> ".", " 's" -> "'s", ... (HF clean_up_tokenization)
};

struct TokenizerSpec {
  TokenizerModelKind model = TokenizerModelKind::kBpe;
  std::string source;  // where it came from, for messages ("tokenizer.json", a GGUF path, ...)

  // Vocabulary: id -> token text as stored (byte-level BPE: the GPT-2 unicode mapping of the bytes;
  // SentencePiece: U+2581 for spaces, "<0xNN>" byte tokens).
  std::vector<std::string> tokens;
  std::vector<float> scores;     // kSentencePiece: per token, higher merges first; may be empty otherwise
  std::vector<TokenType> types;  // per token; empty means all normal (added tokens still get their own types)

  // kBpe: merge pairs in priority order (first = merged first). The result of merging a and b is the token
  // a+b, which must exist.
  std::vector<std::pair<std::string, std::string>> merges;
  // kBpe without merges: any adjacent pair whose concatenation is a token merges, lowest id first (tiktoken
  // ranks are ids).
  bool merges_from_ranks = false;
  bool byte_level = false;     // kBpe: symbols are bytes through the GPT-2 byte<->unicode table
  bool byte_fallback = false;  // unknown characters become <0xNN> tokens
  bool ignore_merges = false;  // kBpe: a piece that is itself a token is emitted as is (Llama 3, tiktoken)
  bool fuse_unk = false;       // consecutive unknown characters give one unk
  // kWordPiece: what a vocabulary entry starts with when it begins a word (GGUF: U+2581, HF: nothing) and
  // when it continues one (HF: "##", GGUF: nothing).
  std::string word_start_prefix;
  std::string continuing_subword_prefix = "##";
  int max_input_chars_per_word = 100;             // kWordPiece: longer words are unk

  std::vector<AddedToken> added_tokens;
  std::vector<NormalizerStep> normalizer;
  std::vector<PreTokenizerStep> pre_tokenizer;
  DecoderSpec decoder;

  // Special ids, -1 when absent.
  int32_t bos_id = -1, eos_id = -1, eot_id = -1, eom_id = -1, unk_id = -1, pad_id = -1, sep_id = -1,
          mask_id = -1;
  // What encode(add_special = true) adds: BOS first, EOS then SEP last.
  bool add_bos = false, add_eos = false, add_sep = false;

  std::string chat_template;  // Jinja source, empty when none
};

}  // namespace qrt
