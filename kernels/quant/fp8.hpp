// FP8 E4M3 weights with three ways of scaling them:
//   fp8:       per tensor (UQFF tag 3, spec/uqff.md §3.5). data [rows, cols] E4M3FN; w = e4m3 · global_scale, where
//              QuantParams::global_scale is the file's dequant_w_scale.
//   fp8_block: Hugging Face block-wise FP8 (spec/uqff.md §3.8). data [rows, cols] E4M3FN; scales
//              [ceil(rows/128), ceil(cols/128)] (`weight_scale_inv`, F32 in the files; QuantParams::scale_type also
//              allows F16/BF16); w[i][j] = e4m3[i][j] · scales[i/128][j/128].
//   f8q8:      UQFF tag 5 (spec/uqff.md §3.6). 33-byte blocks over the *flattened* tensor, zero-padded to a multiple
//              of 32 elements: 1 byte E4M3 d, then 32 int8 qs; w = qs · (f32(d)/448). Blocks straddle rows when
//              cols is not a multiple of 32.
// None of them constrains the row length, so each decodes one element per decode_block call (block_elems 1):
// every shape a file can hold is then legal, at the price of a per-element scale lookup.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/quant/family_common.hpp"
#include "kernels/quant/format_list.hpp"
#include "kernels/quant/mx.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

// The HF block edge; scales are per 128×128 tile.
constexpr int kFp8TileEdge = 128;

template <>
struct FormatTraits<FormatId::kFP8> {
  static constexpr Family family = Family::kFp8;
  static constexpr int ggml_type = -1;
  static constexpr int block_elems = 1;
  static constexpr int block_bytes = 1;
  static constexpr double bits_per_weight = 8.0;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    out[0] = e4m3_to_f32(v.data[row * v.cols + block]) * v.params.global_scale;
  }
  static Status check_params(int64_t rows, int64_t cols, const QuantParams& p) {
    QRT_TRY(check_matrix_dims(rows, cols, "fp8"));
    if (!std::isfinite(p.global_scale))
      return invalid_argument("fp8: dequant scale must be finite, found " + std::to_string(p.global_scale));
    return ok_status();
  }
  static PartSizes part_sizes(int64_t rows, int64_t cols, const QuantParams&) {
    return {static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols), 0, 0};
  }
  // The per-tensor scale is an input (QuantParams has no output slot): the caller picks global_scale, e.g.
  // absmax/448 as the UQFF writer does (it takes the max element, a quirk the spec tells writers not to copy).
  // Then weight = E4M3(w · (1/global_scale)), round to nearest even, saturating at ±448.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    QRT_TRY(check_params(rows, cols, p));
    if (!(p.global_scale > 0.0f))
      return invalid_argument("fp8: quantizing needs a positive dequant scale, found " +
                              std::to_string(p.global_scale));
    const float quant_scale = 1.0f / p.global_scale;
    out->data.resize(part_sizes(rows, cols, p).data);
    out->scales.clear();
    out->biases.clear();
    for (size_t i = 0; i < out->data.size(); ++i) out->data[i] = f32_to_e4m3(x[i] * quant_scale);
    return ok_status();
  }
};

template <>
struct FormatTraits<FormatId::kFP8_BLOCK> {
  static constexpr Family family = Family::kFp8Block;
  static constexpr int ggml_type = -1;
  static constexpr int block_elems = 1;
  static constexpr int block_bytes = 1;
  static constexpr double bits_per_weight = 8.0 + 32.0 / (kFp8TileEdge * kFp8TileEdge);
  static constexpr bool has_quantizer = true;

  QRT_HD static int64_t tiles_along(int64_t n) { return (n + kFp8TileEdge - 1) / kFp8TileEdge; }

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const int64_t s_index = (row / kFp8TileEdge) * tiles_along(v.cols) + block / kFp8TileEdge;
    out[0] = e4m3_to_f32(v.data[row * v.cols + block]) * load_float_scale(v.scales, s_index, v.params.scale_type);
  }
  static Status check_params(int64_t rows, int64_t cols, const QuantParams& p) {
    QRT_TRY(check_matrix_dims(rows, cols, "fp8_block"));
    return check_float_scale_type(p.scale_type, "fp8_block");
  }
  static PartSizes part_sizes(int64_t rows, int64_t cols, const QuantParams& p) {
    const uint64_t tiles = static_cast<uint64_t>(tiles_along(rows)) * static_cast<uint64_t>(tiles_along(cols));
    return {static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols),
            tiles * static_cast<uint64_t>(float_scale_bytes(p.scale_type)), 0};
  }
  // As the block-FP8 checkpoints are made: per 128×128 tile (partial at the edges) scale = amax/448, weight =
  // E4M3(w / scale) (nearest even). An all-zero tile gets scale 1 so that consumers dividing by it stay finite.
  // The codes are computed with the scale as stored (rounded to scale_type), so the two always agree.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    QRT_TRY(check_params(rows, cols, p));
    const PartSizes sizes = part_sizes(rows, cols, p);
    out->data.assign(sizes.data, 0);
    out->scales.assign(sizes.scales, 0);
    out->biases.clear();
    const int64_t tile_cols = tiles_along(cols);
    for (int64_t tr = 0; tr < tiles_along(rows); ++tr) {
      for (int64_t tc = 0; tc < tile_cols; ++tc) {
        const int64_t r0 = tr * kFp8TileEdge, r1 = std::min(rows, r0 + kFp8TileEdge);
        const int64_t c0 = tc * kFp8TileEdge, c1 = std::min(cols, c0 + kFp8TileEdge);
        float amax = 0.0f;
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c) amax = std::fmax(amax, std::fabs(x[r * cols + c]));
        float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
        scale = round_to_float_scale(scale, p.scale_type);
        if (!(scale > 0.0f)) scale = 1.0f;  // amax/448 underflowed F16/BF16
        store_float_scale(out->scales.data(), tr * tile_cols + tc, p.scale_type, scale);
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t c = c0; c < c1; ++c)
            out->data[static_cast<size_t>(r * cols + c)] = f32_to_e4m3(x[r * cols + c] / scale);
      }
    }
    return ok_status();
  }
};

template <>
struct FormatTraits<FormatId::kF8Q8> {
  static constexpr Family family = Family::kF8q8;
  static constexpr int ggml_type = -1;
  static constexpr int block_elems = 1;
  static constexpr int block_bytes = 0;  // storage blocks are 33 bytes per 32 elements of the flattened tensor
  static constexpr int kStorageElems = 32;
  static constexpr int kStorageBytes = 33;
  static constexpr double bits_per_weight = 8.0 * kStorageBytes / kStorageElems;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const int64_t flat = row * v.cols + block;
    const uint8_t* b = v.data + (flat / kStorageElems) * kStorageBytes;
    const float d = e4m3_to_f32(b[0]) / 448.0f;
    out[0] = static_cast<float>(static_cast<int8_t>(b[1 + flat % kStorageElems])) * d;
  }
  static Status check_params(int64_t rows, int64_t cols, const QuantParams&) {
    return check_matrix_dims(rows, cols, "f8q8");
  }
  static PartSizes part_sizes(int64_t rows, int64_t cols, const QuantParams&) {
    const uint64_t n = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
    return {(n + kStorageElems - 1) / kStorageElems * kStorageBytes, 0, 0};
  }
  // The UQFF writer: per block amax, dq = amax/127, d = E4M3(dq·448) (nearest even, saturating), qs =
  // round_half_away(x/dq) (0 when dq = 0). The codes use the unrounded dq, as the writer does, so the stored
  // d/448 differs from dq by up to half an E4M3 step (about 6%): that is the format's dominant error.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    QRT_TRY(check_params(rows, cols, p));
    const int64_t n = rows * cols;
    out->data.assign(part_sizes(rows, cols, p).data, 0);
    out->scales.clear();
    out->biases.clear();
    for (int64_t blk = 0; blk * kStorageElems < n; ++blk) {
      const int64_t begin = blk * kStorageElems, end = std::min(n, begin + kStorageElems);
      float amax = 0.0f;
      for (int64_t i = begin; i < end; ++i) amax = std::fmax(amax, std::fabs(x[i]));
      const float dq = amax / 127.0f;
      uint8_t* dst = out->data.data() + blk * kStorageBytes;
      dst[0] = f32_to_e4m3(dq * 448.0f);
      for (int64_t i = begin; i < end; ++i) {
        float q = dq != 0.0f ? std::round(x[i] / dq) : 0.0f;
        q = std::isnan(q) ? 0.0f : std::clamp(q, -127.0f, 127.0f);
        dst[1 + (i - begin)] = static_cast<uint8_t>(static_cast<int8_t>(q));
      }
    }
    return ok_status();
  }
};

}  // namespace qrt::quant
