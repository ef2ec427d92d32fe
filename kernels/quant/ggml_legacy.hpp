// GGML 32-element blocks: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL, MXFP4 (spec/ggml.md §2.2).
// Block structs mirror the on-disk bytes; all fields are little-endian and may be unaligned inside a tensor,
// so decoders read them through load_u16/load_u32 rather than through struct members.
#pragma once

#include <cmath>

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

struct block_q8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // codes
};
static_assert(sizeof(block_q8_0) == 34, "Q8_0 block is 34 bytes");

// What every GGML block format shares: row-major blocks along cols, row byte stride = cols/B * bytes.
template <int BlockElems, int BlockBytes>
struct GgmlBlockBase {
  static constexpr Family family = Family::kGgml;
  static constexpr int block_elems = BlockElems;
  static constexpr int block_bytes = BlockBytes;
  static constexpr double bits_per_weight = 8.0 * BlockBytes / BlockElems;

  QRT_HD static const uint8_t* block_ptr(const QuantView& v, int64_t row, int64_t block) {
    return v.data + (row * (v.cols / BlockElems) + block) * BlockBytes;
  }
  static Status check_params(int64_t rows, int64_t cols, const QuantParams&) {
    if (rows <= 0 || cols <= 0) return invalid_argument("tensor needs positive dims");
    if (cols % BlockElems != 0)
      return invalid_argument("row length " + std::to_string(cols) + " is not a multiple of the block size " +
                              std::to_string(BlockElems));
    return ok_status();
  }
  static PartSizes part_sizes(int64_t rows, int64_t cols, const QuantParams&) {
    return {static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols / BlockElems) * BlockBytes, 0, 0};
  }
};

// Round half away from zero, as ggml's reference quantizers do (roundf).
inline float round_half_away(float x) { return std::round(x); }

template <>
struct FormatTraits<FormatId::kQ8_0> : GgmlBlockBase<32, 34> {
  static constexpr int ggml_type = 8;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b);
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(static_cast<int8_t>(b[2 + j]));
  }

  // ggml's quantize_row_q8_0_ref: d = amax/127, q = round(x/d).
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    QRT_TRY(check_params(rows, cols, p));
    out->data.assign(part_sizes(rows, cols, p).data, 0);
    uint8_t* dst = out->data.data();
    for (int64_t blk = 0; blk < rows * cols / 32; ++blk, dst += 34) {
      const float* xb = x + blk * 32;
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      const uint16_t dh = f32_to_fp16(d);
      dst[0] = static_cast<uint8_t>(dh & 0xFF);
      dst[1] = static_cast<uint8_t>(dh >> 8);
      for (int j = 0; j < 32; ++j) dst[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(round_half_away(xb[j] * id)));
    }
    return ok_status();
  }
};

}  // namespace qrt::quant
