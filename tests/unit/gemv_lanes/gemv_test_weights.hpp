// Test weights for the fast GEMV kernels, shared by the CPU emulation test (this folder) and the GPU test
// (tests/gpu/gemv_fast): quantizer output of fresh Gaussian weights, or the same buffers with every code byte drawn
// at random and the scale fields set to random finite values, so that bit patterns a quantizer never emits (every
// 6-bit K-quant scale and min, every E2M1 code including -0, negative AFQ scales) reach the kernels too.
#pragma once

#include <cmath>
#include <cstddef>
#include <random>
#include <string>

#include "decode_only_blocks.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "test_support.hpp"

namespace qrt::test {

enum class WeightKind { kQuantized, kRandomBytes };

inline std::string weight_kind_name(WeightKind k) { return k == WeightKind::kQuantized ? "quantized" : "random"; }

// Default params of a format for these tests: AFQ gets `group_size` and `scale_type` (as do the other formats with
// separate float scales); formats with a tensor scale get 0.75, so that forgetting it shows.
inline quant::QuantParams gemv_test_params(quant::FormatId id, int group_size = 64,
                                           quant::ScalarType scale_type = quant::ScalarType::kBF16) {
  quant::QuantParams p;
  if (quant::format_info(id).block_elems == 0) p.group_size = group_size;
  p.scale_type = scale_type;
  if (id == quant::FormatId::kFP8 || id == quant::FormatId::kNVFP4) p.global_scale = 0.75f;
  return p;
}

// E4M3 bytes with the two NaN patterns (S.1111.111) replaced by the largest finite magnitude of the same sign.
inline void drop_e4m3_nans(std::vector<uint8_t>& bytes) {
  for (uint8_t& b : bytes)
    if ((b & 0x7F) == 0x7F) b = static_cast<uint8_t>(b ^ 1);
}

// Overwrites the f16 at `p` with a random finite value of magnitude around `scale`.
inline void store_random_f16(uint8_t* p, std::mt19937_64& gen, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  const uint16_t h = quant::f32_to_fp16(dist(gen));
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// Randomizes every code byte of `q` (a quantizer's output for `id`, [rows, cols]) and sets its scale fields to
// random finite values. Returns false for formats this helper does not know (the caller skips the random case).
inline bool randomize_codes(quant::FormatId id, const quant::QuantParams& p, quant::QuantBuffers& q, uint64_t seed) {
  using quant::FormatId;
  std::mt19937_64 gen(seed);
  const std::vector<uint8_t> bytes = random_bytes(q.data.size(), seed + 1);
  q.data = bytes;
  const quant::FormatInfo info = quant::format_info(id);
  auto fix_block_f16 = [&](size_t offset, float scale) {
    for (size_t b = 0; b + info.block_bytes <= q.data.size(); b += static_cast<size_t>(info.block_bytes))
      store_random_f16(q.data.data() + b + offset, gen, scale);
  };
  switch (id) {
    case FormatId::kF32:
    case FormatId::kF16:
    case FormatId::kBF16: {
      // Random bit patterns of a float format are NaN and infinities among others; fresh finite values instead,
      // spread over a wider range than the quantized case.
      const std::vector<float> v = random_normal(q.data.size() / static_cast<size_t>(info.block_bytes), seed + 2, 3.0f);
      auto fresh = cpu::quantize(id, v.data(), 1, static_cast<int64_t>(v.size()), p);
      if (!fresh.ok()) return false;
      q.data = fresh->data;
      return true;
    }
    case FormatId::kQ4_0:
      fix_block_f16(offsetof(quant::block_q4_0, d), 0.05f);
      return true;
    case FormatId::kQ4_1:
      fix_block_f16(offsetof(quant::block_q4_1, d), 0.05f);
      fix_block_f16(offsetof(quant::block_q4_1, m), 0.05f);
      return true;
    case FormatId::kQ5_0:
      fix_block_f16(offsetof(quant::block_q5_0, d), 0.05f);
      return true;
    case FormatId::kQ5_1:
      fix_block_f16(offsetof(quant::block_q5_1, d), 0.05f);
      fix_block_f16(offsetof(quant::block_q5_1, m), 0.05f);
      return true;
    case FormatId::kQ8_0:
      fix_block_f16(offsetof(quant::block_q8_0, d), 0.01f);
      return true;
    case FormatId::kQ2_K:
      fix_block_f16(offsetof(quant::block_q2_K, d), 0.01f);
      fix_block_f16(offsetof(quant::block_q2_K, dmin), 0.01f);
      return true;
    case FormatId::kQ3_K:
      fix_block_f16(offsetof(quant::block_q3_K, d), 0.001f);
      return true;
    case FormatId::kQ4_K:
      fix_block_f16(offsetof(quant::block_q4_K, d), 0.01f);
      fix_block_f16(offsetof(quant::block_q4_K, dmin), 0.01f);
      return true;
    case FormatId::kQ5_K:
      fix_block_f16(offsetof(quant::block_q5_K, d), 0.01f);
      fix_block_f16(offsetof(quant::block_q5_K, dmin), 0.01f);
      return true;
    case FormatId::kQ6_K:
      fix_block_f16(offsetof(quant::block_q6_K, d), 0.001f);
      return true;
    case FormatId::kAFQ2:
    case FormatId::kAFQ3:
    case FormatId::kAFQ4:
    case FormatId::kAFQ5:
    case FormatId::kAFQ6:
    case FormatId::kAFQ8: {
      std::normal_distribution<float> dist(0.0f, 0.02f);
      const size_t n = q.scales.size() / static_cast<size_t>(quant::float_scale_bytes(p.scale_type));
      for (size_t i = 0; i < n; ++i) {
        quant::store_float_scale(q.scales.data(), static_cast<int64_t>(i), p.scale_type, dist(gen));
        quant::store_float_scale(q.biases.data(), static_cast<int64_t>(i), p.scale_type, 4.0f * dist(gen));
      }
      return true;
    }
    case FormatId::kMXFP4:
    case FormatId::kMXFP8: {
      if (id == FormatId::kMXFP8) drop_e4m3_nans(q.data);
      std::uniform_int_distribution<int> exponent(120, 134);  // 2^-7 .. 2^7
      for (uint8_t& s : q.scales) s = static_cast<uint8_t>(exponent(gen));
      return true;
    }
    case FormatId::kNVFP4:  // E2M1 codes have no NaN; the E4M3 scales, negative ones included, must be finite
      q.scales = random_bytes(q.scales.size(), seed + 3);
      drop_e4m3_nans(q.scales);
      return true;
    case FormatId::kFP8:
      drop_e4m3_nans(q.data);
      return true;
    case FormatId::kFP8_BLOCK: {
      drop_e4m3_nans(q.data);
      std::normal_distribution<float> dist(0.0f, 0.01f);
      const size_t n = q.scales.size() / static_cast<size_t>(quant::float_scale_bytes(p.scale_type));
      for (size_t i = 0; i < n; ++i)
        quant::store_float_scale(q.scales.data(), static_cast<int64_t>(i), p.scale_type, dist(gen));
      return true;
    }
    default:
      return false;
  }
}

// Weights of `id` for a [rows, cols] matrix, or an error (the quantizer refused the shape).
inline Result<quant::QuantBuffers> make_test_weights(quant::FormatId id, int64_t rows, int64_t cols,
                                                     const quant::QuantParams& p, WeightKind kind, uint64_t seed) {
  const auto field = decode_only_scale_field(id);
  if (!quant::format_info(id).has_quantizer || (field && kind == WeightKind::kRandomBytes)) {
    // Decode-only formats (the i-quants), and random codes of the ternary and GGML MXFP4 formats: random blocks
    // with finite scales.
    if (kind != WeightKind::kRandomBytes || !field)
      return unsupported(std::string(quant::format_name(id)) + " has no quantizer");
    quant::QuantBuffers q;
    q.data = random_blocks(*field, rows, cols, seed * 7 + 3);
    return q;
  }
  const std::vector<float> w = random_normal(static_cast<size_t>(rows * cols), seed, 0.05f);
  auto q = cpu::quantize(id, w.data(), rows, cols, p);
  if (!q.ok()) return q.status();
  if (kind == WeightKind::kRandomBytes && !randomize_codes(id, p, *q, seed * 7 + 3))
    return unsupported("no random-bytes recipe for " + std::string(quant::format_name(id)));
  return std::move(*q);
}

}  // namespace qrt::test
