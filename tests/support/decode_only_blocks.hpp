// Random blocks for the GGML formats tested with random codes: the decode-only ones (i-quants, IQ4_NL), which have
// no quantizer to make test weights from, and the ternary and GGML MXFP4 ones, whose quantizers reach only some codes
// (TQ2_0's code 3, for one, is never written): random code bytes with each block's scale set to a finite, moderate
// value (random bytes there would give inf/NaN rows and nothing to compare). Shared by the GPU tests that need every
// format.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "kernels/quant/common.hpp"
#include "kernels/quant/formats.hpp"
#include "test_support.hpp"

namespace qrt::test {

// Where each format keeps its scale, so random blocks can be given finite, moderate scales (random bytes would
// give inf/NaN rows and nothing to compare).
enum class ScaleKind { kF16At, kIq1mNibbles, kE8m0At0 };
struct ScaleField {
  quant::FormatId id;
  ScaleKind kind;
  int offset;  // byte offset of the f16 d for kF16At
};
constexpr ScaleField kScaleFields[] = {
    {quant::FormatId::kIQ1_S, ScaleKind::kF16At, 0},     {quant::FormatId::kIQ1_M, ScaleKind::kIq1mNibbles, 48},
    {quant::FormatId::kIQ2_XXS, ScaleKind::kF16At, 0},   {quant::FormatId::kIQ2_XS, ScaleKind::kF16At, 0},
    {quant::FormatId::kIQ2_S, ScaleKind::kF16At, 0},     {quant::FormatId::kIQ3_XXS, ScaleKind::kF16At, 0},
    {quant::FormatId::kIQ3_S, ScaleKind::kF16At, 0},     {quant::FormatId::kIQ4_NL, ScaleKind::kF16At, 0},
    {quant::FormatId::kIQ4_XS, ScaleKind::kF16At, 0},    {quant::FormatId::kTQ1_0, ScaleKind::kF16At, 52},
    {quant::FormatId::kTQ2_0, ScaleKind::kF16At, 64},    {quant::FormatId::kMXFP4_GGML, ScaleKind::kE8m0At0, 0},
};

// Random blocks for a [rows, cols] tensor with every scale finite (|d| in [2^-8, 2^-4], either sign).
inline std::vector<uint8_t> random_blocks(const ScaleField& f, int64_t rows, int64_t cols, uint64_t seed) {
  const quant::FormatInfo info = quant::format_info(f.id);
  const int64_t nblocks = rows * cols / info.block_elems;
  std::vector<uint8_t> bytes = random_bytes(static_cast<size_t>(nblocks * info.block_bytes), seed);
  std::mt19937_64 gen(seed ^ 0x5eed);
  std::uniform_real_distribution<float> mag(1.0f / 256, 1.0f / 16);
  for (int64_t b = 0; b < nblocks; ++b) {
    uint8_t* blk = bytes.data() + b * info.block_bytes;
    const uint16_t d = quant::f32_to_fp16((gen() & 1) ? -mag(gen) : mag(gen));
    switch (f.kind) {
      case ScaleKind::kF16At:
        blk[f.offset] = static_cast<uint8_t>(d & 0xFF);
        blk[f.offset + 1] = static_cast<uint8_t>(d >> 8);
        break;
      case ScaleKind::kIq1mNibbles:  // top nibble of scale word w = bits 4w..4w+3 of d
        for (int w = 0; w < 4; ++w) {
          uint8_t& hi = blk[f.offset + 2 * w + 1];
          hi = static_cast<uint8_t>((hi & 0x0F) | (((d >> (4 * w)) & 0xF) << 4));
        }
        break;
      case ScaleKind::kE8m0At0:
        blk[0] = static_cast<uint8_t>(118 + gen() % 12);  // 2^-10 .. 2^1
        break;
    }
  }
  return bytes;
}

// The scale field of a decode-only format, if `id` is one.
inline std::optional<ScaleField> decode_only_scale_field(quant::FormatId id) {
  for (const ScaleField& f : kScaleFields)
    if (f.id == id) return f;
  return std::nullopt;
}

}  // namespace qrt::test
