// Element types of the plain arrays in model files (safetensors dtypes, GGUF scalar types, scale dtypes).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace qrt::quant {

// X(name, safetensors dtype string, bytes per element)
#define QRT_SCALAR_TYPE_LIST(X) \
  X(F64, "F64", 8)              \
  X(F32, "F32", 4)              \
  X(F16, "F16", 2)              \
  X(BF16, "BF16", 2)            \
  X(F8_E4M3, "F8_E4M3", 1)      \
  X(F8_E5M2, "F8_E5M2", 1)      \
  X(E8M0, "F8_E8M0", 1)         \
  X(I64, "I64", 8)              \
  X(I32, "I32", 4)              \
  X(I16, "I16", 2)              \
  X(I8, "I8", 1)                \
  X(U64, "U64", 8)              \
  X(U32, "U32", 4)              \
  X(U16, "U16", 2)              \
  X(U8, "U8", 1)                \
  X(BOOL, "BOOL", 1)

enum class ScalarType : uint8_t {
#define QRT_X(name, str, bytes) k##name,
  QRT_SCALAR_TYPE_LIST(QRT_X)
#undef QRT_X
};

constexpr int scalar_type_bytes(ScalarType t) {
  switch (t) {
#define QRT_X(name, str, bytes) \
  case ScalarType::k##name:     \
    return bytes;
    QRT_SCALAR_TYPE_LIST(QRT_X)
#undef QRT_X
  }
  return 0;
}

constexpr std::string_view scalar_type_name(ScalarType t) {
  switch (t) {
#define QRT_X(name, str, bytes) \
  case ScalarType::k##name:     \
    return str;
    QRT_SCALAR_TYPE_LIST(QRT_X)
#undef QRT_X
  }
  return "?";
}

// Parses a safetensors dtype string ("BF16", "F8_E4M3", ...).
inline std::optional<ScalarType> scalar_type_from_name(std::string_view s) {
#define QRT_X(name, str, bytes) \
  if (s == str) return ScalarType::k##name;
  QRT_SCALAR_TYPE_LIST(QRT_X)
#undef QRT_X
  return std::nullopt;
}

}  // namespace qrt::quant
