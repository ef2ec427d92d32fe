// Unquantized weights: F32, F16, BF16 (GGML types 0, 1, 30; UQFF Unquant; HF dense checkpoints).
#pragma once

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

// Shared by the three dense formats: a "block" is one element, so any row length is legal.
template <int ElemBytes, float (*Load)(const uint8_t*)>
struct DenseTraitsBase {
  static constexpr Family family = Family::kDense;
  static constexpr int block_elems = 1;
  static constexpr int block_bytes = ElemBytes;
  static constexpr double bits_per_weight = 8.0 * ElemBytes;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    out[0] = Load(v.data + (row * v.cols + block) * ElemBytes);
  }
  static Status check_params(int64_t rows, int64_t cols, const QuantParams&) {
    if (rows <= 0 || cols <= 0) return invalid_argument("dense tensor needs positive dims");
    return ok_status();
  }
  static PartSizes part_sizes(int64_t rows, int64_t cols, const QuantParams&) {
    return {static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * ElemBytes, 0, 0};
  }
};

template <>
struct FormatTraits<FormatId::kF32> : DenseTraitsBase<4, load_f32> {
  static constexpr int ggml_type = 0;
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams&, QuantBuffers* out) {
    out->data.resize(static_cast<size_t>(rows * cols) * 4);
    std::memcpy(out->data.data(), x, out->data.size());
    return ok_status();
  }
};

template <uint16_t (*Convert)(float)>
inline Status quantize_16bit(const float* x, int64_t rows, int64_t cols, QuantBuffers* out) {
  const int64_t n = rows * cols;
  out->data.resize(static_cast<size_t>(n) * 2);
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = Convert(x[i]);
    out->data[2 * i] = static_cast<uint8_t>(h & 0xFF);
    out->data[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
  return ok_status();
}

template <>
struct FormatTraits<FormatId::kF16> : DenseTraitsBase<2, load_f16> {
  static constexpr int ggml_type = 1;
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams&, QuantBuffers* out) {
    return quantize_16bit<f32_to_fp16>(x, rows, cols, out);
  }
};

template <>
struct FormatTraits<FormatId::kBF16> : DenseTraitsBase<2, load_bf16> {
  static constexpr int ggml_type = 30;
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams&, QuantBuffers* out) {
    return quantize_16bit<f32_to_bf16>(x, rows, cols, out);
  }
};

}  // namespace qrt::quant
