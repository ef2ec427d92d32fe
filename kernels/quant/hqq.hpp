// HQQ 4- and 8-bit, axis 0 (UQFF tag 2, spec/uqff.md §3.4).
//
// Grouping runs over the *flattened* tensor (numel = rows·cols) viewed as M: [g, N] with N = numel/g and
// M[i][j] = flat[i·N + j]; column j is group j, a strided set of elements. g = QuantParams::group_size
// (0 means the ISQ default, 64). Parts:
//   data:   8-bit: q as [g, N] u8, so byte f holds flat element f.
//           4-bit: [g/2, N] u8, byte i·N + j = (q[i][j] << 4) | q[i + g/2][j]: flat element f sits in the high
//           nibble of byte f when f < numel/2, else in the low nibble of byte f − numel/2.
//   scales: [N] (the files say [1, N]) in QuantParams::scale_type (F32 as written by ISQ; F16/BF16 allowed)
//   biases: [N] the zero points, same dtype
// Dequant: w = (q − zero[j]) · scale[j], j = f mod N. The stored scale is already the reciprocal of HQQ's
// internal quantization scale.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/quant/family_common.hpp"
#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

constexpr int kHqqDefaultGroupSize = 64;

QRT_HD int hqq_group_size(const QuantParams& p) {
  return p.group_size != 0 ? p.group_size : kHqqDefaultGroupSize;
}

template <int Bits>
struct HqqTraitsBase {
  static_assert(Bits == 4 || Bits == 8, "HQQ is stored as 4 or 8 bits");
  static constexpr Family family = Family::kHqq;
  static constexpr int ggml_type = -1;
  // Groups are strided over the whole tensor, so a row has no group structure: one element per decode call,
  // which makes every shape with numel % g == 0 legal.
  static constexpr int block_elems = 1;
  static constexpr int block_bytes = 0;
  static constexpr double bits_per_weight = Bits + 64.0 / kHqqDefaultGroupSize;  // F32 scale + zero per 64
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const int64_t numel = v.rows * v.cols;
    const int64_t n_groups = numel / hqq_group_size(v.params);
    const int64_t flat = row * v.cols + block;
    const int64_t j = flat % n_groups;
    uint32_t q;
    if constexpr (Bits == 8) {
      q = v.data[flat];
    } else {
      const int64_t half = numel / 2;
      q = flat < half ? (v.data[flat] >> 4) : (v.data[flat - half] & 0xFu);
    }
    const float zero = load_float_scale(v.biases, j, v.params.scale_type);
    const float scale = load_float_scale(v.scales, j, v.params.scale_type);
    out[0] = (static_cast<float>(q) - zero) * scale;
  }

  static Status check_params(int64_t rows, int64_t cols, const QuantParams& p) {
    QRT_TRY(check_matrix_dims(rows, cols, "hqq"));
    const int g = hqq_group_size(p);
    const int64_t numel = rows * cols;
    if (g < 2 || g > numel || numel % g != 0)
      return invalid_argument("hqq: group size " + std::to_string(g) + " does not divide the " +
                              std::to_string(numel) + " elements");
    if (Bits == 4 && g % 2 != 0)
      return invalid_argument("hqq4: group size must be even (codes pair up across the two halves), found " +
                              std::to_string(g));
    return check_float_scale_type(p.scale_type, "hqq");
  }

  static PartSizes part_sizes(int64_t rows, int64_t cols, const QuantParams& p) {
    const uint64_t numel = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
    const uint64_t groups = numel / static_cast<uint64_t>(hqq_group_size(p));
    const uint64_t sb = static_cast<uint64_t>(float_scale_bytes(p.scale_type));
    return {numel * Bits / 8, groups * sb, groups * sb};
  }

  // HQQ's initial estimate, without the proximal optimizer that mistral.rs runs afterwards (10 steps for ISQ):
  // per group s = (2^bits − 1)/(max − min) capped at 2e4, z = −min·s, q = clamp(round_half_even(w·s + z), 0,
  // 2^bits − 1); stored scale = 1/s, zero = z (zeros not rounded, as ISQ configures it). Any (s, z) decodes the
  // same way, so files refined by the optimizer read back exactly.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    QRT_TRY(check_params(rows, cols, p));
    const int g = hqq_group_size(p);
    const int64_t numel = rows * cols;
    const int64_t n_groups = numel / g;
    const PartSizes sizes = part_sizes(rows, cols, p);
    out->data.assign(sizes.data, 0);
    out->scales.assign(sizes.scales, 0);
    out->biases.assign(sizes.biases, 0);
    const float max_code = static_cast<float>((1 << Bits) - 1);
    // Row i of M is the contiguous run flat[i·N, (i+1)·N): sweep it row by row so memory is read in order.
    std::vector<float> mn(static_cast<size_t>(n_groups), INFINITY), mx(static_cast<size_t>(n_groups), -INFINITY);
    for (int i = 0; i < g; ++i)
      for (int64_t j = 0; j < n_groups; ++j) {
        mn[static_cast<size_t>(j)] = std::min(mn[static_cast<size_t>(j)], x[i * n_groups + j]);
        mx[static_cast<size_t>(j)] = std::max(mx[static_cast<size_t>(j)], x[i * n_groups + j]);
      }
    std::vector<float> s(static_cast<size_t>(n_groups)), z(static_cast<size_t>(n_groups));
    for (int64_t j = 0; j < n_groups; ++j) {
      const size_t k = static_cast<size_t>(j);
      s[k] = std::min(max_code / (mx[k] - mn[k]), 2e4f);  // max == min gives inf, capped like torch's clamp
      z[k] = -mn[k] * s[k];
      store_float_scale(out->scales.data(), j, p.scale_type, 1.0f / s[k]);
      store_float_scale(out->biases.data(), j, p.scale_type, z[k]);
    }
    for (int64_t flat = 0; flat < numel; ++flat) {
      const size_t k = static_cast<size_t>(flat % n_groups);
      float q = std::nearbyint(x[flat] * s[k] + z[k]);
      q = q > 0.0f ? std::min(q, max_code) : 0.0f;  // also maps NaN to 0
      const uint8_t code = static_cast<uint8_t>(q);
      if constexpr (Bits == 8) {
        out->data[static_cast<size_t>(flat)] = code;
      } else if (flat < numel / 2) {
        out->data[static_cast<size_t>(flat)] |= static_cast<uint8_t>(code << 4);
      } else {
        out->data[static_cast<size_t>(flat - numel / 2)] |= code;
      }
    }
    return ok_status();
  }
};

template <>
struct FormatTraits<FormatId::kHQQ4> : HqqTraitsBase<4> {};
template <>
struct FormatTraits<FormatId::kHQQ8> : HqqTraitsBase<8> {};

}  // namespace qrt::quant
