#include "loader/gguf_metadata.hpp"

#include <cstdint>
#include <type_traits>

namespace qrt {

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "?";
}

size_t GgufArray::size() const {
  return std::visit([](const auto& v) { return v.size(); }, items);
}

namespace {

std::string describe_array(const GgufArray& a) {
  std::string inner;
  if (const auto* nested = a.as<GgufArray>(); nested && !nested->empty()) {
    inner = describe_array(nested->front());
  } else {
    inner = std::string(gguf_type_name(a.elem_type()));
  }
  return "array[" + inner + "; " + std::to_string(a.size()) + "]";
}

// Integer alternatives widened to a signed / unsigned 128-bit-free pair: (is_integer, negative, magnitude).
struct IntegerValue {
  bool is_integer = false;
  bool negative = false;
  uint64_t magnitude = 0;
};

template <class T>
IntegerValue integer_of(const T& x) {
  IntegerValue r;
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    r.is_integer = true;
    if constexpr (std::is_signed_v<T>) {
      r.negative = x < 0;
      // Magnitude of a negative value without overflowing on the minimum.
      r.magnitude = r.negative ? static_cast<uint64_t>(-(static_cast<int64_t>(x) + 1)) + 1 : static_cast<uint64_t>(x);
    } else {
      r.magnitude = static_cast<uint64_t>(x);
    }
  }
  return r;
}

}  // namespace

std::string GgufValue::type_description() const {
  if (const GgufArray* a = as<GgufArray>()) return describe_array(*a);
  return std::string(gguf_type_name(type()));
}

const GgufValue* GgufMetadata::find(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &entries_[it->second].second;
}

Result<const GgufValue*> GgufMetadata::get(std::string_view key) const {
  if (const GgufValue* v = find(key)) return v;
  return not_found("gguf '" + source_ + "': key '" + std::string(key) + "' not found");
}

Status GgufMetadata::type_error(std::string_view key, const GgufValue& v, std::string_view expected) const {
  return format_error("gguf '" + source_ + "': key '" + std::string(key) + "' has type " + v.type_description() +
                      ", expected " + std::string(expected));
}

Result<int64_t> GgufMetadata::get_int(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const GgufValue* v, get(key));
  const IntegerValue i = std::visit([](const auto& x) { return integer_of(x); }, v->data);
  if (!i.is_integer) return type_error(key, *v, "an integer");
  if (!i.negative && i.magnitude > static_cast<uint64_t>(INT64_MAX))
    return format_error("gguf '" + source_ + "': key '" + std::string(key) + "' = " + std::to_string(i.magnitude) +
                        " does not fit in i64");
  return i.negative ? -static_cast<int64_t>(i.magnitude - 1) - 1 : static_cast<int64_t>(i.magnitude);
}

Result<uint64_t> GgufMetadata::get_uint(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const GgufValue* v, get(key));
  const IntegerValue i = std::visit([](const auto& x) { return integer_of(x); }, v->data);
  if (!i.is_integer) return type_error(key, *v, "a non-negative integer");
  if (i.negative)
    return format_error("gguf '" + source_ + "': key '" + std::string(key) + "' = -" +
                        std::to_string(i.magnitude) + " is negative, expected a non-negative integer");
  return i.magnitude;
}

Result<double> GgufMetadata::get_float(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const GgufValue* v, get(key));
  if (const float* f = v->as<float>()) return static_cast<double>(*f);
  if (const double* d = v->as<double>()) return *d;
  return type_error(key, *v, "f32 or f64");
}

Result<const GgufArray*> GgufMetadata::get_array(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const GgufValue* v, get(key));
  if (const GgufArray* a = v->as<GgufArray>()) return a;
  return type_error(key, *v, "an array");
}

Result<std::vector<int64_t>> GgufMetadata::get_int_array(std::string_view key) const {
  QRT_ASSIGN_OR_RETURN(const GgufArray* a, get_array(key));
  std::vector<int64_t> out;
  Status status;
  std::visit(
      [&](const auto& items) {
        using Elem = typename std::decay_t<decltype(items)>::value_type;
        if constexpr (std::is_integral_v<Elem> && !std::is_same_v<Elem, bool>) {
          out.reserve(items.size());
          for (size_t i = 0; i < items.size(); ++i) {
            if constexpr (std::is_same_v<Elem, uint64_t>) {
              if (items[i] > static_cast<uint64_t>(INT64_MAX)) {
                status = format_error("gguf '" + source_ + "': key '" + std::string(key) + "' element " +
                                      std::to_string(i) + " = " + std::to_string(items[i]) +
                                      " does not fit in i64");
                return;
              }
            }
            out.push_back(static_cast<int64_t>(items[i]));
          }
        } else {
          status = type_error(key, *find(key), "an array of integers");
        }
      },
      a->items);
  if (!status.ok()) return status;
  return out;
}

Status GgufMetadata::add(std::string key, GgufValue value) {
  if (key.empty()) return format_error("gguf '" + source_ + "': empty key");
  if (index_.count(key) != 0) return format_error("gguf '" + source_ + "': duplicate key '" + key + "'");
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
  return ok_status();
}

}  // namespace qrt
