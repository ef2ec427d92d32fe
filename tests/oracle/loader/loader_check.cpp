// qrt_loader_check: prints what qrt's loader makes of a file as JSON, for the Python oracle tests to compare
// with what gguf-py / the safetensors package wrote or read.
//
//   qrt_loader_check gguf <file> [--allow-unsupported]   one GGUF file
//   qrt_loader_check gguf-model <file>                   a GGUF model (follows split sets)
//   qrt_loader_check safetensors <file>
//   qrt_loader_check mutate <gguf|safetensors> <file>    stdin: {"mutations": [{"truncate": n} |
//                                                         {"patch": offset, "hex": "..."}, ...]}; prints one
//                                                         {ok, code, message} per mutation
// Exit status: 0 parsed, 1 the loader refused the input (JSON says why), 2 usage or I/O trouble.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "loader/gguf.hpp"
#include "loader/safetensors.hpp"

namespace {

using json = nlohmann::json;
using namespace qrt;

std::string to_hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    s += digits[c >> 4];
    s += digits[c & 0xF];
  }
  return s;
}

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out;
  auto nibble = [](char c) { return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10; };
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(nibble(hex[i]) << 4 | nibble(hex[i + 1])));
  return out;
}

json float_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

json array_json(const GgufArray& a);

json scalar_json(const GgufValue& v) {
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::string>) return to_hex(x);
        else if constexpr (std::is_same_v<T, GgufArray>) return array_json(x);
        else if constexpr (std::is_floating_point_v<T>) return float_json(x);
        else if constexpr (std::is_same_v<T, bool>) return x;
        else return static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(x);
      },
      v.data);
}

json array_json(const GgufArray& a) {
  json items = json::array();
  std::visit(
      [&](const auto& vec) {
        using T = typename std::decay_t<decltype(vec)>::value_type;
        for (const auto& x : vec) {
          if constexpr (std::is_same_v<T, std::string>) items.push_back(to_hex(x));
          else if constexpr (std::is_same_v<T, GgufArray>) items.push_back(array_json(x));
          else if constexpr (std::is_floating_point_v<T>) items.push_back(float_json(x));
          else if constexpr (std::is_same_v<T, bool>) items.push_back(static_cast<bool>(x));
          else items.push_back(static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(x));
        }
      },
      a.items);
  return {{"elem_type", gguf_type_name(a.elem_type())}, {"items", items}};
}

// The first up-to-16 values of the first and the last row, dequantized by the CPU reference.
json sample_values(const QuantTensor& t) {
  if (t.numel() == 0) return nullptr;
  json out = json::object();
  const int64_t cols = t.cols();
  const int64_t row_bytes = static_cast<int64_t>(t.data.size) / t.rows();
  for (auto [label, row] : {std::pair<const char*, int64_t>{"first_row", 0}, {"last_row", t.rows() - 1}}) {
    quant::QuantView v = t.view();
    v.data = t.data.data + row * row_bytes;
    v.rows = 1;
    std::vector<float> values(static_cast<size_t>(cols));
    Status s = cpu::dequantize(t.format, v, values.data());
    if (!s.ok()) return s.to_string();
    json row_json = json::array();
    for (int64_t i = 0; i < std::min<int64_t>(cols, 16); ++i) row_json.push_back(float_json(values[i]));
    out[label] = row_json;
  }
  return out;
}

json error_json(const Status& s) {
  return {{"ok", false}, {"code", error_code_name(s.code())}, {"message", s.message()}};
}

json gguf_file_json(const GgufFile& f, const TensorTable& tensors) {
  json md = json::array();
  for (const auto& [key, value] : f.metadata.entries())
    md.push_back({{"key", key}, {"type", gguf_type_name(value.type())}, {"value", scalar_json(value)}});
  json infos = json::array();
  for (const GgufTensorInfo& t : f.tensor_infos) {
    json j = {{"name", t.name}, {"ggml_type", t.ggml_type}, {"ne", t.ne}, {"offset", t.offset},
              {"file_offset", t.file_offset}, {"nbytes", t.nbytes}};
    auto it = tensors.find(t.name);
    if (t.format && it != tensors.end()) {
      j["format"] = quant::format_name(*t.format);
      j["shape"] = it->second.shape;
      j["values"] = sample_values(it->second);
    } else {
      j["format"] = nullptr;
    }
    infos.push_back(j);
  }
  return {{"ok", true},           {"path", f.path},           {"version", f.version},
          {"alignment", f.alignment}, {"data_offset", f.data_offset}, {"metadata", md},
          {"tensors", infos}};
}

json safetensors_json(const SafetensorsFile& f) {
  json entries = json::array();
  for (const SafetensorsEntry& e : f.entries) {
    json j = {{"name", e.name}, {"dtype", quant::scalar_type_name(e.dtype)}, {"shape", e.shape},
              {"begin", e.begin}, {"end", e.end}, {"file_offset", f.data_offset + e.begin}};
    if (auto qt = dense_quant_tensor(e, f.path); qt.ok()) j["values"] = sample_values(*qt);
    entries.push_back(j);
  }
  return {{"ok", true}, {"header_bytes", f.header_bytes}, {"data_offset", f.data_offset},
          {"metadata", f.metadata}, {"entries", entries}};
}

int print(const json& j) {
  std::cout << j.dump() << "\n";
  return j.value("ok", true) ? 0 : 1;
}

int run_mutations(const std::string& kind, const std::string& path) {
  auto mapping = MappedFile::open(path);
  if (!mapping.ok()) {
    std::cerr << mapping.status().to_string() << "\n";
    return 2;
  }
  const std::string input{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  const json request = json::parse(input);
  json results = json::array();
  const ByteSpan whole = mapping->bytes();
  for (const json& m : request.at("mutations")) {
    // Every mutation parses its own exact-size copy so that an over-read is a real out-of-bounds access.
    std::vector<uint8_t> bytes(whole.data, whole.data + whole.size);
    if (m.contains("truncate")) bytes.resize(m.at("truncate").get<size_t>());
    if (m.contains("patch")) {
      const size_t at = m.at("patch").get<size_t>();
      const std::vector<uint8_t> patch = from_hex(m.at("hex").get<std::string>());
      if (at + patch.size() > bytes.size()) bytes.resize(at + patch.size());
      std::copy(patch.begin(), patch.end(), bytes.begin() + static_cast<std::ptrdiff_t>(at));
    }
    const ByteSpan span{bytes.data(), bytes.size()};
    Status s;
    if (kind == "gguf") {
      auto r = parse_gguf(span, "mutated", GgufReadOptions{true});
      s = r.status();
    } else {
      auto r = parse_safetensors(span, "mutated");
      s = r.status();
    }
    results.push_back(s.ok() ? json{{"ok", true}} : error_json(s));
  }
  std::cout << results.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: qrt_loader_check gguf|gguf-model|safetensors <file> [--allow-unsupported]\n"
                 "       qrt_loader_check mutate gguf|safetensors <file> < mutations.json\n";
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "mutate" && argc >= 4) return run_mutations(argv[2], argv[3]);
    const std::string path = argv[2];
    GgufReadOptions options;
    options.allow_unsupported_types = argc > 3 && std::string(argv[3]) == "--allow-unsupported";
    if (mode == "gguf") {
      auto f = read_gguf_file(path, options);
      return print(f.ok() ? gguf_file_json(*f, f->tensors) : error_json(f.status()));
    }
    if (mode == "gguf-model") {
      auto m = open_gguf(path, options);
      if (!m.ok()) return print(error_json(m.status()));
      json shards = json::array();
      for (const GgufFile& f : m->shards) shards.push_back(gguf_file_json(f, m->tensors));
      json names = json::array();
      for (const auto& [name, t] : m->tensors) names.push_back({{"name", name}, {"file", t.file}});
      return print({{"ok", true}, {"shards", shards}, {"tensors", names}});
    }
    if (mode == "safetensors") {
      auto f = read_safetensors(path);
      return print(f.ok() ? safetensors_json(*f) : error_json(f.status()));
    }
  } catch (const std::exception& e) {
    std::cerr << "qrt_loader_check: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "unknown mode " << mode << "\n";
  return 2;
}
