// Hugging Face tokenizer.json (+ tokenizer_config.json) -> TokenizerSpec. Every component is translated into
// the spec's steps with the semantics of the `tokenizers` library; anything unknown is an error naming it.
#include <nlohmann/json.hpp>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/regex.hpp"
#include "models/tokenizer/unicode.hpp"

namespace qrt {

namespace {

using nlohmann::json;
using tokenizer_detail::Regex;

// Typed access that never throws: a missing key gives the fallback, a wrong type an error.
class JsonFields {
 public:
  JsonFields(const json& object, std::string where, const std::string& source)
      : object_(object), where_(std::move(where)), source_(source) {}

  const json* find(const char* key) const {
    if (!object_.is_object()) return nullptr;
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  Result<bool> boolean(const char* key, bool fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) return wrong(key, "a boolean", *v);
    return v->get<bool>();
  }
  Result<int64_t> integer(const char* key, int64_t fallback) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_number_integer()) return wrong(key, "an integer", *v);
    return v->get<int64_t>();
  }
  Result<std::string> string(const char* key, std::string fallback = {}) const {
    const json* v = find(key);
    if (!v) return fallback;
    if (!v->is_string()) return wrong(key, "a string", *v);
    return v->get<std::string>();
  }
  Status wrong(const char* key, const char* expected, const json& found) const {
    return format_error(source_ + ": " + where_ + "." + key + " should be " + expected + ", found " +
                        std::string(found.type_name()));
  }
  Status error(const std::string& message) const { return format_error(source_ + ": " + where_ + ": " + message); }

 private:
  const json& object_;
  std::string where_;
  const std::string& source_;
};

// {"String": "x"} -> a regex matching x literally; {"Regex": "r"} -> r.
Result<std::string> pattern_of(const JsonFields& fields) {
  const json* pattern = fields.find("pattern");
  if (!pattern || !pattern->is_object()) return fields.error("expected a pattern object {String|Regex}");
  const auto literal = pattern->find("String");
  if (literal != pattern->end() && literal->is_string()) return Regex::escape(literal->get<std::string>());
  const auto regex = pattern->find("Regex");
  if (regex != pattern->end() && regex->is_string()) return regex->get<std::string>();
  return fields.error("the pattern is neither {String: ...} nor {Regex: ...}");
}

// The content of a token given as "text" or {"content": "text", ...}.
std::string token_content(const json* value) {
  if (!value) return {};
  if (value->is_string()) return value->get<std::string>();
  if (value->is_object()) {
    const auto it = value->find("content");
    if (it != value->end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

class HfConverter {
 public:
  // max_id: ids above it are refused, so a bad file cannot make the vocabulary table huge.
  HfConverter(TokenizerSpec& spec, int64_t max_id) : spec_(spec), max_id_(max_id) {}

  Status model(const json& node);
  Status added_tokens(const json& node);
  Status normalizer(const json& node);
  Status pre_tokenizer(const json& node);
  Status post_processor(const json& node);
  Status decoder(const json& node);
  int32_t id_of(const std::string& text) const {
    const auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
  }

 private:
  TokenizerSpec& spec_;
  int64_t max_id_;
  std::unordered_map<std::string, int32_t> ids_;
  std::string unk_token_;

  Status set_token(int64_t id, const std::string& text, TokenType type) {
    if (id < 0 || id > max_id_) {
      return format_error(spec_.source + ": token \"" + text + "\" has id " + std::to_string(id) +
                          ", expected 0.." + std::to_string(max_id_) + " for this many tokens");
    }
    if (static_cast<size_t>(id) >= spec_.tokens.size()) {
      spec_.tokens.resize(id + 1);
      spec_.types.resize(id + 1, TokenType::kUndefined);
    }
    spec_.tokens[id] = text;
    spec_.types[id] = type;
    ids_[text] = static_cast<int32_t>(id);
    return ok_status();
  }
};

Status HfConverter::model(const json& node) {
  JsonFields f(node, "model", spec_.source);
  QRT_ASSIGN_OR_RETURN(std::string type, f.string("type"));
  if (type.empty()) type = f.find("merges") ? "BPE" : "WordPiece";
  const json* vocab = f.find("vocab");
  if (!vocab || !vocab->is_object()) return f.error("expected a vocab object of token -> id");
  for (const auto& [text, id] : vocab->items()) {
    if (!id.is_number_integer()) return f.error("vocab entry \"" + text + "\" has a non-integer id");
    QRT_TRY(set_token(id.get<int64_t>(), text, TokenType::kNormal));
  }
  QRT_ASSIGN_OR_RETURN(unk_token_, f.string("unk_token"));
  if (type == "BPE") {
    spec_.model = TokenizerModelKind::kBpe;
    QRT_ASSIGN_OR_RETURN(spec_.byte_fallback, f.boolean("byte_fallback", false));
    QRT_ASSIGN_OR_RETURN(spec_.ignore_merges, f.boolean("ignore_merges", false));
    QRT_ASSIGN_OR_RETURN(spec_.fuse_unk, f.boolean("fuse_unk", false));
    QRT_ASSIGN_OR_RETURN(std::string prefix, f.string("continuing_subword_prefix"));
    QRT_ASSIGN_OR_RETURN(std::string suffix, f.string("end_of_word_suffix"));
    if (!prefix.empty() || !suffix.empty()) {
      return unsupported(spec_.source + ": BPE with a continuing_subword_prefix or end_of_word_suffix");
    }
    const json* merges = f.find("merges");
    if (!merges || !merges->is_array()) return f.error("expected a merges array");
    spec_.merges.reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      const json& m = (*merges)[i];
      if (m.is_string()) {
        const std::string& text = m.get_ref<const std::string&>();
        const size_t space = text.find(' ', 1);
        if (space == std::string::npos) return f.error("merge " + std::to_string(i) + " has no space");
        spec_.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        spec_.merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        return f.error("merge " + std::to_string(i) + " is neither \"a b\" nor [a, b]");
      }
    }
    if (spec_.byte_fallback) {
      for (size_t id = 0; id < spec_.tokens.size(); ++id) {
        if (tokenizer_detail::parse_byte_token(spec_.tokens[id]) >= 0) spec_.types[id] = TokenType::kByte;
      }
    }
  } else if (type == "WordPiece") {
    spec_.model = TokenizerModelKind::kWordPiece;
    QRT_ASSIGN_OR_RETURN(spec_.continuing_subword_prefix, f.string("continuing_subword_prefix", "##"));
    QRT_ASSIGN_OR_RETURN(int64_t max_chars, f.integer("max_input_chars_per_word", 100));
    spec_.max_input_chars_per_word = static_cast<int>(std::clamp<int64_t>(max_chars, 0, 1 << 20));
  } else {
    return unsupported(spec_.source + ": tokenizer model \"" + type + "\" (BPE and WordPiece are supported)");
  }
  return ok_status();
}

Status HfConverter::added_tokens(const json& node) {
  if (node.is_null()) return ok_status();
  if (!node.is_array()) return format_error(spec_.source + ": added_tokens should be an array");
  for (const json& entry : node) {
    JsonFields f(entry, "added_tokens[]", spec_.source);
    QRT_ASSIGN_OR_RETURN(int64_t id, f.integer("id", -1));
    QRT_ASSIGN_OR_RETURN(std::string content, f.string("content"));
    if (id < 0 || content.empty()) return f.error("an added token needs an id and a non-empty content");
    AddedToken added;
    added.id = static_cast<int32_t>(id);
    added.content = content;
    QRT_ASSIGN_OR_RETURN(added.special, f.boolean("special", false));
    QRT_ASSIGN_OR_RETURN(added.lstrip, f.boolean("lstrip", false));
    QRT_ASSIGN_OR_RETURN(added.rstrip, f.boolean("rstrip", false));
    QRT_ASSIGN_OR_RETURN(added.single_word, f.boolean("single_word", false));
    QRT_TRY(set_token(id, content, added.special ? TokenType::kControl : TokenType::kUserDefined));
    spec_.added_tokens.push_back(std::move(added));
  }
  return ok_status();
}

Status HfConverter::normalizer(const json& node) {
  if (node.is_null()) return ok_status();
  JsonFields f(node, "normalizer", spec_.source);
  QRT_ASSIGN_OR_RETURN(std::string type, f.string("type"));
  if (type == "Sequence") {
    const json* list = f.find("normalizers");
    if (!list || !list->is_array()) return f.error("expected a normalizers array");
    for (const json& child : *list) QRT_TRY(normalizer(child));
  } else if (type == "Prepend") {
    QRT_ASSIGN_OR_RETURN(std::string prepend, f.string("prepend"));
    spec_.normalizer.push_back(NormalizerStep::prepend(prepend));
  } else if (type == "Replace") {
    QRT_ASSIGN_OR_RETURN(std::string pattern, pattern_of(f));
    QRT_ASSIGN_OR_RETURN(std::string content, f.string("content"));
    spec_.normalizer.push_back(NormalizerStep::replace(pattern, content));
  } else if (type == "Lowercase") {
    spec_.normalizer.push_back(NormalizerStep::of_kind(NormalizerStep::Kind::kLowercase));
  } else if (type == "Strip") {
    NormalizerStep step = NormalizerStep::of_kind(NormalizerStep::Kind::kStrip);
    QRT_ASSIGN_OR_RETURN(step.strip_left, f.boolean("strip_left", true));
    QRT_ASSIGN_OR_RETURN(step.strip_right, f.boolean("strip_right", true));
    spec_.normalizer.push_back(step);
  } else if (type == "BertNormalizer") {
    NormalizerStep step = NormalizerStep::of_kind(NormalizerStep::Kind::kBert);
    QRT_ASSIGN_OR_RETURN(step.clean_text, f.boolean("clean_text", true));
    QRT_ASSIGN_OR_RETURN(step.handle_chinese_chars, f.boolean("handle_chinese_chars", true));
    QRT_ASSIGN_OR_RETURN(step.lowercase, f.boolean("lowercase", true));
    // strip_accents null means "as lowercase".
    QRT_ASSIGN_OR_RETURN(step.strip_accents, f.boolean("strip_accents", step.lowercase));
    spec_.normalizer.push_back(step);
  } else if (type == "NFC") {
    spec_.normalizer.push_back(NormalizerStep::unicode(UnicodeForm::kNfc));
  } else if (type == "NFD") {
    spec_.normalizer.push_back(NormalizerStep::unicode(UnicodeForm::kNfd));
  } else if (type == "NFKC") {
    spec_.normalizer.push_back(NormalizerStep::unicode(UnicodeForm::kNfkc));
  } else if (type == "NFKD") {
    spec_.normalizer.push_back(NormalizerStep::unicode(UnicodeForm::kNfkd));
  } else if (type == "StripAccents") {
    spec_.normalizer.push_back(NormalizerStep::of_kind(NormalizerStep::Kind::kStripAccents));
  } else {
    return unsupported(spec_.source + ": normalizer \"" + type + "\"");
  }
  return ok_status();
}

Status HfConverter::pre_tokenizer(const json& node) {
  if (node.is_null()) return ok_status();
  JsonFields f(node, "pre_tokenizer", spec_.source);
  QRT_ASSIGN_OR_RETURN(std::string type, f.string("type"));
  if (!spec_.pre_tokenizer.empty() && spec_.pre_tokenizer.back().kind == PreTokenizerStep::Kind::kByteLevel &&
      type != "Sequence") {
    return unsupported(spec_.source + ": a pre-tokenizer after ByteLevel (" + type + ")");
  }
  if (type == "Sequence") {
    const json* list = f.find("pretokenizers");
    if (!list || !list->is_array()) return f.error("expected a pretokenizers array");
    for (const json& child : *list) QRT_TRY(pre_tokenizer(child));
  } else if (type == "Split") {
    PreTokenizerStep step = PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kSplit);
    QRT_ASSIGN_OR_RETURN(step.pattern, pattern_of(f));
    QRT_ASSIGN_OR_RETURN(step.invert, f.boolean("invert", false));
    QRT_ASSIGN_OR_RETURN(std::string behavior, f.string("behavior", "Isolated"));
    if (behavior == "Isolated") {
      step.behavior = SplitBehavior::kIsolated;
    } else if (behavior == "Removed") {
      step.behavior = SplitBehavior::kRemoved;
    } else if (behavior == "MergedWithPrevious") {
      step.behavior = SplitBehavior::kMergedWithPrevious;
    } else if (behavior == "MergedWithNext") {
      step.behavior = SplitBehavior::kMergedWithNext;
    } else if (behavior == "Contiguous") {
      step.behavior = SplitBehavior::kContiguous;
    } else {
      return f.error("unknown split behavior \"" + behavior + "\"");
    }
    spec_.pre_tokenizer.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    PreTokenizerStep step = PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kByteLevel);
    QRT_ASSIGN_OR_RETURN(step.add_prefix_space, f.boolean("add_prefix_space", true));
    QRT_ASSIGN_OR_RETURN(step.use_regex, f.boolean("use_regex", true));
    spec_.pre_tokenizer.push_back(step);
    spec_.byte_level = true;
  } else if (type == "Digits") {
    PreTokenizerStep step = PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kDigits);
    QRT_ASSIGN_OR_RETURN(step.individual_digits, f.boolean("individual_digits", false));
    spec_.pre_tokenizer.push_back(step);
  } else if (type == "Metaspace") {
    PreTokenizerStep step = PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kMetaspace);
    QRT_ASSIGN_OR_RETURN(step.replacement, f.string("replacement", "\xE2\x96\x81"));
    QRT_ASSIGN_OR_RETURN(step.split, f.boolean("split", true));
    QRT_ASSIGN_OR_RETURN(bool add_prefix_space, f.boolean("add_prefix_space", true));
    QRT_ASSIGN_OR_RETURN(std::string scheme, f.string("prepend_scheme", add_prefix_space ? "always" : "never"));
    if (scheme == "always") {
      step.prepend_scheme = PrependScheme::kAlways;
    } else if (scheme == "first") {
      step.prepend_scheme = PrependScheme::kFirst;
    } else if (scheme == "never") {
      step.prepend_scheme = PrependScheme::kNever;
    } else {
      return f.error("unknown prepend_scheme \"" + scheme + "\"");
    }
    spec_.pre_tokenizer.push_back(std::move(step));
  } else if (type == "WhitespaceSplit") {
    spec_.pre_tokenizer.push_back(PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kWhitespaceSplit));
  } else if (type == "Whitespace") {
    // Runs of word characters and runs of other non-space characters; whitespace goes.
    spec_.pre_tokenizer.push_back(PreTokenizerStep::split_by("\\w+|[^\\w\\s]+", SplitBehavior::kRemoved, true));
  } else if (type == "BertPreTokenizer") {
    spec_.pre_tokenizer.push_back(PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kBert));
  } else if (type == "Punctuation") {
    QRT_ASSIGN_OR_RETURN(std::string behavior, f.string("behavior", "Isolated"));
    if (behavior != "Isolated") return unsupported(spec_.source + ": Punctuation with behavior " + behavior);
    // Each punctuation character (Unicode P* or ASCII punctuation) on its own.
    spec_.pre_tokenizer.push_back(PreTokenizerStep::split_by("[\\p{P}!-/:-@\\[-`{-~]"));
  } else {
    return unsupported(spec_.source + ": pre-tokenizer \"" + type + "\"");
  }
  return ok_status();
}

Status HfConverter::post_processor(const json& node) {
  if (node.is_null()) return ok_status();
  JsonFields f(node, "post_processor", spec_.source);
  QRT_ASSIGN_OR_RETURN(std::string type, f.string("type"));
  if (type == "Sequence") {
    const json* list = f.find("processors");
    if (!list || !list->is_array()) return f.error("expected a processors array");
    for (const json& child : *list) QRT_TRY(post_processor(child));
  } else if (type == "ByteLevel") {
    // Offsets only; ids are unchanged.
  } else if (type == "TemplateProcessing") {
    const json* single = f.find("single");
    if (!single || !single->is_array()) return f.error("expected a single template array");
    std::vector<std::string> before, after;
    bool seen_sequence = false;
    for (const json& item : *single) {
      if (item.is_object() && item.contains("Sequence")) {
        seen_sequence = true;
      } else if (item.is_object() && item.contains("SpecialToken") && item.at("SpecialToken").is_object()) {
        const json& special = item.at("SpecialToken");
        const auto id = special.find("id");
        (seen_sequence ? after : before).push_back(token_content(id == special.end() ? nullptr : &*id));
      } else {
        return f.error("unknown template item " + item.dump());
      }
    }
    if (before.size() > 1 || after.size() > 1) {
      return unsupported(spec_.source + ": a template adding more than one token on a side");
    }
    if (!before.empty()) {
      spec_.bos_id = id_of(before[0]);
      if (spec_.bos_id < 0) return f.error("template token \"" + before[0] + "\" is not in the vocabulary");
      spec_.add_bos = true;
    }
    if (!after.empty()) {
      const int32_t id = id_of(after[0]);
      if (id < 0) return f.error("template token \"" + after[0] + "\" is not in the vocabulary");
      spec_.eos_id = id;
      spec_.add_eos = true;
    }
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    // {"cls": ["[CLS]", 101], "sep": ["[SEP]", 102]}
    const json* cls = f.find("cls");
    const json* sep = f.find("sep");
    const auto id_in = [](const json* pair) -> int64_t {
      return pair && pair->is_array() && pair->size() == 2 && (*pair)[1].is_number_integer() ? (*pair)[1].get<int64_t>()
                                                                                          : -1;
    };
    const int64_t cls_id = id_in(cls), sep_id = id_in(sep);
    if (cls_id < 0 || sep_id < 0) return f.error("expected cls and sep as [text, id]");
    spec_.bos_id = static_cast<int32_t>(cls_id);
    spec_.sep_id = static_cast<int32_t>(sep_id);
    spec_.add_bos = spec_.add_sep = true;
  } else {
    return unsupported(spec_.source + ": post-processor \"" + type + "\"");
  }
  return ok_status();
}

Status HfConverter::decoder(const json& node) {
  if (node.is_null()) return ok_status();
  JsonFields f(node, "decoder", spec_.source);
  QRT_ASSIGN_OR_RETURN(std::string type, f.string("type"));
  DecoderSpec& d = spec_.decoder;
  if (type == "Sequence") {
    const json* list = f.find("decoders");
    if (!list || !list->is_array()) return f.error("expected a decoders array");
    for (const json& child : *list) QRT_TRY(decoder(child));
  } else if (type == "ByteLevel") {
    spec_.byte_level = true;
  } else if (type == "Fuse") {
    // Joining is what decode does anyway.
  } else if (type == "ByteFallback") {
    d.byte_fallback = true;
  } else if (type == "Replace") {
    const json* pattern = f.find("pattern");
    QRT_ASSIGN_OR_RETURN(std::string content, f.string("content"));
    std::string from;
    if (pattern && pattern->is_object()) {
      const auto literal = pattern->find("String");
      if (literal != pattern->end() && literal->is_string()) from = literal->get<std::string>();
    }
    if (from.empty() || content != " ") {
      return unsupported(spec_.source + ": decoder Replace other than \"<string>\" -> \" \"");
    }
    d.marker = from;
  } else if (type == "Strip") {
    QRT_ASSIGN_OR_RETURN(std::string content, f.string("content", " "));
    QRT_ASSIGN_OR_RETURN(int64_t start, f.integer("start", 0));
    QRT_ASSIGN_OR_RETURN(int64_t stop, f.integer("stop", 0));
    if (content != " " || stop != 0 || start < 0 || start > 64) {
      return unsupported(spec_.source + ": decoder Strip other than leading spaces");
    }
    d.strip_leading_spaces = static_cast<int>(start);
  } else if (type == "Metaspace") {
    QRT_ASSIGN_OR_RETURN(d.marker, f.string("replacement", "\xE2\x96\x81"));
    QRT_ASSIGN_OR_RETURN(bool add_prefix_space, f.boolean("add_prefix_space", true));
    QRT_ASSIGN_OR_RETURN(std::string scheme, f.string("prepend_scheme", add_prefix_space ? "always" : "never"));
    d.strip_leading_spaces = scheme == "never" ? 0 : 1;
  } else if (type == "WordPiece") {
    d.wordpiece = true;
    QRT_ASSIGN_OR_RETURN(d.wordpiece_prefix, f.string("prefix", "##"));
    QRT_ASSIGN_OR_RETURN(d.wordpiece_cleanup, f.boolean("cleanup", true));
  } else {
    return unsupported(spec_.source + ": decoder \"" + type + "\"");
  }
  return ok_status();
}

}  // namespace

Result<TokenizerSpec> tokenizer_spec_from_hf_json(std::string_view tokenizer_json, std::string_view tokenizer_config_json,
                                                  std::string source) {
  TokenizerSpec spec;
  spec.source = std::move(source);
  const json root = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) return format_error(spec.source + ": not a JSON object");
  json config = json::object();
  if (!tokenizer_config_json.empty()) {
    config = json::parse(tokenizer_config_json, nullptr, /*allow_exceptions=*/false);
    if (config.is_discarded() || !config.is_object()) {
      return format_error(spec.source + ": tokenizer_config.json is not a JSON object");
    }
  }
  const auto node = [](const json& object, const char* key) -> const json& {
    static const json kNull;
    const auto it = object.find(key);
    return it == object.end() ? kNull : *it;
  };

  if (!node(root, "model").is_object()) return format_error(spec.source + ": no model object");
  // Ids may leave holes (unused ids), but not more than the vocabulary holds plus some slack.
  const size_t entries = node(node(root, "model"), "vocab").size() + node(root, "added_tokens").size();
  HfConverter converter(spec, static_cast<int64_t>(entries) + 4096);
  QRT_TRY(converter.model(node(root, "model")));
  QRT_TRY(converter.added_tokens(node(root, "added_tokens")));
  QRT_TRY(converter.normalizer(node(root, "normalizer")));
  QRT_TRY(converter.pre_tokenizer(node(root, "pre_tokenizer")));
  QRT_TRY(converter.post_processor(node(root, "post_processor")));
  QRT_TRY(converter.decoder(node(root, "decoder")));

  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.tokens[id].empty()) {
      // A hole in the ids: keep the id unusable rather than shifting every later token.
      spec.tokens[id] = "[EMPTY_" + std::to_string(id) + "]";
      spec.types[id] = TokenType::kUnused;
    } else if (spec.types[id] == TokenType::kUndefined) {
      spec.types[id] = TokenType::kNormal;
    }
  }

  // Special tokens: tokenizer_config.json names them; the model names unk.
  const auto id_from_config = [&](const char* key) {
    const auto it = config.find(key);
    return converter.id_of(token_content(it == config.end() ? nullptr : &*it));
  };
  if (int32_t id = id_from_config("bos_token"); id >= 0) spec.bos_id = id;
  if (int32_t id = id_from_config("eos_token"); id >= 0) spec.eos_id = id;
  if (int32_t id = id_from_config("pad_token"); id >= 0) spec.pad_id = id;
  if (int32_t id = id_from_config("unk_token"); id >= 0) spec.unk_id = id;
  if (int32_t id = id_from_config("sep_token"); id >= 0) spec.sep_id = id;
  if (int32_t id = id_from_config("mask_token"); id >= 0) spec.mask_id = id;
  if (const json& unk = node(node(root, "model"), "unk_token"); unk.is_string()) {
    if (int32_t id = converter.id_of(unk.get<std::string>()); id >= 0) {
      spec.unk_id = id;
      spec.types[id] = TokenType::kUnknown;
    }
  }
  if (spec.eos_id < 0) {
    for (const char* text : {"</s>", "<|endoftext|>", "<|end_of_text|>"}) {
      if (int32_t id = converter.id_of(text); id >= 0) {
        spec.eos_id = id;
        break;
      }
    }
  }
  JsonFields c(config, "tokenizer_config", spec.source);
  QRT_ASSIGN_OR_RETURN(spec.add_bos, c.boolean("add_bos_token", spec.add_bos));
  QRT_ASSIGN_OR_RETURN(spec.add_eos, c.boolean("add_eos_token", spec.add_eos));
  if (spec.add_bos && spec.bos_id < 0) return format_error(spec.source + ": add_bos_token without a bos_token");
  if (spec.add_eos && spec.eos_id < 0) return format_error(spec.source + ": add_eos_token without an eos_token");

  if (const json* chat = c.find("chat_template")) {
    if (chat->is_string()) {
      spec.chat_template = chat->get<std::string>();
    } else if (chat->is_array()) {
      // Named templates: [{"name": "default", "template": "..."}, ...]; "default" wins, else the first.
      for (const json& entry : *chat) {
        if (!entry.is_object() || !entry.contains("template") || !entry.at("template").is_string()) continue;
        const bool is_default = entry.contains("name") && entry.at("name") == "default";
        if (spec.chat_template.empty() || is_default) spec.chat_template = entry.at("template").get<std::string>();
        if (is_default) break;
      }
    }
  }
  return spec;
}

}  // namespace qrt
