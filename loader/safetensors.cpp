#include "loader/safetensors.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kernels/quant/common.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt {
namespace {

using json = nlohmann::json;

// The deepest {} / [] nesting in a JSON text, strings skipped. Checked before parsing so that a hostile header
// cannot make the JSON library recurse or allocate in proportion to its depth.
int json_nesting_depth(const char* p, const char* end, int limit) {
  int depth = 0;
  int deepest = 0;
  bool in_string = false;
  for (; p < end; ++p) {
    const char c = *p;
    if (in_string) {
      if (c == '\\') {
        ++p;  // skip the escaped character (a truncated escape is the parser's error to report)
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return deepest;
}

// A JSON value that must be a non-negative integer.
Result<uint64_t> json_unsigned(const json& v, const std::string& what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return format_error(what + " is negative (" + v.dump() + ")");
  return format_error(what + " must be a non-negative integer, found " + std::string(v.type_name()) + " " +
                      v.dump());
}

Status parse_entry(const std::string& name, const json& info, uint64_t buffer_bytes, SafetensorsEntry* out) {
  const std::string where = "tensor '" + name + "'";
  if (!info.is_object())
    return format_error(where + ": expected an object with dtype, shape and data_offsets, found " +
                        std::string(info.type_name()));
  const auto dtype_it = info.find("dtype");
  const auto shape_it = info.find("shape");
  const auto offsets_it = info.find("data_offsets");
  if (dtype_it == info.end()) return format_error(where + ": missing \"dtype\"");
  if (shape_it == info.end()) return format_error(where + ": missing \"shape\"");
  if (offsets_it == info.end()) return format_error(where + ": missing \"data_offsets\"");

  if (!dtype_it->is_string())
    return format_error(where + ": \"dtype\" must be a string, found " + std::string(dtype_it->type_name()));
  const std::string dtype_name = dtype_it->get<std::string>();
  const auto dtype = quant::scalar_type_from_name(dtype_name);
  if (!dtype) return unsupported(where + ": unknown dtype '" + dtype_name + "'");

  if (!shape_it->is_array())
    return format_error(where + ": \"shape\" must be an array, found " + std::string(shape_it->type_name()));
  // Element count, overflow-checked: every dimension is below 2^63 and the product must stay there too.
  uint64_t numel = 1;
  bool overflow = false;
  bool has_zero = false;
  out->shape.clear();
  out->shape.reserve(shape_it->size());
  for (size_t i = 0; i < shape_it->size(); ++i) {
    QRT_ASSIGN_OR_RETURN(uint64_t dim, json_unsigned((*shape_it)[i], where + ": shape[" + std::to_string(i) + "]"));
    if (dim > static_cast<uint64_t>(INT64_MAX))
      return format_error(where + ": shape[" + std::to_string(i) + "] = " + std::to_string(dim) + " is too large");
    out->shape.push_back(static_cast<int64_t>(dim));
    if (dim == 0) has_zero = true;
    if (dim != 0 && numel > static_cast<uint64_t>(INT64_MAX) / dim) overflow = true;
    if (!overflow) numel *= dim;
  }
  // A zero dimension makes any product of the others irrelevant.
  if (has_zero) {
    overflow = false;
    numel = 0;
  }
  if (overflow) return format_error(where + ": shape " + shape_it->dump() + " has more than 2^63 elements");

  if (!offsets_it->is_array() || offsets_it->size() != 2)
    return format_error(where + ": \"data_offsets\" must be [begin, end], found " + offsets_it->dump());
  QRT_ASSIGN_OR_RETURN(uint64_t begin, json_unsigned((*offsets_it)[0], where + ": data_offsets[0]"));
  QRT_ASSIGN_OR_RETURN(uint64_t end, json_unsigned((*offsets_it)[1], where + ": data_offsets[1]"));
  if (begin > end)
    return format_error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                        "] end before they begin");
  if (end > buffer_bytes)
    return format_error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                        "] reach past the data buffer of " + std::to_string(buffer_bytes) + " bytes");
  const uint64_t elem_bytes = static_cast<uint64_t>(quant::scalar_type_bytes(*dtype));
  if (numel > UINT64_MAX / elem_bytes || numel * elem_bytes != end - begin)
    return format_error(where + ": shape " + shape_it->dump() + " of " + dtype_name + " needs " +
                        (numel > UINT64_MAX / elem_bytes ? std::string("more than 2^64")
                                                         : std::to_string(numel * elem_bytes)) +
                        " bytes but data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                        "] span " + std::to_string(end - begin));
  out->name = name;
  out->dtype = *dtype;
  out->begin = begin;
  out->end = end;
  return ok_status();
}

}  // namespace

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(entries.begin(), entries.end(), name,
                             [](const SafetensorsEntry& e, std::string_view n) { return e.name < n; });
  return it != entries.end() && it->name == name ? &*it : nullptr;
}

Result<const SafetensorsEntry*> SafetensorsFile::get(std::string_view name) const {
  if (const SafetensorsEntry* e = find(name)) return e;
  return not_found("safetensors '" + path + "': no tensor '" + std::string(name) + "'");
}

Result<SafetensorsFile> parse_safetensors(ByteSpan bytes, const std::string& path) {
  const std::string where = "safetensors '" + path + "'";
  SafetensorsFile file;
  file.path = path;
  if (bytes.size < 8)
    return format_error(where + ": " + std::to_string(bytes.size) +
                        " bytes is too short for the 8-byte header length");
  const uint64_t n = static_cast<uint64_t>(quant::load_u32(bytes.data)) |
                     (static_cast<uint64_t>(quant::load_u32(bytes.data + 4)) << 32);
  if (n > bytes.size - 8)
    return format_error(where + ": header length " + std::to_string(n) + " exceeds the " +
                        std::to_string(bytes.size - 8) + " bytes after the length field");
  if (n > kSafetensorsMaxHeaderBytes)
    return format_error(where + ": header length " + std::to_string(n) + " exceeds the limit of " +
                        std::to_string(kSafetensorsMaxHeaderBytes) + " bytes");
  if (n < 2) return format_error(where + ": header of " + std::to_string(n) + " bytes cannot hold a JSON object");
  file.header_bytes = n;
  file.data_offset = 8 + n;
  const uint64_t buffer_bytes = bytes.size - file.data_offset;

  const char* text = reinterpret_cast<const char*>(bytes.data + 8);
  const int depth = json_nesting_depth(text, text + n, kSafetensorsMaxJsonDepth);
  if (depth > kSafetensorsMaxJsonDepth)
    return format_error(where + ": header JSON nests deeper than " + std::to_string(kSafetensorsMaxJsonDepth) +
                        " levels");
  json header;
  try {
    header = json::parse(text, text + n);
  } catch (const json::exception& e) {
    return format_error(where + ": header is not valid JSON: " + e.what());
  } catch (const std::bad_alloc&) {
    return format_error(where + ": header JSON too large to hold in memory");
  }
  if (!header.is_object())
    return format_error(where + ": header must be a JSON object, found " + std::string(header.type_name()));

  file.entries.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      // MLX's writer (through nlohmann json) stores a missing metadata map as null (spec/ollama.md §2.3).
      if (it.value().is_null()) continue;
      if (!it.value().is_object())
        return format_error(where + ": __metadata__ must be an object of strings, found " +
                            std::string(it.value().type_name()));
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string())
          return format_error(where + ": __metadata__ value for '" + m.key() + "' must be a string, found " +
                              std::string(m.value().type_name()));
        file.metadata.emplace(m.key(), m.value().get<std::string>());
      }
      continue;
    }
    SafetensorsEntry entry;
    Status s = parse_entry(it.key(), it.value(), buffer_bytes, &entry);
    if (!s.ok()) return s.with_context(where);
    entry.data = ByteSpan{bytes.data + file.data_offset + entry.begin, entry.end - entry.begin};
    file.entries.push_back(std::move(entry));
  }
  // nlohmann's object is a std::map, so entries arrive sorted by name already; find() relies on it.
  std::sort(file.entries.begin(), file.entries.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) { return a.name < b.name; });

  // No two non-empty byte ranges may share a byte.
  std::vector<const SafetensorsEntry*> by_offset;
  by_offset.reserve(file.entries.size());
  for (const auto& e : file.entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const SafetensorsEntry* a, const SafetensorsEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
  });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const SafetensorsEntry* prev = by_offset[i - 1];
    const SafetensorsEntry* cur = by_offset[i];
    if (cur->begin < prev->end)
      return format_error(where + ": tensor '" + cur->name + "' bytes [" + std::to_string(cur->begin) + ", " +
                          std::to_string(cur->end) + ") overlap tensor '" + prev->name + "' bytes [" +
                          std::to_string(prev->begin) + ", " + std::to_string(prev->end) + ")");
  }
  return file;
}

Result<SafetensorsFile> read_safetensors(const std::string& path) {
  QRT_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapping, MappedFile::open_shared(path));
  QRT_ASSIGN_OR_RETURN(SafetensorsFile file, parse_safetensors(mapping->bytes(), path));
  file.mapping = std::move(mapping);
  return file;
}

Result<QuantTensor> dense_quant_tensor(const SafetensorsEntry& entry, const std::string& path) {
  quant::FormatId format;
  switch (entry.dtype) {
    case quant::ScalarType::kF32: format = quant::FormatId::kF32; break;
    case quant::ScalarType::kF16: format = quant::FormatId::kF16; break;
    case quant::ScalarType::kBF16: format = quant::FormatId::kBF16; break;
    default:
      return unsupported("safetensors '" + path + "': tensor '" + entry.name + "' has dtype " +
                         std::string(quant::scalar_type_name(entry.dtype)) +
                         ", expected F32, F16 or BF16 for a dense weight");
  }
  QuantTensor t;
  t.name = entry.name;
  t.format = format;
  t.shape = entry.shape;
  t.data = entry.data;
  t.file = path;
  return t;
}

}  // namespace qrt
