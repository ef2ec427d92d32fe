#include "tools/convert/safetensors_writer.hpp"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

namespace qrt::convert {
namespace {

std::vector<uint8_t> little_endian(uint64_t v, int bytes) {
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  for (int i = 0; i < bytes; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  return out;
}

}  // namespace

void SafetensorsWriter::add(std::string name, quant::ScalarType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  data_bytes_ += bytes.size();
  entries_.push_back(Entry{std::move(name), dtype, std::move(shape), std::move(bytes), {}});
}

void SafetensorsWriter::add_view(std::string name, quant::ScalarType dtype, std::vector<int64_t> shape,
                                 ByteSpan bytes) {
  data_bytes_ += bytes.size;
  entries_.push_back(Entry{std::move(name), dtype, std::move(shape), {}, bytes});
}

void SafetensorsWriter::add_u8(std::string name, uint8_t v) { add(std::move(name), quant::ScalarType::kU8, {}, {v}); }

void SafetensorsWriter::add_u32(std::string name, uint32_t v) {
  add(std::move(name), quant::ScalarType::kU32, {}, little_endian(v, 4));
}

void SafetensorsWriter::add_f32(std::string name, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  add(std::move(name), quant::ScalarType::kF32, {}, little_endian(bits, 4));
}

void SafetensorsWriter::add_u32_vector(std::string name, const std::vector<int64_t>& values) {
  std::vector<uint8_t> bytes;
  for (int64_t v : values) {
    const std::vector<uint8_t> le = little_endian(static_cast<uint32_t>(v), 4);
    bytes.insert(bytes.end(), le.begin(), le.end());
  }
  add(std::move(name), quant::ScalarType::kU32, {static_cast<int64_t>(values.size())}, std::move(bytes));
}

bool SafetensorsWriter::contains(const std::string& name) const {
  for (const Entry& e : entries_)
    if (e.name == name) return true;
  return false;
}

Status SafetensorsWriter::write(const std::string& path, const std::function<void(uint64_t)>& on_bytes) const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json md = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) md[k] = v;
    header["__metadata__"] = std::move(md);
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const Entry& e : entries_) {
    if (!names.insert(e.name).second) return internal_error(path + ": entry '" + e.name + "' added twice");
    uint64_t elements = 1;
    for (int64_t d : e.shape) elements *= static_cast<uint64_t>(d);
    const uint64_t size = e.bytes().size;
    if (elements * static_cast<uint64_t>(quant::scalar_type_bytes(e.dtype)) != size)
      return internal_error(path + ": entry '" + e.name + "' has " + std::to_string(size) + " bytes for " +
                            std::to_string(elements) + " elements of " + std::string(quant::scalar_type_name(e.dtype)));
    header[e.name] = {{"dtype", std::string(quant::scalar_type_name(e.dtype))},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error("cannot create " + path);
  const std::vector<uint8_t> length = little_endian(text.size(), 8);
  out.write(reinterpret_cast<const char*>(length.data()), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const Entry& e : entries_) {
    const ByteSpan b = e.bytes();
    if (b.size > 0) out.write(reinterpret_cast<const char*>(b.data), static_cast<std::streamsize>(b.size));
    if (on_bytes) on_bytes(b.size);
  }
  out.flush();
  if (!out) return io_error("writing " + path + " failed (disk full?)");
  return ok_status();
}

}  // namespace qrt::convert
