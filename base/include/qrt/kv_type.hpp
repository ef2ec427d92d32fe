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
// flushed below 2^-9 — keys and values of trained models lie well inside that range. q8_0 is GGML's Q8_0 block
// (as llama.cpp's `--cache-type-k q8_0`): each run of 32 elements of a row is one f16 scale d = amax / 127 and 32
// int8 codes round(x / d), 34 bytes for 32 elements, so a row's length must be a multiple of 32; it keeps 8 bits of
// relative precision per block whatever the magnitudes, where fp8 keeps 3 bits of mantissa but no common scale.
enum class KvType : uint8_t { kF32, kF16, kBF16, kFp8, kQ8_0 };

// Elements per Q8_0 block of a q8_0 cache row, and its bytes (f16 scale first, then the codes, as GGML stores it).
constexpr int64_t kKvQ8Block = 32;
constexpr int64_t kKvQ8BlockBytes = 34;

// Whether a cache row of `cols` elements can be stored in type t (q8_0 rows are whole blocks).
constexpr bool kv_row_fits(KvType t, int64_t cols) { return t != KvType::kQ8_0 || cols % kKvQ8Block == 0; }

// Bytes of one cache row of `cols` elements (cols a multiple of 32 for q8_0: kv_row_fits).
constexpr int64_t kv_row_bytes(KvType t, int64_t cols) {
  switch (t) {
    case KvType::kF32: return cols * 4;
    case KvType::kF16:
    case KvType::kBF16: return cols * 2;
    case KvType::kFp8: return cols;
    case KvType::kQ8_0: return cols / kKvQ8Block * kKvQ8BlockBytes;
  }
  return 0;
}

constexpr std::string_view kv_type_name(KvType t) {
  switch (t) {
    case KvType::kF32: return "f32";
    case KvType::kF16: return "f16";
    case KvType::kBF16: return "bf16";
    case KvType::kFp8: return "fp8";
    case KvType::kQ8_0: return "q8_0";
  }
  return "?";
}

constexpr std::optional<KvType> kv_type_from_name(std::string_view name) {
  if (name == "f32") return KvType::kF32;
  if (name == "f16") return KvType::kF16;
  if (name == "bf16") return KvType::kBF16;
  if (name == "fp8") return KvType::kFp8;
  if (name == "q8_0") return KvType::kQ8_0;
  return std::nullopt;
}

}  // namespace qrt
