#include "tools/convert/gguf_writer.hpp"

#include <cstring>
#include <fstream>
#include <set>

#include "kernels/quant/formats.hpp"

namespace qrt::convert {
namespace {

// GGUF metadata value types (spec/ggml.md §1.2).
enum GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

template <class T>
void put(std::vector<uint8_t>& out, T v) {
  uint8_t bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // the hosts qrt builds on are little-endian, as GGUF is
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

template <class T>
std::vector<uint8_t> scalar(GgufType type, T v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, type);
  put<T>(out, v);
  return out;
}

template <class T>
std::vector<uint8_t> array(GgufType elem, const std::vector<T>& v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, kArray);
  put<uint32_t>(out, elem);
  put<uint64_t>(out, v.size());
  for (const T& x : v) put<T>(out, x);
  return out;
}

}  // namespace

void GgufWriter::set(const std::string& key, std::vector<uint8_t> value) {
  for (Kv& kv : kvs_)
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  kvs_.push_back({key, std::move(value)});
}

void GgufWriter::set_u8(const std::string& k, uint8_t v) { set(k, scalar(kU8, v)); }
void GgufWriter::set_i8(const std::string& k, int8_t v) { set(k, scalar(kI8, v)); }
void GgufWriter::set_u16(const std::string& k, uint16_t v) { set(k, scalar(kU16, v)); }
void GgufWriter::set_i16(const std::string& k, int16_t v) { set(k, scalar(kI16, v)); }
void GgufWriter::set_u32(const std::string& k, uint32_t v) { set(k, scalar(kU32, v)); }
void GgufWriter::set_i32(const std::string& k, int32_t v) { set(k, scalar(kI32, v)); }
void GgufWriter::set_u64(const std::string& k, uint64_t v) { set(k, scalar(kU64, v)); }
void GgufWriter::set_i64(const std::string& k, int64_t v) { set(k, scalar(kI64, v)); }
void GgufWriter::set_f32(const std::string& k, float v) { set(k, scalar(kF32, v)); }
void GgufWriter::set_f64(const std::string& k, double v) { set(k, scalar(kF64, v)); }
void GgufWriter::set_bool(const std::string& k, bool v) { set(k, scalar(kBool, static_cast<uint8_t>(v ? 1 : 0))); }
void GgufWriter::set_i32s(const std::string& k, const std::vector<int32_t>& v) { set(k, array(kI32, v)); }
void GgufWriter::set_f32s(const std::string& k, const std::vector<float>& v) { set(k, array(kF32, v)); }

void GgufWriter::set_string(const std::string& k, const std::string& v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, kString);
  put_string(out, v);
  set(k, std::move(out));
}

void GgufWriter::set_strings(const std::string& k, const std::vector<std::string>& v) {
  std::vector<uint8_t> out;
  put<uint32_t>(out, kArray);
  put<uint32_t>(out, kString);
  put<uint64_t>(out, v.size());
  for (const std::string& s : v) put_string(out, s);
  set(k, std::move(out));
}

void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  set_u32("general.alignment", alignment);
}

void GgufWriter::add_tensor(const std::string& name, int ggml_type, const std::vector<int64_t>& shape, ByteSpan data) {
  tensors_.push_back({name, ggml_type, shape, data});
}

Status GgufWriter::write(const std::string& path) const {
  if (alignment_ < 8 || (alignment_ & (alignment_ - 1)) != 0)
    return invalid_argument(path + ": GGUF alignment " + std::to_string(alignment_) + " is not a power of two >= 8");
  std::vector<uint8_t> head = {'G', 'G', 'U', 'F'};
  put<uint32_t>(head, 3);
  put<uint64_t>(head, tensors_.size());
  put<uint64_t>(head, kvs_.size());
  for (const Kv& kv : kvs_) {
    put_string(head, kv.key);
    head.insert(head.end(), kv.value.begin(), kv.value.end());
  }
  std::set<std::string> names;
  std::vector<uint64_t> offsets;
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    if (t.name.empty() || t.name.size() > 63 || !names.insert(t.name).second)
      return invalid_argument(path + ": tensor name '" + t.name + "' is empty, longer than 63 bytes or repeated");
    const auto format = quant::format_from_ggml_type(t.ggml_type);
    if (!format)
      return invalid_argument(path + ": tensor " + t.name + " has GGML type " + std::to_string(t.ggml_type) +
                              ", which qrt does not know");
    const quant::FormatInfo info = quant::format_info(*format);
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= static_cast<uint64_t>(d);
    const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
    if (info.block_elems <= 0 || cols % info.block_elems != 0 ||
        elements / static_cast<uint64_t>(info.block_elems) * static_cast<uint64_t>(info.block_bytes) != t.data.size)
      return invalid_argument(path + ": tensor " + t.name + " has " + std::to_string(t.data.size) +
                              " bytes, which is not its shape in " + std::string(info.name));
    put_string(head, t.name);
    put<uint32_t>(head, static_cast<uint32_t>(t.shape.size()));
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put<uint64_t>(head, static_cast<uint64_t>(*it));
    put<uint32_t>(head, static_cast<uint32_t>(t.ggml_type));
    put<uint64_t>(head, offset);
    offsets.push_back(offset);
    offset = (offset + t.data.size + alignment_ - 1) / alignment_ * alignment_;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return io_error("cannot create " + path);
  const std::vector<char> zeros(alignment_, 0);
  out.write(reinterpret_cast<const char*>(head.data()), static_cast<std::streamsize>(head.size()));
  out.write(zeros.data(), static_cast<std::streamsize>((alignment_ - head.size() % alignment_) % alignment_));
  uint64_t at = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    out.write(zeros.data(), static_cast<std::streamsize>(offsets[i] - at));
    out.write(reinterpret_cast<const char*>(tensors_[i].data.data),
              static_cast<std::streamsize>(tensors_[i].data.size));
    at = offsets[i] + tensors_[i].data.size;
  }
  out.flush();
  if (!out) return io_error("writing " + path + " failed (disk full?)");
  return ok_status();
}

}  // namespace qrt::convert
