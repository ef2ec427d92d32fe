#include "loader/ollama_tensor_model.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt::ollama {
using quant::FormatId;
using quant::ScalarType;
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

struct QuantKind {
  FormatId format;
  int bits;
  int default_group;
  bool affine;
};

// The alias table of spec/ollama.md §2.5 ("fp8"/"fp4" are affine int8/int4, not float formats).
std::optional<QuantKind> kind_from_name(const std::string& name) {
  const std::string n = lower(name);
  if (n == "int4" || n == "q4" || n == "fp4") return QuantKind{FormatId::kAFQ4, 4, 64, true};
  if (n == "int8" || n == "q8" || n == "fp8") return QuantKind{FormatId::kAFQ8, 8, 64, true};
  if (n == "nvfp4") return QuantKind{FormatId::kNVFP4, 4, 16, false};
  if (n == "mxfp4") return QuantKind{FormatId::kMXFP4, 4, 32, false};
  if (n == "mxfp8") return QuantKind{FormatId::kMXFP8, 8, 32, false};
  return std::nullopt;
}

std::string meta(const SafetensorsFile& f, const std::string& key) {
  auto it = f.metadata.find(key);
  return it == f.metadata.end() ? std::string() : it->second;
}

// Picks quant type and group size: per-tensor keys, then blob keys, then shape inference (§2.5).
Result<std::pair<QuantKind, int>> resolve_quant(const SafetensorsFile& blob, const SafetensorsEntry& main,
                                                const SafetensorsEntry& scale) {
  const std::string where = blob.path + ": tensor '" + main.name + "'";
  std::string type = meta(blob, main.name + ".quant_type");
  std::string group = meta(blob, main.name + ".group_size");
  if (type.empty()) type = meta(blob, "quant_type");
  if (group.empty()) group = meta(blob, "group_size");
  const int64_t packed = main.shape.back(), scale_cols = scale.shape.back();
  if (scale_cols <= 0) return format_error(where + ": empty scale");
  std::optional<QuantKind> kind;
  int gs = 0;
  if (!type.empty()) {
    kind = kind_from_name(type);
    // The runner falls back to 8-bit affine, group 32, for an unknown type; we follow it.
    if (!kind) kind = QuantKind{FormatId::kAFQ8, 8, 32, true};
  }
  if (!group.empty()) {
    try {
      gs = std::stoi(group);
    } catch (...) {
      return format_error(where + ": group_size '" + group + "' is not a number");
    }
  }
  if (!kind || gs == 0) {
    // Shape inference: g4 = packed·8/scale_cols, g8 = packed·4/scale_cols.
    const int64_t g4 = packed * 8 / scale_cols, g8 = packed * 4 / scale_cols;
    auto legal = [](int64_t g) { return g == 16 || g == 32 || g == 64 || g == 128; };
    if (!kind) {
      if (g4 == 32) kind = kind_from_name("int4");
      else if (g8 == 64) kind = kind_from_name("int8");
      else if (legal(g4)) kind = kind_from_name("int4");
      else if (legal(g8)) kind = kind_from_name("int8");
      else return format_error(where + ": cannot infer the quantization from shapes (packed " + std::to_string(packed) +
                               " words, " + std::to_string(scale_cols) + " scales per row)");
    }
    if (gs == 0) gs = static_cast<int>(kind->bits == 4 ? g4 : g8);
  }
  // Validate: packed_cols·32/bits == scale_cols·group_size.
  if (gs <= 0 || packed * 32 / kind->bits != scale_cols * gs)
    return format_error(where + ": " + std::to_string(packed) + " packed words do not match " +
                        std::to_string(scale_cols) + " scales of group " + std::to_string(gs) + " at " +
                        std::to_string(kind->bits) + " bits");
  return std::make_pair(*kind, gs);
}

bool is_float(ScalarType t) { return t == ScalarType::kF32 || t == ScalarType::kF16 || t == ScalarType::kBF16; }

Result<std::string> read_file(const std::filesystem::path& p, uint64_t max_bytes) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(p, ec);
  if (ec) return io_error(p.string() + ": " + ec.message());
  if (size > max_bytes) return format_error(p.string() + ": " + std::to_string(size) + " bytes, too large for a JSON file");
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Status add_tensor_blob(const SafetensorsFile& blob, TensorTable* table) {
  std::set<std::string> companions;
  for (const SafetensorsEntry& e : blob.entries) {
    if (!blob.find(e.name + ".scale")) continue;
    companions.insert(e.name + ".scale");
    companions.insert(e.name + ".bias");  // a quantization bias only when the .scale exists (§2.4)
    companions.insert(e.name + ".global_scale");
  }
  for (const SafetensorsEntry& e : blob.entries) {
    if (companions.count(e.name)) continue;
    if (table->count(e.name)) return format_error(blob.path + ": tensor '" + e.name + "' is in two blobs");
    const SafetensorsEntry* scale = blob.find(e.name + ".scale");
    if (!scale) {
      auto t = dense_quant_tensor(e, blob.path);
      if (!t.ok()) return t.status();
      table->emplace(e.name, std::move(*t));
      continue;
    }
    const std::string where = blob.path + ": tensor '" + e.name + "'";
    if (e.dtype != ScalarType::kU32 || e.shape.size() < 2 || scale->shape.size() != e.shape.size())
      return format_error(where + ": a quantized tensor must be U32 with a scale of the same rank");
    QRT_ASSIGN_OR_RETURN(auto resolved, resolve_quant(blob, e, *scale));
    const auto [kind, gs] = resolved;
    QuantTensor t;
    t.name = e.name;
    t.format = kind.format;
    t.file = blob.path;
    t.shape = e.shape;
    t.shape.back() = e.shape.back() * 32 / kind.bits;
    t.data = e.data;
    t.scales = scale->data;
    t.params.group_size = gs;
    if (kind.affine) {
      const SafetensorsEntry* bias = blob.find(e.name + ".bias");
      if (!bias) return format_error(where + ": affine quantization without its .bias");
      if (!is_float(scale->dtype) || bias->dtype != scale->dtype)
        return format_error(where + ": affine scale and bias must share a float dtype");
      t.biases = bias->data;
      t.params.scale_type = scale->dtype;
    } else {
      // fp modes store scales as U8 (relabelled F8_E4M3 / F8_E8M0 are accepted too).
      if (scale->dtype != ScalarType::kU8 && scale->dtype != ScalarType::kF8_E4M3 && scale->dtype != ScalarType::kE8M0)
        return format_error(where + ": fp-mode scale must be U8, F8_E4M3 or F8_E8M0");
      if (gs != kind.default_group)
        return unsupported(where + ": " + std::string(quant::format_name(kind.format)) + " with group " +
                           std::to_string(gs) + " (only " + std::to_string(kind.default_group) + ")");
      if (const SafetensorsEntry* g = blob.find(e.name + ".global_scale")) {
        if (kind.format != FormatId::kNVFP4) return format_error(where + ": global_scale on a non-nvfp4 tensor");
        if (g->dtype != ScalarType::kF32 || g->numel() != 1)
          return unsupported(where + ": global_scale must be one F32 value (per-row vectors are not supported)");
        t.params.global_scale = quant::load_f32(g->data.data);
      }
    }
    auto sizes = cpu::part_sizes(t.format, t.rows(), t.cols(), t.params);
    if (!sizes.ok()) return sizes.status().with_context(where);
    if (sizes->data != t.data.size || sizes->scales != t.scales.size || sizes->biases != t.biases.size)
      return format_error(where + ": part sizes " + std::to_string(t.data.size) + "/" + std::to_string(t.scales.size) +
                          "/" + std::to_string(t.biases.size) + " bytes do not match " +
                          std::string(quant::format_name(t.format)) + " (expected " + std::to_string(sizes->data) +
                          "/" + std::to_string(sizes->scales) + "/" + std::to_string(sizes->biases) + ")");
    table->emplace(e.name, std::move(t));
  }
  return ok_status();
}

Result<ModelSource> open_tensor_model(const Manifest& m, const std::string& display_name) {
  ModelSource src;
  src.kind = SourceKind::kOllama;
  src.path = display_name;
  std::set<std::string> seen_digests;
  for (const Layer* layer : m.layers_of_type(kMediaTensor)) {
    if (!seen_digests.insert(layer->digest).second) continue;
    auto blob = read_safetensors(layer->blob_path.string());
    if (!blob.ok()) return blob.status().with_context("Ollama model " + display_name + " layer '" + layer->name + "'");
    QRT_TRY(add_tensor_blob(*blob, &src.tensors));
    src.keep_alive.push_back(blob->mapping);
  }
  if (src.tensors.empty()) return format_error("Ollama model " + display_name + ": no tensor layers");
  for (const Layer* layer : m.layers_of_type(kMediaJson)) {
    QRT_ASSIGN_OR_RETURN(std::string text, read_file(layer->blob_path, 256u << 20));
    if (layer->name == "config.json") src.hf_config_json = std::move(text);
    else if (layer->name == "tokenizer.json") src.tokenizer.tokenizer_json = std::move(text);
    else if (layer->name == "tokenizer_config.json") src.tokenizer.tokenizer_config_json = std::move(text);
    else if (layer->name == "generation_config.json") src.tokenizer.generation_config_json = std::move(text);
  }
  if (src.hf_config_json.empty())
    return format_error("Ollama model " + display_name + ": tensor model without a config.json layer");
  return src;
}

Status verify_digests(const Manifest& m) {
  std::vector<const Layer*> layers = {&m.config};
  for (const Layer& l : m.layers) layers.push_back(&l);
  std::vector<char> buf(1 << 20);
  for (const Layer* l : layers) {
    std::ifstream in(l->blob_path, std::ios::binary);
    if (!in) return not_found("blob " + l->blob_path.string() + " (layer " + l->digest + ") is missing");
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
      EVP_MD_CTX_free(ctx);
      return internal_error("cannot start a SHA-256 digest");
    }
    uint64_t total = 0;
    while (in) {
      in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
      const auto n = static_cast<size_t>(in.gcount());
      total += n;
      if (n) EVP_DigestUpdate(ctx, buf.data(), n);
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    static const char* hex = "0123456789abcdef";
    std::string got;
    for (unsigned i = 0; i < len; ++i) {
      got.push_back(hex[md[i] >> 4]);
      got.push_back(hex[md[i] & 15]);
    }
    if (lower(l->digest.substr(7)) != got)
      return format_error("blob " + l->blob_path.string() + " is corrupt: its sha256 is " + got + ", the manifest says " +
                          l->digest.substr(7));
    if (l->size != 0 && l->size != total)
      return format_error("blob " + l->blob_path.string() + " has " + std::to_string(total) + " bytes, the manifest says " +
                          std::to_string(l->size));
  }
  return ok_status();
}

}  // namespace qrt::ollama
