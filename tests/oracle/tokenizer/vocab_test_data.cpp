#include "vocab_test_data.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace qrt::test {

std::optional<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::optional<VocabVectors> read_vocab_vectors(const std::filesystem::path& vocab_dir, const std::string& name,
                                               std::string* why) {
  const auto base = vocab_dir / ("ggml-vocab-" + name + ".gguf");
  const auto inp = read_file(base.string() + ".inp");
  const auto out = read_file(base.string() + ".out");
  if (!inp || !out) {
    *why = "cannot read " + base.string() + ".inp/.out";
    return std::nullopt;
  }
  VocabVectors v;
  const std::string delimiter = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  while (true) {
    const size_t next = inp->find(delimiter, pos);
    v.texts.push_back(inp->substr(pos, next == std::string::npos ? std::string::npos : next - pos));
    if (next == std::string::npos) break;
    pos = next + delimiter.size();
  }
  std::istringstream lines(*out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream numbers(line);
    std::vector<int32_t> ids;
    int64_t id = 0;
    while (numbers >> id) ids.push_back(static_cast<int32_t>(id));
    v.ids.push_back(std::move(ids));
  }
  if (v.texts.size() != v.ids.size() + 1 || !v.texts.back().empty()) {
    *why = name + ": " + std::to_string(v.texts.size()) + " strings for " + std::to_string(v.ids.size()) +
           " id lines (expected one more string, the empty one after the last delimiter)";
    return std::nullopt;
  }
  v.ids.emplace_back();  // the trailing empty string gives no ids
  return v;
}

std::filesystem::path vocab_json_dir() { return QRT_TOKENIZER_VOCAB_JSON_DIR; }

namespace {

std::string from_hex(const std::string& hex) {
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

}  // namespace

std::optional<GgufTokenizerMetadata> read_gguf_tokenizer_json(const std::filesystem::path& json_path, std::string* why) {
  const auto text = read_file(json_path);
  if (!text) {
    *why = "cannot read " + json_path.string() + " (made by the tokenizer_gguf_vocab_dump fixture)";
    return std::nullopt;
  }
  const nlohmann::json j = nlohmann::json::parse(*text, nullptr, false);
  if (!j.is_object()) {
    *why = json_path.string() + " is not a JSON object";
    return std::nullopt;
  }
  GgufTokenizerMetadata m;
  m.source = json_path.filename().string();
  const auto str = [&](const char* key) { return j.contains(key) ? from_hex(j[key].get<std::string>()) : std::string(); };
  m.model = str("tokenizer.ggml.model");
  m.pre = str("tokenizer.ggml.pre");
  m.chat_template = str("tokenizer.chat_template");
  if (j.contains("tokenizer.ggml.tokens")) {
    for (const auto& t : j["tokenizer.ggml.tokens"]) m.tokens.push_back(from_hex(t.get<std::string>()));
  }
  if (j.contains("tokenizer.ggml.merges")) {
    for (const auto& t : j["tokenizer.ggml.merges"]) m.merges.push_back(from_hex(t.get<std::string>()));
  }
  if (j.contains("tokenizer.ggml.scores")) {
    for (const auto& s : j["tokenizer.ggml.scores"]) m.scores.push_back(static_cast<float>(s.get<double>()));
  }
  if (j.contains("tokenizer.ggml.token_type")) {
    for (const auto& t : j["tokenizer.ggml.token_type"]) m.token_types.push_back(t.get<int32_t>());
  }
  const auto id = [&](const char* key, std::optional<int64_t>* out) {
    if (j.contains(key)) *out = j[key].get<int64_t>();
  };
  id("tokenizer.ggml.bos_token_id", &m.bos_id);
  id("tokenizer.ggml.eos_token_id", &m.eos_id);
  id("tokenizer.ggml.eot_token_id", &m.eot_id);
  id("tokenizer.ggml.eom_token_id", &m.eom_id);
  id("tokenizer.ggml.unknown_token_id", &m.unk_id);
  id("tokenizer.ggml.seperator_token_id", &m.sep_id);
  id("tokenizer.ggml.padding_token_id", &m.pad_id);
  id("tokenizer.ggml.cls_token_id", &m.cls_id);
  id("tokenizer.ggml.mask_token_id", &m.mask_id);
  const auto flag = [&](const char* key, std::optional<bool>* out) {
    if (j.contains(key)) *out = j[key].get<bool>();
  };
  flag("tokenizer.ggml.add_bos_token", &m.add_bos);
  flag("tokenizer.ggml.add_eos_token", &m.add_eos);
  flag("tokenizer.ggml.add_sep_token", &m.add_sep);
  flag("tokenizer.ggml.add_space_prefix", &m.add_space_prefix);
  flag("tokenizer.ggml.remove_extra_whitespaces", &m.remove_extra_whitespaces);
  return m;
}

namespace {

std::string join_ids(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += (out.empty() ? "" : " ") + std::to_string(id);
  return out;
}

std::string escaped(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace

size_t count_matching(const Tokenizer& tokenizer, const VocabVectors& vectors, std::string* report) {
  size_t matching = 0, reported = 0;
  for (size_t i = 0; i < vectors.texts.size(); ++i) {
    const auto ids = tokenizer.encode(vectors.texts[i], /*add_special=*/false, /*parse_special=*/false);
    if (ids.ok() && *ids == vectors.ids[i]) {
      ++matching;
      continue;
    }
    if (reported++ < 6) {
      *report += "  #" + std::to_string(i) + " \"" + escaped(vectors.texts[i]).substr(0, 80) + "\"\n    expected " +
                 join_ids(vectors.ids[i]) + "\n    got      " +
                 (ids.ok() ? join_ids(*ids) : ids.status().to_string()) + "\n";
    }
  }
  return matching;
}

}  // namespace qrt::test
