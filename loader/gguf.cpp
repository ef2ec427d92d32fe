// GGUF single-file parsing: a bounds-checked cursor over the bytes, then the tensor table.
#include "loader/gguf.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <unordered_map>

#include "kernels/quant/formats.hpp"
#include "loader/ggml_types.hpp"

namespace qrt {
namespace {

static_assert(std::endian::native == std::endian::little, "the GGUF reader copies little-endian fields as-is");

std::string hex_u32(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s += digits[(v >> shift) & 0xF];
  return s;
}

// Reads fixed-size fields and length-prefixed strings, never past the end. Messages say what was being read
// and where; the caller adds the file and the key or tensor.
class Cursor {
 public:
  explicit Cursor(ByteSpan bytes) : data_(bytes.data), size_(bytes.size) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  template <class T>
  Status read(T* out, const char* what) {
    if (remaining() < sizeof(T)) return truncated(sizeof(T), what);
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return ok_status();
  }

  // `n` bytes in place; callers check `n` against remaining() first.
  const uint8_t* take(uint64_t n) {
    const uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }

  Status read_string(std::string* out, uint64_t max_bytes, const char* what) {
    uint64_t len = 0;
    QRT_TRY(read(&len, what));
    if (len > max_bytes)
      return format_error(std::string(what) + " at byte " + std::to_string(pos_ - 8) + " claims " +
                          std::to_string(len) + " bytes, more than the limit of " + std::to_string(max_bytes));
    if (len > remaining())
      return format_error(std::string(what) + " at byte " + std::to_string(pos_ - 8) + " claims " +
                          std::to_string(len) + " bytes but only " + std::to_string(remaining()) + " remain");
    out->assign(reinterpret_cast<const char*>(take(len)), len);
    return ok_status();
  }

  Status truncated(uint64_t need, const char* what) const {
    return format_error("truncated at byte " + std::to_string(pos_) + " while reading " + what + ": need " +
                        std::to_string(need) + " bytes, " + std::to_string(remaining()) + " remain");
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

// The fewest bytes one element of this type occupies in a file (strings: the length field; arrays: type + count).
uint64_t min_encoded_bytes(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: case GgufType::kString: return 8;
    case GgufType::kArray: return 12;
  }
  return 1;
}

Status read_type(Cursor& c, GgufType* out, const char* what) {
  int32_t raw = 0;
  QRT_TRY(c.read(&raw, what));
  if (raw < 0 || raw >= kGgufTypeCount)
    return format_error(std::string(what) + " " + std::to_string(raw) + " at byte " + std::to_string(c.pos() - 4) +
                        " is not a GGUF value type (0..12)");
  *out = static_cast<GgufType>(raw);
  return ok_status();
}

Status read_array(Cursor& c, int depth, GgufArray* out);

template <class T>
Status read_scalar_value(Cursor& c, GgufValue* out, const char* what) {
  T x{};
  QRT_TRY(c.read(&x, what));
  out->data.template emplace<T>(x);
  return ok_status();
}

Status read_value(Cursor& c, GgufType type, GgufValue* out) {
  switch (type) {
    case GgufType::kU8: return read_scalar_value<uint8_t>(c, out, "u8 value");
    case GgufType::kI8: return read_scalar_value<int8_t>(c, out, "i8 value");
    case GgufType::kU16: return read_scalar_value<uint16_t>(c, out, "u16 value");
    case GgufType::kI16: return read_scalar_value<int16_t>(c, out, "i16 value");
    case GgufType::kU32: return read_scalar_value<uint32_t>(c, out, "u32 value");
    case GgufType::kI32: return read_scalar_value<int32_t>(c, out, "i32 value");
    case GgufType::kF32: return read_scalar_value<float>(c, out, "f32 value");
    case GgufType::kU64: return read_scalar_value<uint64_t>(c, out, "u64 value");
    case GgufType::kI64: return read_scalar_value<int64_t>(c, out, "i64 value");
    case GgufType::kF64: return read_scalar_value<double>(c, out, "f64 value");
    case GgufType::kBool: {
      uint8_t b = 0;
      QRT_TRY(c.read(&b, "bool value"));
      out->data.emplace<bool>(b != 0);
      return ok_status();
    }
    case GgufType::kString: {
      std::string s;
      QRT_TRY(c.read_string(&s, kGgufMaxStringBytes, "string value"));
      out->data.emplace<std::string>(std::move(s));
      return ok_status();
    }
    case GgufType::kArray: {
      GgufArray a;
      QRT_TRY(read_array(c, 1, &a));
      out->data.emplace<GgufArray>(std::move(a));
      return ok_status();
    }
  }
  return internal_error("unhandled GGUF value type");
}

template <class T>
void copy_elements(Cursor& c, uint64_t count, GgufArray* out) {
  std::vector<T> v(static_cast<size_t>(count));
  if (count != 0) std::memcpy(v.data(), c.take(count * sizeof(T)), count * sizeof(T));
  out->items.emplace<std::vector<T>>(std::move(v));
}

Status read_array(Cursor& c, int depth, GgufArray* out) {
  if (depth > kGgufMaxArrayDepth)
    return format_error("arrays nested deeper than " + std::to_string(kGgufMaxArrayDepth) + " levels at byte " +
                        std::to_string(c.pos()));
  GgufType elem = GgufType::kU8;
  QRT_TRY(read_type(c, &elem, "array element type"));
  uint64_t count = 0;
  QRT_TRY(c.read(&count, "array length"));
  if (count > kGgufMaxArrayElements)
    return format_error("array of " + std::string(gguf_type_name(elem)) + " at byte " + std::to_string(c.pos() - 12) +
                        " claims " + std::to_string(count) + " elements, more than the limit of " +
                        std::to_string(kGgufMaxArrayElements));
  const uint64_t min_bytes = min_encoded_bytes(elem);
  if (count > c.remaining() / min_bytes)
    return format_error("array of " + std::to_string(count) + " " + std::string(gguf_type_name(elem)) +
                        " elements at byte " + std::to_string(c.pos() - 12) + " needs at least " +
                        std::to_string(count) + " x " + std::to_string(min_bytes) + " bytes but only " +
                        std::to_string(c.remaining()) + " remain");
  switch (elem) {
    case GgufType::kU8: copy_elements<uint8_t>(c, count, out); break;
    case GgufType::kI8: copy_elements<int8_t>(c, count, out); break;
    case GgufType::kU16: copy_elements<uint16_t>(c, count, out); break;
    case GgufType::kI16: copy_elements<int16_t>(c, count, out); break;
    case GgufType::kU32: copy_elements<uint32_t>(c, count, out); break;
    case GgufType::kI32: copy_elements<int32_t>(c, count, out); break;
    case GgufType::kF32: copy_elements<float>(c, count, out); break;
    case GgufType::kU64: copy_elements<uint64_t>(c, count, out); break;
    case GgufType::kI64: copy_elements<int64_t>(c, count, out); break;
    case GgufType::kF64: copy_elements<double>(c, count, out); break;
    case GgufType::kBool: {
      std::vector<bool> v(static_cast<size_t>(count));
      const uint8_t* p = c.take(count);
      for (uint64_t i = 0; i < count; ++i) v[i] = p[i] != 0;
      out->items.emplace<std::vector<bool>>(std::move(v));
      break;
    }
    case GgufType::kString: {
      std::vector<std::string> v(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) {
        Status s = c.read_string(&v[i], kGgufMaxStringBytes, "array string");
        if (!s.ok()) return s.with_context("element " + std::to_string(i));
      }
      out->items.emplace<std::vector<std::string>>(std::move(v));
      break;
    }
    case GgufType::kArray: {
      std::vector<GgufArray> v(static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) {
        Status s = read_array(c, depth + 1, &v[i]);
        if (!s.ok()) return s.with_context("element " + std::to_string(i));
      }
      out->items.emplace<std::vector<GgufArray>>(std::move(v));
      break;
    }
  }
  return ok_status();
}

Status check_key(const std::string& key) {
  if (key.empty()) return format_error("empty key");
  for (unsigned char ch : key)
    if (ch < 0x20 || ch > 0x7E)
      return format_error("key '" + key + "' contains byte " + std::to_string(ch) + ", expected printable ASCII");
  return ok_status();
}

std::string printable_magic(const uint8_t* p) {
  std::string s;
  for (int i = 0; i < 4; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7F) {
      s += static_cast<char>(p[i]);
    } else {
      static const char* digits = "0123456789abcdef";
      s += "\\x";
      s += digits[p[i] >> 4];
      s += digits[p[i] & 0xF];
    }
  }
  return s;
}

Status read_header(Cursor& c, uint32_t* version, int64_t* n_tensors, int64_t* n_kv, uint64_t file_size) {
  if (file_size < 4)
    return format_error("not a GGUF file: " + std::to_string(file_size) + " bytes is too short for the magic");
  const uint8_t* magic = c.take(4);
  if (std::memcmp(magic, "GGUF", 4) != 0)
    return format_error("not a GGUF file: magic is '" + printable_magic(magic) + "', expected 'GGUF'");
  QRT_TRY(c.read(version, "version"));
  if (*version == 0) return format_error("GGUF version 0 is not a valid version");
  if ((*version & 0xFFFF) == 0)
    return unsupported("version field reads " + hex_u32(*version) +
                       ": this is a big-endian (byte-swapped) GGUF; qrt reads little-endian GGUF only "
                       "(convert it with gguf-py's gguf-convert-endian)");
  if (*version == 1) return unsupported("GGUF v1 is no longer supported (re-convert the model to v3)");
  if (*version > 3)
    return unsupported("GGUF version " + std::to_string(*version) + " is newer than the versions qrt reads (2, 3)");
  QRT_TRY(c.read(n_tensors, "tensor count"));
  QRT_TRY(c.read(n_kv, "metadata key count"));
  if (*n_tensors < 0) return format_error("tensor count " + std::to_string(*n_tensors) + " is negative");
  if (*n_kv < 0) return format_error("metadata key count " + std::to_string(*n_kv) + " is negative");
  // Cheapest possible key/value: 8-byte length + 1-byte key + 4-byte type + 1-byte value. Cheapest tensor info:
  // 8-byte length + 1-byte name + n_dims + type + offset.
  constexpr uint64_t kMinKvBytes = 14;
  constexpr uint64_t kMinTensorInfoBytes = 25;
  if (static_cast<uint64_t>(*n_kv) > c.remaining() / kMinKvBytes)
    return format_error("metadata key count " + std::to_string(*n_kv) + " cannot fit in the " +
                        std::to_string(c.remaining()) + " bytes after the header");
  if (static_cast<uint64_t>(*n_tensors) > c.remaining() / kMinTensorInfoBytes)
    return format_error("tensor count " + std::to_string(*n_tensors) + " cannot fit in the " +
                        std::to_string(c.remaining()) + " bytes after the header");
  return ok_status();
}

Status read_metadata(Cursor& c, int64_t n_kv, GgufMetadata* md) {
  for (int64_t i = 0; i < n_kv; ++i) {
    const std::string where = "metadata key #" + std::to_string(i);
    std::string key;
    Status s = c.read_string(&key, kGgufMaxKeyBytes, "key");
    if (!s.ok()) return s.with_context(where);
    s = check_key(key);
    if (!s.ok()) return s.with_context(where);
    if (md->contains(key)) return format_error(where + ": duplicate key '" + key + "'");
    GgufType type = GgufType::kU8;
    s = read_type(c, &type, "value type");
    if (s.ok()) {
      GgufValue value;
      s = read_value(c, type, &value);
      if (s.ok()) s = md->add(std::move(key), std::move(value));
    }
    if (!s.ok()) return s.with_context(where + " '" + key + "'");
  }
  return ok_status();
}

Status read_alignment(const GgufMetadata& md, uint64_t* alignment) {
  *alignment = kGgufDefaultAlignment;
  const GgufValue* v = md.find("general.alignment");
  if (v == nullptr) return ok_status();
  const uint32_t* a = v->as<uint32_t>();
  if (a == nullptr)
    return format_error("key 'general.alignment' has type " + v->type_description() + ", expected u32");
  if (*a < 8 || !std::has_single_bit(*a))
    return format_error("general.alignment = " + std::to_string(*a) + ", expected a power of two >= 8");
  *alignment = *a;
  return ok_status();
}

Status read_tensor_info(Cursor& c, GgufTensorInfo* t) {
  QRT_TRY(c.read_string(&t->name, kGgufMaxStringBytes, "tensor name"));
  if (t->name.empty()) return format_error("empty tensor name");
  if (t->name.size() > kGgufMaxTensorNameBytes)
    return format_error("tensor name '" + t->name.substr(0, 80) + "' is " + std::to_string(t->name.size()) +
                        " bytes, more than GGML's limit of " + std::to_string(kGgufMaxTensorNameBytes));
  uint32_t n_dims = 0;
  QRT_TRY(c.read(&n_dims, "n_dims"));
  if (n_dims > static_cast<uint32_t>(kGgufMaxDims))
    return format_error("n_dims = " + std::to_string(n_dims) + ", at most " + std::to_string(kGgufMaxDims) +
                        " allowed");
  t->ne.resize(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    QRT_TRY(c.read(&t->ne[d], "ne"));
    if (t->ne[d] < 0) return format_error("ne[" + std::to_string(d) + "] = " + std::to_string(t->ne[d]) + " is negative");
  }
  QRT_TRY(c.read(&t->ggml_type, "ggml type"));
  QRT_TRY(c.read(&t->offset, "data offset"));
  return ok_status();
}

std::string describe_ggml_type(int32_t id) {
  if (const GgmlTypeInfo* info = ggml_type_info(id)) return std::string(info->name) + " (" + std::to_string(id) + ")";
  return std::to_string(id);
}

// Sizes and places one tensor: a live GGML type, whole blocks per row, no overflow, aligned, inside the file.
Status check_tensor_layout(GgufTensorInfo* t, uint64_t alignment, uint64_t data_offset, uint64_t file_size) {
  const GgmlTypeInfo* info = ggml_type_info(t->ggml_type);
  if (info == nullptr)
    return format_error("unknown GGML type " + std::to_string(t->ggml_type) + " (known ids are 0.." +
                        std::to_string(kGgmlTypeCount - 1) + ")");
  if (info->block_elems == 0)
    return format_error("GGML type " + describe_ggml_type(t->ggml_type) +
                        " was removed from GGML and is not valid in a GGUF file (re-convert the model)");
  const int64_t ne0 = t->ne.empty() ? 1 : t->ne[0];
  if (ne0 % info->block_elems != 0)
    return format_error("row length ne[0] = " + std::to_string(ne0) + " is not a multiple of the " +
                        std::string(info->name) + " block size " + std::to_string(info->block_elems));
  uint64_t numel = 1;
  for (int64_t d : t->ne)
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) || numel > static_cast<uint64_t>(INT64_MAX))
      return format_error("element count of shape ne = " + [&] {
        std::string s;
        for (int64_t x : t->ne) s += (s.empty() ? "" : ", ") + std::to_string(x);
        return "[" + s + "]";
      }() + " overflows 63 bits");
  // numel fits 63 bits and bytes per element are at most 9/8 (blocks) or 8 (dense): the product fits 64 bits
  // only after dividing by the block size first.
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(numel / static_cast<uint64_t>(info->block_elems), static_cast<uint64_t>(info->type_size),
                             &nbytes))
    return format_error("byte size overflows 64 bits");
  t->nbytes = nbytes;
  if (t->offset % alignment != 0)
    return format_error("data offset " + std::to_string(t->offset) + " is not a multiple of the alignment " +
                        std::to_string(alignment));
  if (data_offset > file_size || t->offset > file_size - data_offset ||
      nbytes > file_size - data_offset - t->offset)
    return format_error("data [" + std::to_string(t->offset) + ", +" + std::to_string(nbytes) +
                        ") relative to the data section at byte " + std::to_string(data_offset) +
                        " reaches past the end of the file (" + std::to_string(file_size) + " bytes)");
  t->file_offset = data_offset + t->offset;
  return ok_status();
}

// The qrt format for every GGML type id, looked up once per file instead of once per tensor.
std::array<std::optional<quant::FormatId>, kGgmlTypeCount> formats_by_ggml_type() {
  std::array<std::optional<quant::FormatId>, kGgmlTypeCount> table{};
  for (int id = 0; id < kGgmlTypeCount; ++id) table[id] = quant::format_from_ggml_type(id);
  return table;
}

Status make_quant_tensor(const GgufTensorInfo& t, ByteSpan bytes, const std::string& path, QuantTensor* out) {
  out->name = t.name;
  out->format = *t.format;
  out->shape.assign(t.ne.rbegin(), t.ne.rend());  // GGUF ne is innermost first; QuantTensor is outermost first
  out->data = ByteSpan{bytes.data + t.file_offset, t.nbytes};
  out->file = path;
  if (out->numel() == 0) return ok_status();  // zero-element tensors are legal in GGUF; nothing to size
  const int64_t rows = out->rows();
  const int64_t cols = out->cols();
  return quant::dispatch_format(t.format.value(), [&](auto tag) -> Status {
    using Traits = typename decltype(tag)::Traits;
    QRT_TRY(Traits::check_params(rows, cols, out->params));
    const quant::PartSizes sizes = Traits::part_sizes(rows, cols, out->params);
    if (sizes.data != t.nbytes || sizes.scales != 0 || sizes.biases != 0)
      return internal_error("format " + std::string(quant::format_name(out->format)) + " sizes [" +
                            std::to_string(rows) + ", " + std::to_string(cols) + "] at " +
                            std::to_string(sizes.data) + " bytes, the GGML type table at " +
                            std::to_string(t.nbytes));
    return ok_status();
  });
}

Status parse_into(ByteSpan bytes, const std::string& path, const GgufReadOptions& options, GgufFile* f) {
  Cursor c(bytes);
  int64_t n_tensors = 0;
  int64_t n_kv = 0;
  QRT_TRY(read_header(c, &f->version, &n_tensors, &n_kv, bytes.size));
  QRT_TRY(read_metadata(c, n_kv, &f->metadata));
  QRT_TRY(read_alignment(f->metadata, &f->alignment));

  f->tensor_infos.resize(static_cast<size_t>(n_tensors));
  std::unordered_map<std::string_view, size_t> seen;
  seen.reserve(static_cast<size_t>(n_tensors));
  for (int64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo& t = f->tensor_infos[static_cast<size_t>(i)];
    Status s = read_tensor_info(c, &t);
    if (!s.ok())
      return s.with_context("tensor info #" + std::to_string(i) + (t.name.empty() ? "" : " '" + t.name + "'"));
    // The vector never reallocates after the resize above, so views of the names stay valid.
    auto [it, inserted] = seen.emplace(t.name, static_cast<size_t>(i));
    if (!inserted)
      return format_error("tensor info #" + std::to_string(i) + ": duplicate tensor name '" + t.name +
                          "' (first at #" + std::to_string(it->second) + ")");
  }
  // Align up without overflow: pos <= file size < 2^64 - alignment.
  f->data_offset = (c.pos() + f->alignment - 1) / f->alignment * f->alignment;

  const auto formats = formats_by_ggml_type();
  for (GgufTensorInfo& t : f->tensor_infos) {
    Status s = check_tensor_layout(&t, f->alignment, f->data_offset, bytes.size);
    if (!s.ok()) return s.with_context("tensor '" + t.name + "' of type " + describe_ggml_type(t.ggml_type));
    t.format = formats[static_cast<size_t>(t.ggml_type)];
  }

  // Byte ranges must be disjoint (zero-byte tensors occupy nothing).
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(f->tensor_infos.size());
  for (const GgufTensorInfo& t : f->tensor_infos)
    if (t.nbytes > 0) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const GgufTensorInfo* prev = by_offset[i - 1];
    const GgufTensorInfo* cur = by_offset[i];
    if (cur->offset < prev->offset + prev->nbytes)
      return format_error("tensor '" + cur->name + "' data [" + std::to_string(cur->offset) + ", " +
                          std::to_string(cur->offset + cur->nbytes) + ") overlaps tensor '" + prev->name +
                          "' data [" + std::to_string(prev->offset) + ", " +
                          std::to_string(prev->offset + prev->nbytes) + ")");
  }

  for (const GgufTensorInfo& t : f->tensor_infos) {
    if (!t.format) {
      if (options.allow_unsupported_types) continue;
      return unsupported("unsupported tensor type " + describe_ggml_type(t.ggml_type) + " for tensor '" + t.name +
                         "': qrt has no format for this GGML type");
    }
    QuantTensor qt;
    Status s = make_quant_tensor(t, bytes, path, &qt);
    if (!s.ok()) return s.with_context("tensor '" + t.name + "'");
    f->tensors.emplace(t.name, std::move(qt));
  }
  return ok_status();
}

}  // namespace

Result<GgufFile> parse_gguf(ByteSpan bytes, const std::string& path, const GgufReadOptions& options) {
  GgufFile f;
  f.path = path;
  f.metadata = GgufMetadata(path);
  Status s = parse_into(bytes, path, options, &f);
  if (!s.ok()) return s.with_context("gguf '" + path + "'");
  return f;
}

Result<GgufFile> read_gguf_file(const std::string& path, const GgufReadOptions& options) {
  QRT_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> mapping, MappedFile::open_shared(path));
  QRT_ASSIGN_OR_RETURN(GgufFile f, parse_gguf(mapping->bytes(), path, options));
  f.mapping = std::move(mapping);
  return f;
}

}  // namespace qrt
