// The element type of a KV cache: shared by the public API (ModelOptions), the backends and the attention kernels.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace qrt {

// K and V rows are stored rounded to this type (round to nearest even) and read back as float; positions stay int32.
// f16 halves the cache and the bytes attention reads per key; bf16 keeps float's range (values past 65504 do not
// become infinite) with 8 bits of mantissa instead of 11. fp8 is E4M3 (OCP "FN": no infinities) with no scale, as
// vLLM's fp8 cache without calibration: a quarter of f32, 3 bits of mantissa, magnitudes saturated at 448 and
// flushed below 2^-9 — keys and values of trained models lie well inside that range.
enum class KvType : uint8_t { kF32, kF16, kBF16, kFp8 };

constexpr int kv_type_bytes(KvType t) { return t == KvType::kF32 ? 4 : (t == KvType::kFp8 ? 1 : 2); }

constexpr std::string_view kv_type_name(KvType t) {
  switch (t) {
    case KvType::kF32: return "f32";
    case KvType::kF16: return "f16";
    case KvType::kBF16: return "bf16";
    case KvType::kFp8: return "fp8";
  }
  return "?";
}

constexpr std::optional<KvType> kv_type_from_name(std::string_view name) {
  if (name == "f32") return KvType::kF32;
  if (name == "f16") return KvType::kF16;
  if (name == "bf16") return KvType::kBF16;
  if (name == "fp8") return KvType::kFp8;
  return std::nullopt;
}

}  // namespace qrt
