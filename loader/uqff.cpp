#include "loader/uqff.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt {
namespace fs = std::filesystem;
using quant::FormatId;
using quant::ScalarType;

namespace {

constexpr const char* kVersionKeys[] = {"uqff.version.major", "uqff.version.minor", "uqff.version.patch"};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_unsigned_integer(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "<stem>-<n>.uqff" -> {stem, n}.
bool split_shard_name(const std::string& filename, std::string* stem, int* index) {
  if (filename.size() <= 5 || filename.compare(filename.size() - 5, 5, ".uqff") != 0) return false;
  const std::string base = filename.substr(0, filename.size() - 5);
  const size_t dash = base.rfind('-');
  if (dash == std::string::npos || dash == 0) return false;
  const std::string num = base.substr(dash + 1);
  if (!is_unsigned_integer(num) || num.size() > 6) return false;
  *stem = base.substr(0, dash);
  *index = std::stoi(num);
  return true;
}

Result<std::string> read_text_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return io_error(p.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string read_optional(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return {};
  auto t = read_text_file(p);
  return t.ok() ? *t : std::string();
}

// Sets from uqff_report.json: outputs[].{quant, shards[]}, validated as mistral.rs does.
Result<std::vector<UqffShardSet>> sets_from_report(const fs::path& dir, const fs::path& report) {
  QRT_ASSIGN_OR_RETURN(std::string text, read_text_file(report));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  const std::string where = report.string();
  if (j.is_discarded() || !j.is_object()) return format_error(where + ": not a JSON object");
  if (!j.contains("outputs") || !j["outputs"].is_array() || j["outputs"].empty())
    return format_error(where + ": no outputs listed");
  std::vector<UqffShardSet> sets;
  std::set<std::string> names, claimed;
  for (const auto& out : j["outputs"]) {
    if (!out.is_object() || !out.contains("quant") || !out["quant"].is_string() || !out.contains("shards") ||
        !out["shards"].is_array() || out["shards"].empty())
      return format_error(where + ": an output lacks a quant name or its shards");
    UqffShardSet s;
    s.name = out["quant"].get<std::string>();
    if (!names.insert(lower(s.name)).second) return format_error(where + ": quant '" + s.name + "' listed twice");
    for (const auto& sh : out["shards"]) {
      if (!sh.is_string()) return format_error(where + ": shard names must be strings");
      const std::string file = sh.get<std::string>();
      if (file.find('/') != std::string::npos || file.find("..") != std::string::npos)
        return format_error(where + ": shard '" + file + "' is not a file name in the export directory");
      if (!claimed.insert(file).second) return format_error(where + ": shard '" + file + "' claimed twice");
      std::error_code ec;
      if (!fs::is_regular_file(dir / file, ec))
        return not_found(where + ": lists shard '" + file + "', which is not in " + dir.string());
      s.shards.push_back((dir / file).string());
    }
    sets.push_back(std::move(s));
  }
  return sets;
}

Result<uint32_t> version_scalar(const SafetensorsEntry& e, const std::string& file) {
  if (e.dtype != ScalarType::kU32 || !e.shape.empty() || e.data.size != 4)
    return format_error(file + ": UQFF version tensor '" + e.name + "' must be a scalar U32");
  return quant::load_u32(e.data.data);
}

// Small scalar helpers for per-layer metadata entries.
Result<uint64_t> scalar_uint(const SafetensorsEntry& e, const std::string& file) {
  if (e.numel() != 1) return format_error(file + ": '" + e.name + "' must be a scalar");
  switch (e.dtype) {
    case ScalarType::kU8: return uint64_t{e.data.data[0]};
    case ScalarType::kU32: return uint64_t{quant::load_u32(e.data.data)};
    case ScalarType::kI32: {
      const int32_t v = static_cast<int32_t>(quant::load_u32(e.data.data));
      if (v < 0) return format_error(file + ": '" + e.name + "' is negative");
      return static_cast<uint64_t>(v);
    }
    default:
      return format_error(file + ": '" + e.name + "' has dtype " + std::string(quant::scalar_type_name(e.dtype)) +
                          ", expected an unsigned integer scalar");
  }
}

Result<float> scalar_f32(const SafetensorsEntry& e, const std::string& file) {
  if (e.numel() != 1 || e.dtype != ScalarType::kF32)
    return format_error(file + ": '" + e.name + "' must be an F32 scalar");
  return quant::load_f32(e.data.data);
}

// A U32 vector entry (weight.shape) -> logical shape.
Result<std::vector<int64_t>> shape_vector(const SafetensorsEntry& e, const std::string& file) {
  if (e.dtype != ScalarType::kU32 || e.shape.size() != 1 || e.shape[0] < 1 || e.shape[0] > 4)
    return format_error(file + ": '" + e.name + "' must be a U32 vector of 1 to 4 dims");
  std::vector<int64_t> shape;
  // Four u32 dims can multiply past 2^63, where a wrapped element count could match a small payload.
  uint64_t numel = 1;
  for (int64_t i = 0; i < e.shape[0]; ++i) {
    const uint32_t d = quant::load_u32(e.data.data + 4 * i);
    if (d == 0) return format_error(file + ": '" + e.name + "' has a zero dimension");
    if (__builtin_mul_overflow(numel, uint64_t{d}, &numel) || numel > static_cast<uint64_t>(INT64_MAX))
      return format_error(file + ": '" + e.name + "' describes more than 2^63 elements");
    shape.push_back(d);
  }
  return shape;
}

std::string shape_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Entry lookup across all shards of a set (a layer's entries may land in different shards).
class EntryIndex {
 public:
  explicit EntryIndex(const UqffShards& shards) {
    for (const SafetensorsFile& f : shards.files)
      for (const SafetensorsEntry& e : f.entries) map_.emplace(e.name, std::make_pair(&e, &f));
  }
  const SafetensorsEntry* find(const std::string& name) const {
    auto it = map_.find(name);
    return it == map_.end() ? nullptr : it->second.first;
  }
  const std::string& file_of(const std::string& name) const { return map_.at(name).second->path; }
  Result<const SafetensorsEntry*> need(const std::string& name, const std::string& layer) const {
    const SafetensorsEntry* e = find(name);
    if (!e) return format_error("UQFF layer '" + layer + "': missing entry '" + name + "'");
    return e;
  }
  const std::map<std::string, std::pair<const SafetensorsEntry*, const SafetensorsFile*>>& all() const {
    return map_;
  }

 private:
  std::map<std::string, std::pair<const SafetensorsEntry*, const SafetensorsFile*>> map_;
};

Result<FormatId> named_format(const std::string& name, const std::string& layer) {
  auto f = quant::format_from_name(name);
  if (!f) return unsupported("UQFF layer '" + layer + "': format " + name + " is not supported by this build");
  return *f;
}

// Checks the parts' byte sizes against what the format needs for this logical shape.
Status check_parts(const QuantTensor& t, const std::string& layer) {
  if (t.shape.empty()) return format_error("UQFF layer '" + layer + "': empty shape");
  auto sizes = cpu::part_sizes(t.format, t.rows(), t.cols(), t.params);
  if (!sizes.ok())
    return format_error("UQFF layer '" + layer + "' (" + std::string(quant::format_name(t.format)) + " " +
                        shape_string(t.shape) + "): " + sizes.status().message());
  auto check = [&](const char* part, uint64_t want, uint64_t have) -> Status {
    if (want == have) return ok_status();
    return format_error("UQFF layer '" + layer + "' (" + std::string(quant::format_name(t.format)) + " " +
                        shape_string(t.shape) + "): " + part + " holds " + std::to_string(have) +
                        " bytes, expected " + std::to_string(want));
  };
  QRT_TRY(check("weight", sizes->data, t.data.size));
  QRT_TRY(check("scales", sizes->scales, t.scales.size));
  QRT_TRY(check("biases/zeros", sizes->biases, t.biases.size));
  return ok_status();
}

bool is_float_scale_type(ScalarType t) {
  return t == ScalarType::kF32 || t == ScalarType::kF16 || t == ScalarType::kBF16;
}

// Builds the QuantTensor of one layer `<key>` from its family's entries (spec/uqff.md §2.6, §3).
Result<QuantTensor> layer_tensor(const EntryIndex& idx, const std::string& key, uint64_t tag) {
  const std::string w = key + ".weight";
  QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* weight, idx.need(w, key));
  const std::string& file = idx.file_of(w);
  QuantTensor t;
  t.name = w;
  t.file = file;
  t.data = weight->data;
  auto need = [&](const char* suffix) { return idx.need(w + suffix, key); };
  switch (tag) {
    case 0: {  // GGML blocks
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* dt, need(".dtype"));
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* sh, need(".shape"));
      QRT_ASSIGN_OR_RETURN(uint64_t code, scalar_uint(*dt, file));
      auto f = quant::format_from_ggml_type(static_cast<int>(code));
      if (!f) return unsupported("UQFF layer '" + key + "': GGML type " + std::to_string(code) + " is not supported");
      if (weight->dtype != ScalarType::kU8 || weight->shape.size() != 1)
        return format_error("UQFF layer '" + key + "': GGML weight must be a 1-D U8 tensor");
      t.format = *f;
      QRT_ASSIGN_OR_RETURN(t.shape, shape_vector(*sh, file));
      break;
    }
    case 1: {  // Unquant: the dense weight in its own dtype and shape
      QRT_ASSIGN_OR_RETURN(QuantTensor d, dense_quant_tensor(*weight, file));
      d.name = w;
      return d;
    }
    case 2: {  // HQQ
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* scales, need(".scales"));
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* zeros, need(".zeros"));
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* sh, need(".shape"));
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* bits_e, need(".bits"));
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* gs_e, need(".group_size"));
      QRT_ASSIGN_OR_RETURN(uint64_t bits, scalar_uint(*bits_e, file));
      QRT_ASSIGN_OR_RETURN(uint64_t gs, scalar_uint(*gs_e, file));
      if (const SafetensorsEntry* axis = idx.find(w + ".axis")) {
        QRT_ASSIGN_OR_RETURN(uint64_t a, scalar_uint(*axis, file));
        if (a != 0) return unsupported("UQFF layer '" + key + "': HQQ axis " + std::to_string(a) + " (only 0 is defined)");
      }
      if (bits != 4 && bits != 8) return format_error("UQFF layer '" + key + "': HQQ bits " + std::to_string(bits));
      if (scales->dtype != zeros->dtype || !is_float_scale_type(scales->dtype))
        return format_error("UQFF layer '" + key + "': HQQ scales and zeros must share a float dtype");
      if (gs == 0 || gs > 1u << 20) return format_error("UQFF layer '" + key + "': HQQ group size " + std::to_string(gs));
      QRT_ASSIGN_OR_RETURN(t.format, named_format(bits == 4 ? "hqq4" : "hqq8", key));
      QRT_ASSIGN_OR_RETURN(t.shape, shape_vector(*sh, file));
      t.scales = scales->data;
      t.biases = zeros->data;
      t.params.group_size = static_cast<int32_t>(gs);
      t.params.scale_type = scales->dtype;
      break;
    }
    case 3: {  // FP8 per tensor
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* ws, need(".dequant_w_scale"));
      QRT_ASSIGN_OR_RETURN(t.params.global_scale, scalar_f32(*ws, file));
      if (weight->dtype != ScalarType::kF8_E4M3 || weight->shape.size() != 2)
        return format_error("UQFF layer '" + key + "': FP8 weight must be a 2-D F8_E4M3 tensor");
      if (const SafetensorsEntry* dt = idx.find(w + ".dtype")) {
        QRT_ASSIGN_OR_RETURN(uint64_t code, scalar_uint(*dt, file));
        if (code != 9) return unsupported("UQFF layer '" + key + "': FP8 dtype code " + std::to_string(code) + " (only 9 = E4M3)");
      }
      QRT_ASSIGN_OR_RETURN(t.format, named_format("fp8", key));
      t.shape = weight->shape;
      break;
    }
    case 4: {  // AFQ
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* scales, need(".scales"));
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* biases, need(".biases"));
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* bits_e, need(".bits"));
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* gs_e, need(".group_size"));
      QRT_ASSIGN_OR_RETURN(uint64_t bits, scalar_uint(*bits_e, file));
      QRT_ASSIGN_OR_RETURN(uint64_t gs, scalar_uint(*gs_e, file));
      if (bits < 2 || bits > 8 || bits == 7) return format_error("UQFF layer '" + key + "': AFQ bits " + std::to_string(bits));
      if (weight->dtype != ScalarType::kU32 || weight->shape.size() < 2)
        return format_error("UQFF layer '" + key + "': AFQ weight must be a U32 tensor of rank >= 2");
      if (scales->dtype != biases->dtype || !is_float_scale_type(scales->dtype) || scales->shape != biases->shape)
        return format_error("UQFF layer '" + key + "': AFQ scales and biases must share a float dtype and shape");
      QRT_ASSIGN_OR_RETURN(t.format, named_format("afq" + std::to_string(bits), key));
      t.shape = weight->shape;
      const int64_t packed = t.shape.back();
      if (packed > (int64_t{1} << 40) || (packed * 32) % static_cast<int64_t>(bits) != 0)
        return format_error("UQFF layer '" + key + "': AFQ packed width " + std::to_string(packed) +
                            " is not a whole number of " + std::to_string(bits) + "-bit codes");
      t.shape.back() = packed * 32 / static_cast<int64_t>(bits);
      t.scales = scales->data;
      t.biases = biases->data;
      t.params.group_size = static_cast<int32_t>(gs);
      t.params.scale_type = scales->dtype;
      break;
    }
    case 5: {  // F8Q8
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* nb, need(".num_blocks"));
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* sh, need(".shape"));
      QRT_ASSIGN_OR_RETURN(uint64_t blocks, scalar_uint(*nb, file));
      QRT_ASSIGN_OR_RETURN(t.format, named_format("f8q8", key));
      QRT_ASSIGN_OR_RETURN(t.shape, shape_vector(*sh, file));
      if (t.shape.size() > 2) return unsupported("UQFF layer '" + key + "': F8Q8 does not support stacked experts");
      if (blocks != static_cast<uint64_t>((t.numel() + 31) / 32))
        return format_error("UQFF layer '" + key + "': F8Q8 num_blocks " + std::to_string(blocks) + " for " +
                            std::to_string(t.numel()) + " elements");
      break;
    }
    case 6: {  // MXFP4
      QRT_ASSIGN_OR_RETURN(const SafetensorsEntry* scales, need(".scales"));
      if (weight->dtype != ScalarType::kU8 || weight->shape.size() < 2 || scales->dtype != ScalarType::kU8)
        return format_error("UQFF layer '" + key + "': MXFP4 weight and scales must be U8 tensors of rank >= 2");
      QRT_ASSIGN_OR_RETURN(t.format, named_format("mxfp4", key));
      t.shape = weight->shape;
      t.shape.back() *= 2;
      t.scales = scales->data;
      break;
    }
    default:
      return unsupported("UQFF layer '" + key + "': format tag " + std::to_string(tag) +
                         (tag >= 7 && tag <= 10 ? " (a non-upstream fork's tag)" : "") + " is not a UQFF 1.x family");
  }
  if (t.shape.size() == 3 && (tag == 2 || tag == 3 || tag == 5))
    return unsupported("UQFF layer '" + key + "': this family does not support stacked experts");
  QRT_TRY(check_parts(t, key));
  return t;
}

}  // namespace

Result<std::vector<UqffShardSet>> find_uqff_shard_sets(const std::string& dir_path) {
  const fs::path dir(dir_path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return not_found(dir_path + " is not a directory");
  if (fs::is_regular_file(dir / "uqff_report.json", ec)) return sets_from_report(dir, dir / "uqff_report.json");
  std::map<std::string, std::map<int, std::string>> by_stem;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string stem;
    int index = 0;
    if (entry.is_regular_file(ec) && split_shard_name(entry.path().filename().string(), &stem, &index))
      by_stem[stem][index] = entry.path().string();
  }
  std::vector<UqffShardSet> sets;
  for (auto& [stem, shards] : by_stem) {
    UqffShardSet s;
    s.name = stem;
    // Shards run from 0 until the first missing index, as mistral.rs collects them.
    for (int i = 0; shards.count(i); ++i) s.shards.push_back(shards[i]);
    if (s.shards.empty()) return not_found(dir_path + ": UQFF shard set '" + stem + "' has no shard 0");
    sets.push_back(std::move(s));
  }
  return sets;
}

Result<UqffShardSet> resolve_uqff(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  auto list = [](const std::vector<UqffShardSet>& sets) {
    std::string s;
    for (const auto& set : sets) s += (s.empty() ? "" : ", ") + set.name;
    return s;
  };
  if (fs::is_directory(p, ec)) {
    QRT_ASSIGN_OR_RETURN(auto sets, find_uqff_shard_sets(path));
    if (sets.empty()) return not_found(path + ": no UQFF shards (*-0.uqff) in this directory");
    if (sets.size() > 1)
      return invalid_argument(path + " holds several UQFF shard sets (" + list(sets) +
                              "); name one, e.g. " + (p / sets.front().name).string());
    return sets.front();
  }
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  const std::string leaf = p.filename().string();
  QRT_ASSIGN_OR_RETURN(auto sets, find_uqff_shard_sets(dir.string()));
  for (const auto& s : sets) {
    if (lower(s.name) == lower(leaf)) return s;
    for (const auto& shard : s.shards)
      if (fs::path(shard).filename() == leaf) return s;
  }
  if (fs::is_regular_file(p, ec)) {
    // A single file that is not part of a set (no -<n> suffix): a one-shard set.
    if (leaf.size() > 5 && leaf.compare(leaf.size() - 5, 5, ".uqff") == 0) return UqffShardSet{leaf, {path}};
  }
  return not_found("no UQFF shard set '" + leaf + "' in " + dir.string() +
                   (sets.empty() ? std::string(" (it holds no UQFF shards)") : " (sets there: " + list(sets) + ")"));
}

bool looks_like_uqff(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return p.extension() == ".uqff";
  if (fs::is_directory(p, ec)) {
    auto sets = find_uqff_shard_sets(path);
    return sets.ok() && !sets->empty();
  }
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  if (!fs::is_directory(dir, ec)) return false;
  auto sets = find_uqff_shard_sets(dir.string());
  return sets.ok() && !sets->empty();
}

Result<UqffShards> open_uqff_shards(const std::vector<std::string>& shard_paths) {
  std::vector<SafetensorsFile> files;
  for (const std::string& path : shard_paths) {
    QRT_ASSIGN_OR_RETURN(SafetensorsFile f, read_safetensors(path));
    files.push_back(std::move(f));
  }
  return check_uqff_shards(std::move(files));
}

Result<UqffShards> check_uqff_shards(std::vector<SafetensorsFile> files) {
  UqffShards out;
  out.files = std::move(files);
  // Union of names: duplicates are errors, except identical U32 version scalars.
  std::map<std::string, const SafetensorsFile*> owner;
  std::map<std::string, uint32_t> versions;
  size_t total = 0;
  bool all_numeric = true;
  for (const SafetensorsFile& f : out.files) {
    for (const SafetensorsEntry& e : f.entries) {
      ++total;
      all_numeric = all_numeric && is_unsigned_integer(e.name);
      const bool is_version = std::any_of(std::begin(kVersionKeys), std::end(kVersionKeys),
                                          [&](const char* k) { return e.name == k; });
      if (is_version) {
        QRT_ASSIGN_OR_RETURN(uint32_t v, version_scalar(e, f.path));
        auto [it, fresh] = versions.emplace(e.name, v);
        if (!fresh && it->second != v)
          return format_error(f.path + ": conflicting UQFF version tensor '" + e.name + "' (" +
                              std::to_string(it->second) + " elsewhere, " + std::to_string(v) + " here)");
        continue;
      }
      auto [it, fresh] = owner.emplace(e.name, &f);
      if (!fresh)
        return format_error("duplicate tensor key '" + e.name + "' in UQFF shards '" + it->second->path + "' and '" +
                            f.path + "'");
    }
  }
  const std::string set = out.files.empty() ? std::string("UQFF set") : out.files.front().path;
  if (total > 0 && all_numeric)
    return unsupported(set + ": a pre-1.0 (legacy) UQFF file, which is no longer supported; regenerate it with "
                             "`mistralrs quantize`");
  if (!versions.count("uqff.version.major"))
    return unsupported(set + ": UQFF artifact has no version tag (pre-1.0 file); regenerate it with `mistralrs quantize`");
  if (!versions.count("uqff.version.minor") || !versions.count("uqff.version.patch"))
    return format_error(set + ": UQFF version has a major but no minor/patch tensor");
  out.major = versions["uqff.version.major"];
  out.minor = versions["uqff.version.minor"];
  out.patch = versions["uqff.version.patch"];
  const std::string v = std::to_string(out.major) + "." + std::to_string(out.minor) + "." + std::to_string(out.patch);
  if (out.major != kUqffReaderMajor)
    return unsupported(set + ": UQFF version " + v + " is incompatible with this reader (1.x); regenerate it");
  if (out.minor > kUqffReaderMinor)
    return unsupported(set + ": UQFF version " + v + " was written by a newer mistral.rs than this reader supports (1." +
                       std::to_string(kUqffReaderMinor) + ")");
  return out;
}

Result<TensorTable> uqff_tensors(const UqffShards& shards) {
  const EntryIndex idx(shards);
  TensorTable table;
  const std::string suffix = ".weight.format";
  for (const auto& [name, entry] : idx.all()) {
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string key = name.substr(0, name.size() - suffix.size());
    QRT_ASSIGN_OR_RETURN(uint64_t tag, scalar_uint(*entry.first, entry.second->path));
    if (entry.first->dtype != ScalarType::kU8)
      return format_error(entry.second->path + ": '" + name + "' must be a U8 scalar");
    QRT_ASSIGN_OR_RETURN(QuantTensor t, layer_tensor(idx, key, tag));
    table.emplace(t.name, std::move(t));
    if (const SafetensorsEntry* bias = idx.find(key + ".bias")) {
      auto b = dense_quant_tensor(*bias, idx.file_of(key + ".bias"));
      if (!b.ok()) return b.status().with_context("UQFF layer '" + key + "' bias");
      table.emplace(key + ".bias", std::move(*b));
    }
  }
  if (table.empty()) return format_error("UQFF set has no layers (no '<key>.weight.format' entries)");
  return table;
}

Result<ModelSource> open_uqff(const std::string& path) {
  QRT_ASSIGN_OR_RETURN(UqffShardSet set, resolve_uqff(path));
  QRT_ASSIGN_OR_RETURN(UqffShards shards, open_uqff_shards(set.shards));
  QRT_ASSIGN_OR_RETURN(TensorTable tensors, uqff_tensors(shards));
  const fs::path dir = fs::path(set.shards.front()).parent_path();
  ModelSource src;
  src.kind = SourceKind::kUqff;
  src.path = path;
  for (const SafetensorsFile& f : shards.files) src.keep_alive.push_back(f.mapping);
  // residual.safetensors: norms and every other tensor that is not a tracked module.
  const fs::path residual = dir / "residual.safetensors";
  std::error_code ec;
  if (!fs::is_regular_file(residual, ec))
    return not_found(dir.string() + ": UQFF export without residual.safetensors (norms and other tensors live there)");
  QRT_ASSIGN_OR_RETURN(SafetensorsFile res, read_safetensors(residual.string()));
  for (const SafetensorsEntry& e : res.entries) {
    if (tensors.count(e.name))
      return format_error(residual.string() + ": tensor '" + e.name + "' is also in the UQFF shards");
    auto t = dense_quant_tensor(e, res.path);
    if (!t.ok()) return t.status().with_context(residual.string() + " tensor '" + e.name + "'");
    tensors.emplace(e.name, std::move(*t));
  }
  src.keep_alive.push_back(res.mapping);
  src.tensors = std::move(tensors);
  const fs::path config = dir / "config.json";
  if (!fs::is_regular_file(config, ec)) return not_found(dir.string() + ": UQFF export without config.json");
  QRT_ASSIGN_OR_RETURN(src.hf_config_json, read_text_file(config));
  src.tokenizer.tokenizer_json = read_optional(dir / "tokenizer.json");
  src.tokenizer.tokenizer_config_json = read_optional(dir / "tokenizer_config.json");
  src.tokenizer.generation_config_json = read_optional(dir / "generation_config.json");
  src.tokenizer.chat_template = read_optional(dir / "chat_template.jinja");
  return src;
}

}  // namespace qrt
