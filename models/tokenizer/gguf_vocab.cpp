// GGUF `tokenizer.ggml.*` metadata -> TokenizerSpec, with llama.cpp's semantics (spec/ggml.md §5).
#include <string>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/tokenizer_state.hpp"

namespace qrt {

namespace {

// The split regexes llama.cpp applies for each `tokenizer.ggml.pre` family. They are behaviour, not code:
// each is the pre-tokenizer regex of the HF tokenizer.json the family was converted from.
constexpr const char* kGpt2Regex = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
constexpr const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kTekkenRegex =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kO200kRegex =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// DeepSeek's "letters" class spelled out as the ranges its tokenizer.json lists (the cased letters of Latin,
// Greek, Cyrillic, Armenian, Georgian, Cherokee, ... as of the Unicode version it was made with).
constexpr const char* kDeepseekLlmLetters =
    "\\s?["
    "\\x{41}-\\x{5A}\\x{61}-\\x{7A}\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}"
    "\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}"
    "\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}"
    "\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}"
    "\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}"
    "\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}"
    "\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}"
    "\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}"
    "\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}"
    "\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}"
    "\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}"
    "\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}"
    "\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"
    "]+";
// [一-龥ࠀ-一가-퟿]+ as DeepSeek writes it: CJK ideographs, U+0800..U+4E00 and Hangul.
constexpr const char* kDeepseekCjk = "[\\x{4E00}-\\x{9FA5}\\x{800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+";

struct PreFamily {
  std::vector<std::string> regexes;
  bool ignore_merges = false;
  bool add_bos = false;
};

Result<PreFamily> pre_family(std::string_view pre) {
  const auto is = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view n : names) {
      if (pre == n) return true;
    }
    return false;
  };
  if (pre.empty() || pre == "default") {
    return PreFamily{{"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2Regex, "\\p{N}+", "[0-9][0-9][0-9]"}};
  }
  if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
    return PreFamily{{kLlama3Regex}, /*ignore_merges=*/true, /*add_bos=*/true};
  }
  if (is({"dbrx", "smaug-bpe", "chatglm-bpe", "glm4"})) return PreFamily{{kLlama3Regex}};
  if (is({"qwen2", "qwen2.5", "qwen-2.5", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan", "grok-2"})) {
    return PreFamily{{kQwen2Regex}};
  }
  if (pre == "deepseek-llm") {
    return PreFamily{{"[\\r\\n]", kDeepseekLlmLetters,
                      // ASCII and full-width punctuation, curly quotes, CJK space and full stops
                      "\\s?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}\\x{3000}-\\x{3002}]+",
                      "\\s+$", kDeepseekCjk, "\\p{N}+"}};
  }
  if (pre == "deepseek-coder") {
    return PreFamily{{"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kDeepseekCjk, "\\p{N}"}};
  }
  if (pre == "deepseek-v3") {
    return PreFamily{{"\\p{N}{1,3}",
                      // CJK ideographs, hiragana, katakana
                      "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
                      "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
                      " ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}};
  }
  if (pre == "falcon") return PreFamily{{"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2Regex, "[0-9][0-9][0-9]"}};
  if (is({"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
    return PreFamily{{"\\p{N}", kGpt2Regex}};
  }
  if (is({"gpt-2", "phi-2", "mpt", "olmo", "jais", "trillion", "granite-docling", "jina-es", "jina-de",
          "jina-v1-en", "jina-v2-es", "jina-v2-de", "jina-v2-code", "roberta-bpe", "gigachat", "a.x-4.0",
          "mellum"})) {
    return PreFamily{{kGpt2Regex}};
  }
  if (pre == "tekken") return PreFamily{{kTekkenRegex}};
  if (is({"gpt-4o", "llama4", "minimax-m2"})) return PreFamily{{kO200kRegex}};
  return unsupported("tokenizer.ggml.pre \"" + std::string(pre) + "\" is not a pre-tokenizer qrt knows");
}

TokenType token_type_from_gguf(int32_t code) {
  return code >= 0 && code <= 6 ? static_cast<TokenType>(code) : TokenType::kUndefined;
}

}  // namespace

Result<std::vector<std::string>> gguf_pre_tokenizer_regexes(std::string_view pre) {
  QRT_ASSIGN_OR_RETURN(PreFamily family, pre_family(pre));
  return family.regexes;
}

Result<TokenizerSpec> tokenizer_spec_from_gguf(const GgufTokenizerMetadata& meta) {
  const std::string& src = meta.source;
  TokenizerSpec spec;
  spec.source = src;
  const size_t n = meta.tokens.size();
  if (n == 0) return format_error(src + ": tokenizer.ggml.tokens is missing or empty");
  if (!meta.scores.empty() && meta.scores.size() != n) {
    return format_error(src + ": tokenizer.ggml.scores has " + std::to_string(meta.scores.size()) +
                        " entries for " + std::to_string(n) + " tokens");
  }
  if (!meta.token_types.empty() && meta.token_types.size() != n) {
    return format_error(src + ": tokenizer.ggml.token_type has " + std::to_string(meta.token_types.size()) +
                        " entries for " + std::to_string(n) + " tokens");
  }
  spec.tokens = meta.tokens;
  for (size_t id = 0; id < n; ++id) {
    // llama.cpp gives empty entries a placeholder text so that they never match input.
    if (spec.tokens[id].empty()) spec.tokens[id] = "[EMPTY_" + std::to_string(id) + "]";
  }
  spec.types.resize(n, TokenType::kNormal);
  for (size_t id = 0; id < meta.token_types.size(); ++id) spec.types[id] = token_type_from_gguf(meta.token_types[id]);
  spec.chat_template = meta.chat_template;

  const auto id_or = [&](const std::optional<int64_t>& given, int64_t fallback) -> int32_t {
    const int64_t id = given ? *given : fallback;
    return id >= 0 && id < static_cast<int64_t>(n) ? static_cast<int32_t>(id) : -1;
  };
  const auto check_id = [&](const char* key, const std::optional<int64_t>& id) -> Status {
    if (id && (*id < 0 || *id >= static_cast<int64_t>(n))) {
      return format_error(src + ": tokenizer.ggml." + key + " = " + std::to_string(*id) +
                          " is outside the vocabulary of " + std::to_string(n));
    }
    return ok_status();
  };
  QRT_TRY(check_id("bos_token_id", meta.bos_id));
  QRT_TRY(check_id("eos_token_id", meta.eos_id));
  QRT_TRY(check_id("unknown_token_id", meta.unk_id));

  bool add_space_prefix = false;
  if (meta.model == "llama") {
    spec.model = TokenizerModelKind::kSentencePiece;
    spec.scores = meta.scores.empty() ? std::vector<float>(n, 0.0f) : meta.scores;
    spec.byte_fallback = true;
    spec.bos_id = id_or(meta.bos_id, 1);
    spec.eos_id = id_or(meta.eos_id, 2);
    spec.unk_id = id_or(meta.unk_id, 0);
    spec.add_bos = true;
    add_space_prefix = meta.add_space_prefix.value_or(true);
    if (add_space_prefix) spec.normalizer.push_back(NormalizerStep::prepend(" "));
    spec.normalizer.push_back(NormalizerStep::replace(" ", "\xE2\x96\x81"));
    spec.decoder.marker = "\xE2\x96\x81";
    spec.decoder.byte_fallback = true;
    spec.decoder.strip_leading_spaces = add_space_prefix ? 1 : 0;
  } else if (meta.model == "gpt2") {
    spec.model = TokenizerModelKind::kBpe;
    spec.byte_level = true;
    if (meta.merges.empty()) return format_error(src + ": tokenizer.ggml.merges is missing for a gpt2 tokenizer");
    spec.merges.reserve(meta.merges.size());
    for (size_t i = 0; i < meta.merges.size(); ++i) {
      const std::string& merge = meta.merges[i];
      // "left right", split at the first space after the first character (a merge may start with a space).
      const size_t space = merge.find(' ', 1);
      if (space == std::string::npos) {
        return format_error(src + ": tokenizer.ggml.merges[" + std::to_string(i) + "] = \"" + merge +
                            "\" has no separating space");
      }
      spec.merges.emplace_back(merge.substr(0, space), merge.substr(space + 1));
    }
    QRT_ASSIGN_OR_RETURN(PreFamily family, pre_family(meta.pre));
    for (std::string& regex : family.regexes) {
      spec.pre_tokenizer.push_back(PreTokenizerStep::split_by(std::move(regex)));
    }
    spec.ignore_merges = family.ignore_merges;
    spec.add_bos = family.add_bos;
    spec.bos_id = id_or(meta.bos_id, 11);
    spec.eos_id = id_or(meta.eos_id, 11);
    spec.unk_id = id_or(meta.unk_id, -1);
    add_space_prefix = meta.add_space_prefix.value_or(false);
    if (add_space_prefix) {
      PreTokenizerStep prefix = PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kByteLevel);
      prefix.add_prefix_space = true;
      prefix.use_regex = false;
      spec.pre_tokenizer.insert(spec.pre_tokenizer.begin(), prefix);
    }
  } else if (meta.model == "bert") {
    // The GGUF converter stores word-initial pieces with a U+2581 prefix and continuations bare.
    spec.model = TokenizerModelKind::kWordPiece;
    spec.word_start_prefix = "\xE2\x96\x81";
    spec.continuing_subword_prefix = "";
    spec.normalizer.push_back(NormalizerStep::of_kind(NormalizerStep::Kind::kBert));
    spec.pre_tokenizer.push_back(PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kBert));
    spec.bos_id = id_or(meta.cls_id ? meta.cls_id : meta.bos_id, 101);
    spec.sep_id = id_or(meta.sep_id, 102);
    spec.unk_id = id_or(meta.unk_id, 100);
    spec.eos_id = id_or(meta.eos_id, -1);
    spec.add_bos = true;
    spec.add_sep = true;
    spec.decoder.marker = "\xE2\x96\x81";
    spec.decoder.strip_leading_spaces = 1;
  } else {
    return unsupported(src + ": tokenizer.ggml.model \"" + meta.model +
                       "\" is not supported (llama, gpt2 and bert are)");
  }
  spec.eot_id = id_or(meta.eot_id, -1);
  spec.eom_id = id_or(meta.eom_id, -1);
  spec.pad_id = id_or(meta.pad_id, -1);
  if (spec.sep_id < 0) spec.sep_id = id_or(meta.sep_id, -1);
  spec.mask_id = id_or(meta.mask_id, -1);
  if (meta.add_bos) spec.add_bos = *meta.add_bos;
  if (meta.add_eos) spec.add_eos = *meta.add_eos;
  if (meta.add_sep) spec.add_sep = *meta.add_sep;
  if (spec.add_bos && spec.bos_id < 0) spec.add_bos = false;
  if (spec.add_eos && spec.eos_id < 0) spec.add_eos = false;
  if (spec.add_sep && spec.sep_id < 0) spec.add_sep = false;

  // Control, user-defined and unknown tokens are matched in the raw text before tokenizing; user-defined
  // ones always, the others only when specials are parsed.
  for (size_t id = 0; id < n; ++id) {
    const TokenType type = spec.types[id];
    if (type != TokenType::kControl && type != TokenType::kUserDefined && type != TokenType::kUnknown) continue;
    AddedToken added;
    added.id = static_cast<int32_t>(id);
    added.content = spec.tokens[id];
    added.special = type != TokenType::kUserDefined;
    spec.added_tokens.push_back(std::move(added));
  }
  return spec;
}

}  // namespace qrt
