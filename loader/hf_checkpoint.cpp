#include "loader/hf_checkpoint.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "loader/safetensors.hpp"

namespace qrt {
namespace fs = std::filesystem;
namespace {

std::string read_optional(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The shard files named by model.safetensors.index.json's weight_map, in first-seen order.
Result<std::vector<std::string>> shards_from_index(const fs::path& index) {
  const std::string text = read_optional(index);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return format_error(index.string() + ": expected a JSON object with a weight_map");
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) return format_error(index.string() + ": weight_map['" + tensor + "'] is not a file name");
    const std::string f = file.get<std::string>();
    if (f.find('/') != std::string::npos || f.find("..") != std::string::npos)
      return format_error(index.string() + ": shard '" + f + "' is not a file name in the checkpoint directory");
    if (seen.insert(f).second) files.push_back((index.parent_path() / f).string());
  }
  if (files.empty()) return format_error(index.string() + ": weight_map is empty");
  return files;
}

}  // namespace

bool looks_like_hf_checkpoint(const std::string& dir) {
  std::error_code ec;
  const fs::path d(dir);
  return fs::is_regular_file(d / "config.json", ec) &&
         (fs::is_regular_file(d / "model.safetensors", ec) || fs::is_regular_file(d / "model.safetensors.index.json", ec));
}

Result<ModelSource> open_hf_checkpoint(const std::string& dir_path) {
  const fs::path dir(dir_path);
  std::error_code ec;
  if (!fs::is_regular_file(dir / "config.json", ec)) return not_found(dir_path + ": no config.json in the checkpoint");
  std::vector<std::string> files;
  if (fs::is_regular_file(dir / "model.safetensors.index.json", ec)) {
    QRT_ASSIGN_OR_RETURN(files, shards_from_index(dir / "model.safetensors.index.json"));
  } else if (fs::is_regular_file(dir / "model.safetensors", ec)) {
    files.push_back((dir / "model.safetensors").string());
  } else {
    return not_found(dir_path + ": neither model.safetensors nor model.safetensors.index.json");
  }
  ModelSource src;
  std::vector<std::pair<SafetensorsEntry, std::string>> scales;  // weight_scale_inv entries and their files
  src.kind = SourceKind::kHfCheckpoint;
  src.path = dir_path;
  for (const std::string& file : files) {
    QRT_ASSIGN_OR_RETURN(SafetensorsFile f, read_safetensors(file));
    for (const SafetensorsEntry& e : f.entries) {
      if (ends_with(e.name, "_scale_inv") || ends_with(e.name, ".input_scale")) continue;  // companions, activations
      if (e.dtype == quant::ScalarType::kU8 && ends_with(e.name, "_scales")) continue;    // MXFP4 companions
      if (src.tensors.count(e.name)) return format_error(file + ": tensor '" + e.name + "' appears in two shards");
      if (e.dtype == quant::ScalarType::kF8_E4M3) {
        // Block-wise FP8: the scale companion may live in any shard, so look it up after all shards are read.
        QuantTensor t;
        t.name = e.name;
        t.format = quant::FormatId::kFP8_BLOCK;
        t.shape = e.shape;
        t.data = e.data;
        t.file = file;
        src.tensors.emplace(e.name, std::move(t));
        continue;
      }
      if (e.dtype == quant::ScalarType::kU8 && ends_with(e.name, "_blocks")) {
        // gpt-oss's MXFP4 experts: "<name>_blocks" [.., rows, blocks, 16] of E2M1 pairs and "<name>_scales"
        // [.., rows, blocks] of E8M0 exponents, UQFF's MXFP4 layout (spec/uqff.md §3.3), as tensor <name>.
        if (e.shape.size() < 3 || e.shape.back() != 16)
          return format_error(file + ": MXFP4 blocks '" + e.name + "' must end in a dimension of 16 bytes");
        QuantTensor t;
        t.name = e.name.substr(0, e.name.size() - std::string("_blocks").size());
        t.format = quant::FormatId::kMXFP4;
        t.shape.assign(e.shape.begin(), e.shape.end() - 2);
        t.shape.push_back(e.shape[e.shape.size() - 2] * 32);
        t.data = e.data;
        t.file = file;
        if (src.tensors.count(t.name)) return format_error(file + ": tensor '" + t.name + "' appears twice");
        const std::string name = t.name;
        src.tensors.emplace(name, std::move(t));
        continue;
      }
      auto t = dense_quant_tensor(e, file);
      if (!t.ok()) return t.status();
      src.tensors.emplace(e.name, std::move(*t));
    }
    src.keep_alive.push_back(f.mapping);
    // FP8 scale companions may sit in any shard: collect them, attach once every shard is read.
    for (const SafetensorsEntry& e : f.entries)
      if (ends_with(e.name, "_scale_inv") || (e.dtype == quant::ScalarType::kU8 && ends_with(e.name, "_scales")))
        scales.push_back({e, file});
  }
  for (const auto& [e, file] : scales) {
    if (ends_with(e.name, "_scales")) {
      const std::string weight = e.name.substr(0, e.name.size() - std::string("_scales").size());
      auto it = src.tensors.find(weight);
      if (it == src.tensors.end() || it->second.format != quant::FormatId::kMXFP4)
        return format_error(file + ": '" + e.name + "' has no MXFP4 blocks '" + weight + "_blocks'");
      const QuantTensor& t = it->second;
      if (t.data.size != static_cast<uint64_t>(t.numel()) / 2 || e.data.size != static_cast<uint64_t>(t.numel()) / 32)
        return format_error(file + ": '" + e.name + "' (" + std::to_string(e.data.size) + " bytes) does not match '" +
                            weight + "_blocks' (" + std::to_string(t.data.size) + " bytes)");
      it->second.scales = e.data;
      continue;
    }
    const std::string weight = e.name.substr(0, e.name.size() - std::string("_scale_inv").size());
    auto it = src.tensors.find(weight);
    if (it == src.tensors.end() || it->second.format != quant::FormatId::kFP8_BLOCK)
      return format_error(file + ": '" + e.name + "' has no FP8 weight '" + weight + "'");
    if (e.dtype != quant::ScalarType::kF32) return format_error(file + ": '" + e.name + "' must be F32");
    it->second.scales = e.data;
    it->second.params.scale_type = quant::ScalarType::kF32;
  }
  for (const auto& [name, t] : src.tensors) {
    if (t.format == quant::FormatId::kMXFP4 && t.scales.empty())
      return format_error(dir_path + ": MXFP4 blocks '" + name + "_blocks' have no '" + name + "_scales'");
    if (t.format != quant::FormatId::kFP8_BLOCK) continue;
    if (t.scales.empty()) return format_error(dir_path + ": FP8 weight '" + name + "' has no weight_scale_inv");
    if (t.shape.size() != 2) return format_error(dir_path + ": FP8 weight '" + name + "' must be 2-D");
    auto sizes = cpu::part_sizes(t.format, t.rows(), t.cols(), t.params);
    if (!sizes.ok()) return sizes.status().with_context(dir_path + ": FP8 weight '" + name + "'");
    if (sizes->scales != t.scales.size || sizes->data != t.data.size)
      return format_error(dir_path + ": FP8 weight '" + name + "' has " + std::to_string(t.scales.size) +
                          " bytes of weight_scale_inv, expected " + std::to_string(sizes->scales) +
                          " for 128x128 blocks");
  }
  src.hf_config_json = read_optional(dir / "config.json");
  src.tokenizer.tokenizer_json = read_optional(dir / "tokenizer.json");
  src.tokenizer.tokenizer_config_json = read_optional(dir / "tokenizer_config.json");
  src.tokenizer.generation_config_json = read_optional(dir / "generation_config.json");
  src.tokenizer.chat_template = read_optional(dir / "chat_template.jinja");
  return src;
}

}  // namespace qrt
