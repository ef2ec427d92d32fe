#include "tools/convert/spm_vocab.hpp"

#include <algorithm>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace qrt::convert {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// llama.cpp's token types.
constexpr int32_t kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;
constexpr const char* kSpace = "\xE2\x96\x81";  // "▁"

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

bool is_byte_token(const std::string& t) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

// How the tokenizer turns text into the pieces it merges: spaces must become "▁" (normalizer Replace or a
// Metaspace pre-tokenizer that does not split), and *prepend says whether a "▁" goes before the text.
Status spm_spacing(const json& tok, bool* prepend) {
  bool replace = false;
  *prepend = false;
  const json norm = tok.contains("normalizer") ? tok["normalizer"] : json();
  std::vector<json> steps;
  if (norm.is_object() && norm.value("type", "") == "Sequence" && norm.contains("normalizers"))
    steps.assign(norm["normalizers"].begin(), norm["normalizers"].end());
  else if (norm.is_object())
    steps.push_back(norm);
  for (const json& s : steps) {
    const std::string type = s.value("type", "");
    if (type == "Prepend" && s.value("prepend", "") == kSpace) {
      *prepend = true;
    } else if (type == "Replace" && s.contains("pattern") && s["pattern"].is_object() &&
               s["pattern"].value("String", "") == " " && s.value("content", "") == kSpace) {
      replace = true;
    } else {
      return unsupported("tokenizer.json normalizer step \"" + type +
                         "\" has no GGUF counterpart for a SentencePiece-style vocabulary");
    }
  }
  const json pre = tok.contains("pre_tokenizer") ? tok["pre_tokenizer"] : json();
  // Gemma 3's tokenizer.json splits at " " after its normalizer has replaced every space with "▁": nothing is left
  // to split at, so the step changes nothing.
  const bool split_at_replaced_spaces =
      replace && pre.is_object() && pre.value("type", "") == "Split" && pre.contains("pattern") &&
      pre["pattern"].is_object() && pre["pattern"].value("String", "") == " " && !pre.value("invert", false);
  if (pre.is_object() && !split_at_replaced_spaces) {
    if (pre.value("type", "") != "Metaspace" || pre.value("replacement", "") != kSpace)
      return unsupported("tokenizer.json pre_tokenizer \"" + pre.value("type", "") +
                         "\" has no GGUF counterpart for a SentencePiece-style vocabulary");
    if (pre.value("split", false))
      return unsupported("a Metaspace pre-tokenizer that splits at spaces has no GGUF counterpart (llama.cpp merges "
                         "across them)");
    replace = true;
    const std::string scheme = pre.value("prepend_scheme", pre.value("add_prefix_space", true) ? "always" : "never");
    *prepend = *prepend || scheme == "always" || scheme == "first";
  }
  if (!replace) return unsupported("tokenizer.json does not turn spaces into \"▁\" (not SentencePiece-style)");
  return ok_status();
}

// Byte offsets where a UTF-8 string may be split (after each character but the last).
std::vector<size_t> char_boundaries(const std::string& s) {
  std::vector<size_t> out;
  for (size_t i = 1; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(i);
  return out;
}

}  // namespace

Result<std::map<int32_t, HfToken>> hf_tokens_by_id(const json& tok) {
  std::map<int32_t, HfToken> by_id;
  const json& model = tok["model"];
  if (!model.contains("vocab") || !model["vocab"].is_object())
    return format_error("tokenizer.json model has no vocab object");
  auto valid = [](const json& id) {
    return id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < (int64_t{1} << 24);
  };
  for (const auto& [text, id] : model["vocab"].items()) {
    if (!valid(id)) return format_error("tokenizer.json vocab entry \"" + text + "\" has no valid id");
    by_id[id.get<int32_t>()] = {text, false, false};
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const json& a : tok["added_tokens"]) {
      if (!a.contains("content") || !a["content"].is_string() || !a.contains("id")) continue;
      if (!valid(a["id"]))
        return format_error("tokenizer.json added token \"" + a["content"].get<std::string>() + "\" has no valid id");
      by_id[a["id"].get<int32_t>()] = {a["content"].get<std::string>(), true, a.value("special", false)};
    }
  return by_id;
}

bool is_spm_tokenizer_json(const json& tok) {
  return tok.is_object() && tok.contains("model") && tok["model"].is_object() &&
         tok["model"].value("type", "") == "BPE" && tok["model"].value("byte_fallback", false);
}

Status add_gguf_spm_vocab(GgufWriter& w, const json& tok, std::map<std::string, int32_t>* ids) {
  const json& model = tok["model"];
  bool prepend = false;
  QRT_TRY(spm_spacing(tok, &prepend));
  const std::string unk = model.contains("unk_token") && model["unk_token"].is_string()
                              ? model["unk_token"].get<std::string>()
                              : std::string();

  QRT_ASSIGN_OR_RETURN(const auto by_id, hf_tokens_by_id(tok));
  const int32_t n = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<int32_t> types(static_cast<size_t>(n), kUnused);
  for (int32_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";  // gaps
  std::optional<int32_t> unk_id;
  for (const auto& [id, t] : by_id) {
    const int32_t type = t.text == unk      ? kUnknown
                         : t.special        ? kControl
                         : t.added          ? kUserDefined
                         : is_byte_token(t.text) ? kByte
                                                 : kNormal;
    // llama.cpp matches user-defined tokens in the text before any "▁" replaces its spaces, so its converter
    // writes theirs back as spaces (Gemma's runs of spaces "▁▁" ... are user-defined); so does this writer.
    tokens[static_cast<size_t>(id)] = type == kUserDefined ? replace_all(t.text, kSpace, " ") : t.text;
    types[static_cast<size_t>(id)] = type;
    if (type == kUnknown) unk_id = id;
    ids->emplace(t.text, id);
  }

  // Scores: minus the rank of the first merge that makes the token; ordinary tokens no merge makes come after.
  std::unordered_map<std::string, int64_t> rank;
  if (model.contains("merges") && model["merges"].is_array()) {
    int64_t r = 0;
    for (const json& m : model["merges"]) {
      std::string merged;
      if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        merged = m[0].get<std::string>() + m[1].get<std::string>();
      } else if (m.is_string() && std::count(m.get<std::string>().begin(), m.get<std::string>().end(), ' ') == 1) {
        const std::string s = m.get<std::string>();
        merged = s.substr(0, s.find(' ')) + s.substr(s.find(' ') + 1);
      } else {
        return format_error("tokenizer.json merge " + std::to_string(r) + " is not [\"a\", \"b\"] or \"a b\"");
      }
      ++r;
      rank.emplace(merged, static_cast<int64_t>(rank.size()));  // dense: each token's first merge counts once
    }
  }
  std::vector<float> scores(static_cast<size_t>(n), 0.0f);
  int64_t next = static_cast<int64_t>(rank.size());
  for (int32_t i = 0; i < n; ++i) {
    if (types[static_cast<size_t>(i)] != kNormal) continue;
    auto it = rank.find(tokens[static_cast<size_t>(i)]);
    scores[static_cast<size_t>(i)] = -static_cast<float>(it != rank.end() ? it->second : next++);
  }
  w.set_string("tokenizer.ggml.model", "llama");
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_f32s("tokenizer.ggml.scores", scores);
  w.set_i32s("tokenizer.ggml.token_type", types);
  if (unk_id) w.set_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(*unk_id));
  if (!prepend) w.set_bool("tokenizer.ggml.add_space_prefix", false);
  return ok_status();
}

ordered_json tokenizer_json_skeleton() {
  ordered_json tok;
  tok["version"] = "1.0";
  tok["truncation"] = nullptr;
  tok["padding"] = nullptr;
  tok["added_tokens"] = ordered_json::array();
  return tok;
}

Result<ordered_json> spm_tokenizer_json(const SpmVocab& v) {
  const size_t n = v.tokens.size();
  if (v.scores.size() != n || v.types.size() != n)
    return format_error("the GGUF vocabulary's tokens, scores and token types differ in length");
  ordered_json tok = tokenizer_json_skeleton();
  ordered_json vocab = ordered_json::object();
  // Appended in id order, the first of repeated pieces kept: ordered_json's own lookups scan its entries, which for
  // Gemma 3's 262144 pieces made writing the vocabulary take minutes.
  auto& vocab_entries = vocab.get_ref<ordered_json::object_t&>();
  vocab_entries.reserve(n);
  std::unordered_set<std::string> in_vocab;
  std::unordered_map<std::string, int32_t> normal;  // the pieces merges are made of
  std::string unk;
  for (size_t i = 0; i < n; ++i) {
    const int32_t type = v.types[i];
    if (type == kControl || type == kUnknown || type == kUserDefined)
      tok["added_tokens"].push_back({{"id", i},
                                     {"content", v.tokens[i]},
                                     {"single_word", false},
                                     {"lstrip", false},
                                     {"rstrip", false},
                                     {"normalized", false},
                                     {"special", type != kUserDefined}});
    if (type == kUnknown && unk.empty()) unk = v.tokens[i];
    if (type == kNormal) normal.emplace(v.tokens[i], static_cast<int32_t>(i));
    if (in_vocab.insert(v.tokens[i]).second) vocab_entries.emplace_back(v.tokens[i], i);
  }
  // Every split of an ordinary token into two ordinary pieces, by the token's score, then the pieces' ids.
  std::vector<std::tuple<float, int32_t, int32_t>> merges;
  for (const auto& [text, id] : normal)
    for (size_t cut : char_boundaries(text)) {
      auto l = normal.find(text.substr(0, cut)), r = normal.find(text.substr(cut));
      if (l != normal.end() && r != normal.end())
        merges.emplace_back(v.scores[static_cast<size_t>(id)], l->second, r->second);
    }
  std::sort(merges.begin(), merges.end(), [](const auto& a, const auto& b) {
    if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
    return std::make_pair(std::get<1>(a), std::get<2>(a)) < std::make_pair(std::get<1>(b), std::get<2>(b));
  });
  ordered_json merge_list = ordered_json::array();
  for (const auto& [score, l, r] : merges)
    merge_list.push_back({v.tokens[static_cast<size_t>(l)], v.tokens[static_cast<size_t>(r)]});

  ordered_json steps = ordered_json::array();
  if (v.add_space_prefix) steps.push_back({{"type", "Prepend"}, {"prepend", kSpace}});
  steps.push_back({{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpace}});
  tok["normalizer"] = {{"type", "Sequence"}, {"normalizers", steps}};
  tok["pre_tokenizer"] = nullptr;
  tok["post_processor"] = nullptr;
  ordered_json decoders = ordered_json::array();
  decoders.push_back({{"type", "Replace"}, {"pattern", {{"String", kSpace}}}, {"content", " "}});
  decoders.push_back({{"type", "ByteFallback"}});
  decoders.push_back({{"type", "Fuse"}});
  if (v.add_space_prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  tok["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
  tok["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", unk.empty() ? ordered_json(nullptr) : ordered_json(unk)},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", true},
                  {"byte_fallback", true},
                  {"ignore_merges", false},
                  {"vocab", vocab},
                  {"merges", merge_list}};
  return tok;
}

}  // namespace qrt::convert
