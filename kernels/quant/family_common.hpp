// Helpers shared by the non-GGML families (AFQ, MX/NV FP, FP8, HQQ): shape checks, and per-group scale / bias /
// zero-point arrays stored as F32, F16 or BF16 with one load and one store helper for the three dtypes, so every
// family reads them the same way on the host and on the device.
#pragma once

#include <string>

#include "kernels/quant/common.hpp"
#include "kernels/quant/scalar_type.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

// Element `index` of a little-endian float array of dtype `t` (F32, F16 or BF16; anything else reads as F32,
// which check_float_scale_type rules out before any decode runs).
QRT_HD float load_float_scale(const uint8_t* base, int64_t index, ScalarType t) {
  if (t == ScalarType::kF16) return load_f16(base + 2 * index);
  if (t == ScalarType::kBF16) return load_bf16(base + 2 * index);
  return load_f32(base + 4 * index);
}

QRT_HD int float_scale_bytes(ScalarType t) { return (t == ScalarType::kF16 || t == ScalarType::kBF16) ? 2 : 4; }

// Writes v rounded to dtype `t` (round-to-nearest-even) at element `index`.
inline void store_float_scale(uint8_t* base, int64_t index, ScalarType t, float v) {
  if (t == ScalarType::kF32) {
    const uint32_t u = f32_to_bits(v);
    for (int k = 0; k < 4; ++k) base[4 * index + k] = static_cast<uint8_t>(u >> (8 * k));
    return;
  }
  const uint16_t h = t == ScalarType::kF16 ? f32_to_fp16(v) : f32_to_bf16(v);
  base[2 * index] = static_cast<uint8_t>(h & 0xFF);
  base[2 * index + 1] = static_cast<uint8_t>(h >> 8);
}

// The value a stored scale will decode to: v rounded through dtype `t`.
inline float round_to_float_scale(float v, ScalarType t) {
  if (t == ScalarType::kF16) return fp16_to_f32(f32_to_fp16(v));
  if (t == ScalarType::kBF16) return bf16_to_f32(f32_to_bf16(v));
  return v;
}

// Positive dims whose product (and any byte count derived from it) stays far from int64 overflow: shapes come
// from files, and a bad one must give an error rather than wrap around.
inline Status check_matrix_dims(int64_t rows, int64_t cols, const char* family) {
  constexpr int64_t kMaxElems = int64_t{1} << 48;
  if (rows <= 0 || cols <= 0)
    return invalid_argument(std::string(family) + ": dims must be positive, found [" + std::to_string(rows) + ", " +
                            std::to_string(cols) + "]");
  if (cols > kMaxElems / rows)
    return invalid_argument(std::string(family) + ": [" + std::to_string(rows) + ", " + std::to_string(cols) +
                            "] has more than 2^48 elements");
  return ok_status();
}

inline Status check_float_scale_type(ScalarType t, const char* family) {
  if (t == ScalarType::kF32 || t == ScalarType::kF16 || t == ScalarType::kBF16) return ok_status();
  return invalid_argument(std::string(family) + ": scale dtype must be F32, F16 or BF16, found " +
                          std::string(scalar_type_name(t)));
}

}  // namespace qrt::quant
