#include "loader/ollama_store.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace qrt::ollama {
namespace fs = std::filesystem;
namespace {

bool valid_part(const std::string& s, size_t max_len, bool allow_dot, bool allow_colon) {
  if (s.empty() || s.size() > max_len) return false;
  const auto first = static_cast<unsigned char>(s[0]);
  if (!std::isalnum(first) && s[0] != '_') return false;
  for (size_t i = 1; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (std::isalnum(c) || c == '_' || c == '-') continue;
    if (c == '.' && allow_dot) continue;
    if (c == ':' && allow_colon) continue;
    return false;
  }
  return true;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Finds `name` in `dir`, exactly or else case-insensitively (names compare with EqualFold in Ollama).
std::optional<fs::path> find_entry(const fs::path& dir, const std::string& name) {
  std::error_code ec;
  if (fs::exists(dir / name, ec)) return dir / name;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  const std::string want = lower(name);
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (lower(entry.path().filename().string()) == want) return entry.path();
  return std::nullopt;
}

Result<std::string> read_small_file(const fs::path& p, uint64_t max_bytes) {
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) return io_error(p.string() + ": " + ec.message());
  if (size > max_bytes)
    return format_error(p.string() + ": " + std::to_string(size) + " bytes, more than the " +
                        std::to_string(max_bytes) + " expected for this file");
  std::ifstream in(p, std::ios::binary);
  if (!in) return io_error(p.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<Layer> parse_layer(const nlohmann::json& j, const fs::path& root, const std::string& where) {
  if (!j.is_object()) return format_error(where + ": layer is not an object");
  Layer l;
  if (!j.contains("mediaType") || !j["mediaType"].is_string()) return format_error(where + ": layer without mediaType");
  if (!j.contains("digest") || !j["digest"].is_string()) return format_error(where + ": layer without digest");
  l.media_type = j["mediaType"].get<std::string>();
  l.digest = j["digest"].get<std::string>();
  if (j.contains("size") && j["size"].is_number_unsigned()) l.size = j["size"].get<uint64_t>();
  if (j.contains("name") && j["name"].is_string()) l.name = j["name"].get<std::string>();
  QRT_ASSIGN_OR_RETURN(l.blob_path, blob_path(root, l.digest));
  return l;
}

}  // namespace

fs::path ModelName::manifest_relative_path() const { return fs::path(host) / ns / model / tag; }

std::string ModelName::display() const {
  std::string s;
  if (host != "registry.ollama.ai") s += host + "/";
  if (host != "registry.ollama.ai" || ns != "library") s += ns + "/";
  return s + model + ":" + tag;
}

Result<ModelName> parse_model_name(const std::string& text) {
  auto bad = [&](const std::string& why) { return invalid_argument("'" + text + "' is not an Ollama model name: " + why); };
  if (text.empty()) return bad("empty");
  ModelName n;
  std::string rest = text;
  const size_t colon = rest.rfind(':');
  const size_t slash = rest.rfind('/');
  if (colon != std::string::npos && (slash == std::string::npos || colon > slash)) {
    n.tag = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  std::vector<std::string> parts;
  size_t start = 0;
  // The host may carry a scheme ("https://"), dropped from the path.
  if (const size_t scheme = rest.find("://"); scheme != std::string::npos) start = scheme + 3;
  for (size_t i = start; i <= rest.size(); ++i) {
    if (i == rest.size() || rest[i] == '/') {
      parts.push_back(rest.substr(start, i - start));
      start = i + 1;
    }
  }
  if (parts.size() > 3) return bad("more than host/namespace/model");
  n.model = parts.back();
  if (parts.size() >= 2) n.ns = parts[parts.size() - 2];
  if (parts.size() == 3) n.host = parts[0];
  if (!valid_part(n.model, 80, true, false)) return bad("model part '" + n.model + "'");
  if (!valid_part(n.ns, 80, false, false)) return bad("namespace part '" + n.ns + "'");
  if (!valid_part(n.host, 350, true, true)) return bad("host part '" + n.host + "'");
  if (!valid_part(n.tag, 80, true, false)) return bad("tag '" + n.tag + "'");
  return n;
}

bool looks_like_model_name(const std::string& text) {
  std::error_code ec;
  if (fs::exists(text, ec)) return false;
  if (text.find("://") == std::string::npos && (text.rfind("./", 0) == 0 || text.rfind('/', 0) == 0)) return false;
  return parse_model_name(text).ok();
}

Result<fs::path> store_root() {
  if (const char* env = std::getenv("OLLAMA_MODELS"); env && *env) return fs::path(env);
  const char* home = std::getenv("HOME");
  if (!home || !*home) return not_found("cannot locate the Ollama store: neither OLLAMA_MODELS nor HOME is set");
  return fs::path(home) / ".ollama" / "models";
}

Result<fs::path> blob_path(const fs::path& root, const std::string& digest) {
  // ^sha256[:-][0-9a-fA-F]{64}$
  bool ok = digest.size() == 71 && digest.compare(0, 6, "sha256") == 0 && (digest[6] == ':' || digest[6] == '-');
  for (size_t i = 7; ok && i < digest.size(); ++i) ok = std::isxdigit(static_cast<unsigned char>(digest[i])) != 0;
  if (!ok) return format_error("malformed blob digest '" + digest + "' (expected sha256:<64 hex digits>)");
  return root / "blobs" / ("sha256-" + digest.substr(7));
}

const Layer* Manifest::gguf_model_layer() const {
  const Layer* found = nullptr;
  for (const Layer& l : layers)
    if (l.media_type == kMediaModel) found = &l;  // Ollama keeps the last one
  return found;
}

std::vector<const Layer*> Manifest::layers_of_type(const std::string& media_type) const {
  std::vector<const Layer*> out;
  for (const Layer& l : layers)
    if (l.media_type == media_type) out.push_back(&l);
  return out;
}

Result<Manifest> open_manifest(const fs::path& root, const ModelName& name) {
  const std::string who = "Ollama model " + name.display();
  fs::path p = root / "manifests";
  for (const std::string& part : {name.host, name.ns, name.model, name.tag}) {
    auto next = find_entry(p, part);
    if (!next)
      return not_found(who + ": no manifest at " + (root / "manifests" / name.manifest_relative_path()).string() +
                       " (is it pulled? is OLLAMA_MODELS set to the right store?)");
    p = *next;
  }
  QRT_ASSIGN_OR_RETURN(std::string text, read_small_file(p, 16u << 20));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return format_error(p.string() + ": manifest is not a JSON object");
  Manifest m;
  m.manifest_path = p;
  if (!j.contains("schemaVersion") || !j["schemaVersion"].is_number_integer() || j["schemaVersion"].get<int>() != 2)
    return format_error(p.string() + ": unsupported manifest schemaVersion (expected 2)");
  if (!j.contains("config")) return format_error(p.string() + ": manifest has no config layer");
  QRT_ASSIGN_OR_RETURN(m.config, parse_layer(j["config"], root, p.string() + " config"));
  if (!j.contains("layers") || !j["layers"].is_array()) return format_error(p.string() + ": manifest has no layers array");
  for (size_t i = 0; i < j["layers"].size(); ++i) {
    QRT_ASSIGN_OR_RETURN(Layer l, parse_layer(j["layers"][i], root, p.string() + " layer " + std::to_string(i)));
    m.layers.push_back(std::move(l));
  }
  auto config_text = read_small_file(m.config.blob_path, 16u << 20);
  if (!config_text.ok()) return config_text.status().with_context(who + ": config blob");
  nlohmann::json c = nlohmann::json::parse(*config_text, nullptr, false);
  if (c.is_discarded() || !c.is_object()) return format_error(m.config.blob_path.string() + ": config blob is not JSON");
  auto str = [&](const char* key) { return c.contains(key) && c[key].is_string() ? c[key].get<std::string>() : ""; };
  m.model_format = str("model_format");
  m.file_type = str("file_type");
  m.architecture = str("architecture");
  m.remote = !str("remote_host").empty();
  if (m.remote && !m.gguf_model_layer() && m.layers_of_type(kMediaTensor).empty())
    return unsupported(who + " is a cloud model (remote_host set) with no weights on this machine");
  if (!m.is_gguf() && m.model_format != "safetensors")
    return unsupported(who + ": unknown model_format '" + m.model_format + "'");
  if (m.is_gguf() && !m.gguf_model_layer()) return format_error(who + ": GGUF model without an image.model layer");
  return m;
}

}  // namespace qrt::ollama
