// GGUF key/value metadata: every value type of the format (spec/ggml.md §1.1), nested arrays included, with
// typed getters for the architecture and tokenizer code:
//
//   QRT_ASSIGN_OR_RETURN(uint32_t layers, md.get_u32("llama.block_count"));
//   QRT_ASSIGN_OR_RETURN(const auto* tokens, md.get_string_array("tokenizer.ggml.tokens"));
//
// Exact getters (get_u32, get_string_array, ...) demand the stored type, as llama.cpp's loader does; the
// lenient ones (get_int, get_uint, get_float, get_int_array) accept any integer / float type and check range.
// Every error names the file, the key, the expected and the found type.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "qrt/status.hpp"

namespace qrt {

// GGUF value type ids as stored (i32).
enum class GgufType : int32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
constexpr int kGgufTypeCount = 13;

// "u8", "i32", "f32", "string", "array", ...
std::string_view gguf_type_name(GgufType t);

// An array: the element type and the elements, decoded. The variant's alternative index equals elem_type.
struct GgufArray {
  using Items = std::variant<std::vector<uint8_t>, std::vector<int8_t>, std::vector<uint16_t>,
                             std::vector<int16_t>, std::vector<uint32_t>, std::vector<int32_t>,
                             std::vector<float>, std::vector<bool>, std::vector<std::string>,
                             std::vector<GgufArray>, std::vector<uint64_t>, std::vector<int64_t>,
                             std::vector<double>>;
  Items items;

  GgufType elem_type() const { return static_cast<GgufType>(items.index()); }
  size_t size() const;
  // The element vector when the elements are of type T, else nullptr.
  template <class T>
  const std::vector<T>* as() const {
    return std::get_if<std::vector<T>>(&items);
  }
};

// One value. The variant's alternative index equals its GgufType id.
struct GgufValue {
  using Data = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float, bool, std::string,
                            GgufArray, uint64_t, int64_t, double>;
  Data data;

  GgufType type() const { return static_cast<GgufType>(data.index()); }
  template <class T>
  const T* as() const {
    return std::get_if<T>(&data);
  }
  // "array[string; 32000]", "array[array[i32; 3]; 2]" or just the scalar type name: for messages.
  std::string type_description() const;
};

class GgufMetadata {
 public:
  GgufMetadata() = default;
  explicit GgufMetadata(std::string source) : source_(std::move(source)) {}

  // The file the metadata came from (for messages).
  const std::string& source() const { return source_; }
  size_t size() const { return entries_.size(); }
  // Every key in file order.
  const std::vector<std::pair<std::string, GgufValue>>& entries() const { return entries_; }

  const GgufValue* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  // The value, or not_found naming the key and the file.
  Result<const GgufValue*> get(std::string_view key) const;

  // Exact-type scalars.
  Result<uint8_t> get_u8(std::string_view key) const { return get_scalar<uint8_t>(key); }
  Result<int8_t> get_i8(std::string_view key) const { return get_scalar<int8_t>(key); }
  Result<uint16_t> get_u16(std::string_view key) const { return get_scalar<uint16_t>(key); }
  Result<int16_t> get_i16(std::string_view key) const { return get_scalar<int16_t>(key); }
  Result<uint32_t> get_u32(std::string_view key) const { return get_scalar<uint32_t>(key); }
  Result<int32_t> get_i32(std::string_view key) const { return get_scalar<int32_t>(key); }
  Result<uint64_t> get_u64(std::string_view key) const { return get_scalar<uint64_t>(key); }
  Result<int64_t> get_i64(std::string_view key) const { return get_scalar<int64_t>(key); }
  Result<float> get_f32(std::string_view key) const { return get_scalar<float>(key); }
  Result<double> get_f64(std::string_view key) const { return get_scalar<double>(key); }
  Result<bool> get_bool(std::string_view key) const { return get_scalar<bool>(key); }
  Result<std::string> get_string(std::string_view key) const { return get_scalar<std::string>(key); }

  // Lenient scalars: any integer type (range-checked), any float type.
  Result<int64_t> get_int(std::string_view key) const;
  Result<uint64_t> get_uint(std::string_view key) const;  // negative values are an error
  Result<double> get_float(std::string_view key) const;   // f32 or f64

  // Optional keys: `fallback` when absent, an error when present with another type.
  template <class T>
  Result<T> get_or(std::string_view key, T fallback) const {
    if (!contains(key)) return fallback;
    return get_scalar<T>(key);
  }

  // Arrays. The pointers stay valid while this object lives.
  Result<const GgufArray*> get_array(std::string_view key) const;
  template <class T>
  Result<const std::vector<T>*> get_array_of(std::string_view key) const;
  Result<const std::vector<std::string>*> get_string_array(std::string_view key) const {
    return get_array_of<std::string>(key);
  }
  Result<const std::vector<float>*> get_f32_array(std::string_view key) const { return get_array_of<float>(key); }
  Result<const std::vector<int32_t>*> get_i32_array(std::string_view key) const {
    return get_array_of<int32_t>(key);
  }
  Result<const std::vector<uint32_t>*> get_u32_array(std::string_view key) const {
    return get_array_of<uint32_t>(key);
  }
  // Any integer element type, widened (range-checked for u64).
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;

  // Adds a key; a duplicate or empty key is a format error naming it.
  Status add(std::string key, GgufValue value);

 private:
  template <class T>
  Result<T> get_scalar(std::string_view key) const;
  Status type_error(std::string_view key, const GgufValue& v, std::string_view expected) const;

  std::string source_;
  std::vector<std::pair<std::string, GgufValue>> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

namespace detail {
template <class T, class... Ts>
constexpr int alternative_index(const std::variant<Ts...>*) {
  constexpr bool same[] = {std::is_same_v<T, Ts>...};
  for (int i = 0; i < static_cast<int>(sizeof...(Ts)); ++i)
    if (same[i]) return i;
  return -1;
}
}  // namespace detail

// The GgufType of a C++ value type (uint32_t -> kU32, std::string -> kString, ...).
template <class T>
constexpr GgufType gguf_type_of() {
  constexpr int index = detail::alternative_index<T>(static_cast<const GgufValue::Data*>(nullptr));
  static_assert(index >= 0, "not a GGUF value type");
  return static_cast<GgufType>(index);
}

template <class T>
Result<T> GgufMetadata::get_scalar(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const GgufValue* v, get(key));
  if (const T* x = v->as<T>()) return *x;
  return type_error(key, *v, gguf_type_name(gguf_type_of<T>()));
}

template <class T>
Result<const std::vector<T>*> GgufMetadata::get_array_of(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const GgufArray* a, get_array(key));
  if (const std::vector<T>* items = a->as<T>()) return items;
  return type_error(key, *find(key), "array[" + std::string(gguf_type_name(gguf_type_of<T>())) + "]");
}

}  // namespace qrt
