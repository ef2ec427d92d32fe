#include "tools/convert/gguf_tokenizer.hpp"

#include <map>
#include <vector>

#include "models/tokenizer/tokenizer.hpp"
#include "tools/convert/spm_vocab.hpp"

namespace qrt::convert {
namespace {

using nlohmann::json;

// GGUF token types (llama.cpp's llama_token_type).
constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4;

// The GGUF pre-tokenizer name of a byte-level BPE pre_tokenizer: ByteLevel alone (with its own GPT-2 regex) is
// "gpt-2"; a Split on a regex followed by ByteLevel without one is the family whose regex that is.
Result<std::string> pre_tokenizer_name(const json& pre) {
  if (!pre.is_object()) return unsupported("tokenizer.json has no pre_tokenizer");
  const std::string type = pre.value("type", "");
  if (type == "ByteLevel" && pre.value("use_regex", true)) return std::string("gpt-2");
  if (type == "Sequence" && pre.contains("pretokenizers") && pre["pretokenizers"].is_array()) {
    const json& seq = pre["pretokenizers"];
    std::string pattern;
    bool byte_level = false;
    for (const json& p : seq) {
      const std::string t = p.value("type", "");
      if (t == "Split" && p.contains("pattern") && p["pattern"].is_object() && p["pattern"].contains("Regex"))
        pattern = p["pattern"]["Regex"].get<std::string>();
      else if (t == "ByteLevel" && !p.value("use_regex", true))
        byte_level = true;
    }
    if (byte_level && !pattern.empty())
      for (const char* name : {"llama-bpe", "qwen2", "gpt-2", "gpt-4o", "tekken"}) {
        auto regexes = gguf_pre_tokenizer_regexes(name);
        if (regexes.ok() && regexes->size() == 1 && (*regexes)[0] == pattern) return std::string(name);
      }
    return unsupported("tokenizer.json's pre-tokenizer regex is not one qrt can name for GGUF: " +
                       pattern.substr(0, 80));
  }
  return unsupported("tokenizer.json pre_tokenizer of type \"" + type + "\" (byte-level BPE only for now)");
}

// The id of a token named in tokenizer_config.json ("<s>" or {"content": "<s>", ...}).
std::optional<int32_t> token_id(const json& cfg, const char* key, const std::map<std::string, int32_t>& ids) {
  if (!cfg.is_object() || !cfg.contains(key)) return std::nullopt;
  const json& v = cfg[key];
  const std::string text = v.is_string() ? v.get<std::string>()
                           : v.is_object() && v.contains("content") && v["content"].is_string()
                               ? v["content"].get<std::string>()
                               : std::string();
  auto it = ids.find(text);
  return it == ids.end() ? std::nullopt : std::optional<int32_t>(it->second);
}

// tokenizer.ggml.* of a byte-level BPE tokenizer.json (the "gpt2" model): tokens, token types, merges and the
// pre-tokenizer's name; *ids gets each token's id.
Status add_gguf_bpe_vocab(GgufWriter& w, const json& tok, std::map<std::string, int32_t>* ids) {
  const json& model = tok["model"];
  QRT_ASSIGN_OR_RETURN(std::string pre, pre_tokenizer_name(tok["pre_tokenizer"]));
  QRT_ASSIGN_OR_RETURN(const auto by_id, hf_tokens_by_id(tok));
  const int32_t n = by_id.empty() ? 0 : by_id.rbegin()->first + 1;
  std::vector<std::string> tokens(static_cast<size_t>(n));
  std::vector<int32_t> types(static_cast<size_t>(n), kUserDefined);
  for (int32_t i = 0; i < n; ++i) tokens[static_cast<size_t>(i)] = "[PAD" + std::to_string(i) + "]";  // gaps
  for (const auto& [id, t] : by_id) {
    tokens[static_cast<size_t>(id)] = t.text;
    types[static_cast<size_t>(id)] = t.special ? kControl : t.added ? kUserDefined : kNormal;
    ids->emplace(t.text, id);
  }
  std::vector<std::string> merges;
  if (model.contains("merges") && model["merges"].is_array())
    for (const json& m : model["merges"]) {
      if (m.is_string()) {
        merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2) {
        merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
      } else {
        return format_error("tokenizer.json merge entries must be \"a b\" or [\"a\", \"b\"]");
      }
    }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", pre);
  w.set_strings("tokenizer.ggml.tokens", tokens);
  w.set_i32s("tokenizer.ggml.token_type", types);
  w.set_strings("tokenizer.ggml.merges", merges);
  return ok_status();
}

}  // namespace

Status add_gguf_tokenizer(GgufWriter& w, const std::string& tokenizer_json, const std::string& tokenizer_config_json,
                          const std::string& chat_template, const json& hf_config) {
  if (tokenizer_json.empty())
    return not_found("the checkpoint has no tokenizer.json to write the GGUF vocabulary from");
  const json tok = json::parse(tokenizer_json, nullptr, false);
  if (tok.is_discarded() || !tok.is_object()) return format_error("tokenizer.json is not a JSON object");
  const json& model = tok.contains("model") ? tok["model"] : json();
  if (!model.is_object() || model.value("type", "") != "BPE" || !model.contains("vocab") || !model["vocab"].is_object())
    return unsupported("tokenizer.json model is not BPE with a vocab (byte-level and SentencePiece-style BPE convert "
                       "to GGUF)");
  std::map<std::string, int32_t> ids;
  if (is_spm_tokenizer_json(tok)) {
    QRT_TRY(add_gguf_spm_vocab(w, tok, &ids));
  } else {
    QRT_TRY(add_gguf_bpe_vocab(w, tok, &ids));
  }

  const json cfg = tokenizer_config_json.empty() ? json() : json::parse(tokenizer_config_json, nullptr, false);
  auto id_of = [&](const char* cfg_key, const char* config_key) -> std::optional<int32_t> {
    if (auto id = token_id(cfg, cfg_key, ids)) return id;
    if (hf_config.is_object() && hf_config.contains(config_key) && hf_config[config_key].is_number_integer())
      return hf_config[config_key].get<int32_t>();
    return std::nullopt;
  };
  if (auto bos = id_of("bos_token", "bos_token_id"))
    w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(*bos));
  if (auto eos = id_of("eos_token", "eos_token_id"))
    w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(*eos));
  if (auto pad = id_of("pad_token", "pad_token_id"))
    w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(*pad));
  if (cfg.is_object() && cfg.contains("add_bos_token") && cfg["add_bos_token"].is_boolean())
    w.set_bool("tokenizer.ggml.add_bos_token", cfg["add_bos_token"].get<bool>());
  if (cfg.is_object() && cfg.contains("add_eos_token") && cfg["add_eos_token"].is_boolean())
    w.set_bool("tokenizer.ggml.add_eos_token", cfg["add_eos_token"].get<bool>());
  std::string template_text = chat_template;
  if (template_text.empty() && cfg.is_object() && cfg.contains("chat_template") && cfg["chat_template"].is_string())
    template_text = cfg["chat_template"].get<std::string>();
  if (!template_text.empty()) w.set_string("tokenizer.chat_template", template_text);
  return ok_status();
}

}  // namespace qrt::convert
