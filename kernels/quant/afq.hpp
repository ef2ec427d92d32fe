// AFQ: MLX affine quantization, 2/3/4/5/6/8 bits (UQFF tag 4, spec/uqff.md §3.2; Ollama int4/int8 and mlx-community
// checkpoints, spec/ollama.md §2.6 and §3.1).
//
// Parts of a [rows, cols] tensor with group size g (32, 64 or 128; QuantParams::group_size):
//   data:   [rows, cols·bits/32] u32 words = per row a little-endian, LSB-first bit stream; element j occupies
//           stream bits [j·bits, (j+1)·bits). 3/5/6-bit codes straddle bytes and words.
//   scales: [rows, cols/g] in QuantParams::scale_type (F16, BF16 or F32)
//   biases: [rows, cols/g] same dtype
// Dequant: w = q·scale + bias. Scales may be negative (the quantizer below picks the sign).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/quant/family_common.hpp"
#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

template <int Bits>
struct AfqTraitsBase {
  static_assert(Bits >= 2 && Bits <= 8 && Bits != 7, "AFQ has 2, 3, 4, 5, 6 and 8 bits");
  static constexpr Family family = Family::kAfq;
  static constexpr int ggml_type = -1;
  static constexpr int block_elems = 0;  // one decode block = one group of params.group_size elements
  static constexpr int block_bytes = 0;  // group_size·Bits/8, depends on the group size
  // Codes plus a 16-bit scale and bias per group of 64 (the ISQ and Ollama default).
  static constexpr double bits_per_weight = Bits + 32.0 / 64.0;
  static constexpr bool has_quantizer = true;

  // A group of g elements starts on a byte boundary (g·Bits is a multiple of 8·Bits), and every 8 consecutive
  // codes fill exactly Bits bytes, so a group decodes as g/8 chunks of Bits bytes each.
  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const int g = v.params.group_size;
    const int64_t groups_per_row = v.cols / g;
    const int64_t s_index = row * groups_per_row + block;
    const float scale = load_float_scale(v.scales, s_index, v.params.scale_type);
    const float bias = load_float_scale(v.biases, s_index, v.params.scale_type);
    const uint8_t* p = v.data + row * (v.cols / 8 * Bits) + block * (g / 8 * Bits);
    constexpr uint64_t kMask = (uint64_t{1} << Bits) - 1;
    for (int c = 0; c < g / 8; ++c, p += Bits) {
      uint64_t chunk = 0;
      for (int k = 0; k < Bits; ++k) chunk |= static_cast<uint64_t>(p[k]) << (8 * k);
      for (int e = 0; e < 8; ++e) {
        const auto q = static_cast<float>(static_cast<uint32_t>((chunk >> (e * Bits)) & kMask));
        out[8 * c + e] = mul_then_add(q, scale, bias);
      }
    }
  }

  static Status check_params(int64_t rows, int64_t cols, const QuantParams& p) {
    QRT_TRY(check_matrix_dims(rows, cols, "afq"));
    if (p.group_size != 32 && p.group_size != 64 && p.group_size != 128)
      return invalid_argument("afq: group size must be 32, 64 or 128, found " + std::to_string(p.group_size));
    if (cols % p.group_size != 0)
      return invalid_argument("afq: row length " + std::to_string(cols) + " is not a multiple of the group size " +
                              std::to_string(p.group_size));
    return check_float_scale_type(p.scale_type, "afq");
  }

  static PartSizes part_sizes(int64_t rows, int64_t cols, const QuantParams& p) {
    const uint64_t r = static_cast<uint64_t>(rows), c = static_cast<uint64_t>(cols);
    const uint64_t groups = r * (c / static_cast<uint64_t>(p.group_size));
    const uint64_t sb = static_cast<uint64_t>(float_scale_bytes(p.scale_type));
    return {r * c / 8 * Bits, groups * sb, groups * sb};
  }

  // MLX's affine_quantize as its GPU kernels (Metal, which Ollama and mlx-community use) compute it, in float32:
  //   max starts at 0 (so α = max(0, group max)), β = group min;
  //   s = max((α − β)/n, 1e-7) with n = 2^bits − 1; the end with the larger magnitude becomes the edge (s > 0 when
  //   it is β, else s < 0); q0 = round(edge/s); if q0 ≠ 0 then s = edge/q0, bias = edge, else bias = 0;
  //   q = min(round((w − bias)/s), n), rounding half away from zero.
  // Codes are computed with the float32 s and bias; the stored scale is s rounded to scale_type (the bias is one
  // of the inputs or 0, so it rounds only when the inputs are finer than scale_type). The lower clamp at 0 never
  // binds mathematically; it keeps a rounding accident or a NaN input from writing out-of-range bits.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    QRT_TRY(check_params(rows, cols, p));
    const PartSizes sizes = part_sizes(rows, cols, p);
    out->data.assign(sizes.data, 0);
    out->scales.assign(sizes.scales, 0);
    out->biases.assign(sizes.biases, 0);
    const int g = p.group_size;
    const int64_t groups_per_row = cols / g;
    const float n_bins = static_cast<float>((1 << Bits) - 1);
    std::vector<uint8_t> codes(static_cast<size_t>(g));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < groups_per_row; ++b) {
        const float* w = x + r * cols + b * g;
        float w_min = INFINITY, w_max = 0.0f;
        for (int i = 0; i < g; ++i) {
          w_min = std::min(w_min, w[i]);
          w_max = std::max(w_max, w[i]);
        }
        float scale = std::max((w_max - w_min) / n_bins, 1e-7f);
        const bool min_is_edge = std::fabs(w_min) > std::fabs(w_max);
        scale = min_is_edge ? scale : -scale;
        const float edge = min_is_edge ? w_min : w_max;
        const float q0 = std::round(edge / scale);
        float bias = 0.0f;
        if (q0 != 0.0f) {
          scale = edge / q0;
          bias = edge;
        }
        const int64_t s_index = r * groups_per_row + b;
        store_float_scale(out->scales.data(), s_index, p.scale_type, scale);
        store_float_scale(out->biases.data(), s_index, p.scale_type, bias);
        for (int i = 0; i < g; ++i) {
          float q = std::round((w[i] - bias) / scale);
          q = q > 0.0f ? std::min(q, n_bins) : 0.0f;  // also maps NaN to 0
          codes[static_cast<size_t>(i)] = static_cast<uint8_t>(q);
        }
        pack_group(codes.data(), g, out->data.data() + r * (cols / 8 * Bits) + b * (g / 8 * Bits));
      }
    }
    return ok_status();
  }

 private:
  // Inverse of decode_block's unpacking: 8 codes -> Bits bytes, LSB first.
  static void pack_group(const uint8_t* codes, int g, uint8_t* dst) {
    for (int c = 0; c < g / 8; ++c, dst += Bits) {
      uint64_t chunk = 0;
      for (int e = 0; e < 8; ++e) chunk |= static_cast<uint64_t>(codes[8 * c + e]) << (e * Bits);
      for (int k = 0; k < Bits; ++k) dst[k] = static_cast<uint8_t>(chunk >> (8 * k));
    }
  }
};

template <>
struct FormatTraits<FormatId::kAFQ2> : AfqTraitsBase<2> {};
template <>
struct FormatTraits<FormatId::kAFQ3> : AfqTraitsBase<3> {};
template <>
struct FormatTraits<FormatId::kAFQ4> : AfqTraitsBase<4> {};
template <>
struct FormatTraits<FormatId::kAFQ5> : AfqTraitsBase<5> {};
template <>
struct FormatTraits<FormatId::kAFQ6> : AfqTraitsBase<6> {};
template <>
struct FormatTraits<FormatId::kAFQ8> : AfqTraitsBase<8> {};

}  // namespace qrt::quant
