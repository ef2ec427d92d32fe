// GGML 32-element blocks: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (spec/ggml.md §2.2), plus what every GGML block
// family shares (GgmlBlockBase, the quantizer driver and its rounding helpers).
// Block structs mirror the on-disk bytes; all fields are little-endian and may be unaligned inside a tensor,
// so decoders read them at their offsetof positions through load_u16/load_u32 rather than through struct members.
//
// Decoders evaluate the same float32 expression, in the same order, as ggml's dequantize_row_* and gguf-py
// (d * q, or d * q + m), so the CPU path is bit-exact against both; quantizers follow ggml's
// quantize_row_*_ref and produce the same bytes as gguf-py's quantizers (tests/oracle/quant).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>

#include "kernels/quant/format_list.hpp"
#include "kernels/quant/ggml_weighted_quantize.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

// Nibble formats put element j in the low nibble of qs[j] and element j + 16 in its high nibble (halves, not
// interleaved pairs); the 5-bit formats keep each element's fifth bit in qh (u32 LE), bit j for element j.
struct block_q4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // 32 nibbles, code q in 0..15, x = d * (q - 8)
};
static_assert(sizeof(block_q4_0) == 18, "Q4_0 block is 18 bytes");

struct block_q4_1 {
  uint16_t d;      // f16 scale
  uint16_t m;      // f16 minimum
  uint8_t qs[16];  // 32 nibbles, x = d * q + m
};
static_assert(sizeof(block_q4_1) == 20, "Q4_1 block is 20 bytes");

struct block_q5_0 {
  uint16_t d;      // f16 scale
  uint8_t qh[4];   // fifth bits, u32 LE
  uint8_t qs[16];  // low nibbles, x = d * (q - 16)
};
static_assert(sizeof(block_q5_0) == 22, "Q5_0 block is 22 bytes");

struct block_q5_1 {
  uint16_t d;      // f16 scale
  uint16_t m;      // f16 minimum
  uint8_t qh[4];   // fifth bits, u32 LE
  uint8_t qs[16];  // low nibbles, x = d * q + m
};
static_assert(sizeof(block_q5_1) == 24, "Q5_1 block is 24 bytes");

struct block_q8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // codes
};
static_assert(sizeof(block_q8_0) == 34, "Q8_0 block is 34 bytes");

// An activation format (ggml's CPU dot products pair it with Q4_1/Q5_1); it does not occur in model files.
struct block_q8_1 {
  uint16_t d;     // f16 scale
  uint16_t s;     // f16 helper for zero-point folding: d * sum(qs) from the CPU quantizer, sum(x) from CUDA's
  int8_t qs[32];  // codes, x = d * q
};
static_assert(sizeof(block_q8_1) == 36, "Q8_1 block is 36 bytes");

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
    if (rows > std::numeric_limits<int64_t>::max() / cols)
      return invalid_argument("tensor [" + std::to_string(rows) + ", " + std::to_string(cols) +
                              "] has more elements than fit in 64 bits");
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

// C's float-to-int cast (truncation toward zero) clamped to [lo, hi], NaN giving lo. The reference quantizers
// cast small floats to codes; for finite input in range this is exactly the cast, and values pushed out of
// range by an overflowing scale stay defined instead of being undefined behaviour.
inline int trunc_clamped(float v, int lo, int hi) {
  if (!(v >= static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// roundf then clamp to int8, for the 8-bit quantizers (|x * id| <= 127 unless the scale underflowed).
inline int8_t round_to_i8(float v) {
  const float r = round_half_away(v);
  return static_cast<int8_t>(trunc_clamped(r, -128, 127));
}

inline void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}
inline void store_u32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void store_f16(uint8_t* p, float f) { store_u16(p, f32_to_fp16(f)); }

// The shared driver of the GGML reference quantizers: checks the shape, refuses non-finite input (a NaN or
// infinity would silently poison its whole block's scale), sizes the output and calls
// encode(const float* xb, uint8_t* block) once per block, blocks in row-major order. x: [rows, cols].
template <class Traits, class EncodeBlock>
Status quantize_ggml_blocks(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out,
                            EncodeBlock&& encode) {
  QRT_TRY(Traits::check_params(rows, cols, p));
  const int64_t n = rows * cols;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      return invalid_argument("cannot quantize the non-finite value " + std::to_string(x[i]) + " at row " +
                              std::to_string(i / cols) + ", column " + std::to_string(i % cols));
  out->data.assign(Traits::part_sizes(rows, cols, p).data, 0);
  out->scales.clear();
  out->biases.clear();
  uint8_t* dst = out->data.data();
  for (int64_t blk = 0; blk < n / Traits::block_elems; ++blk, dst += Traits::block_bytes)
    encode(x + blk * Traits::block_elems, dst);
  return ok_status();
}

// The driver of the quantizers that work a row at a time: ggml's importance-weighted ones (their error weights use
// the row's mean square) and the grid-searching i-quants. Checks as quantize_ggml_blocks does, and that every
// importance is finite and >= 0, then calls row(const float* x, int64_t cols, const float* importance,
// uint8_t* dst) -> bool per row, importance = p.importance (nullptr when unweighted). A row the search cannot
// place (ggml aborts there: squares of values near 1e30 overflow) is an error naming it.
template <class Traits, class QuantizeRow>
Status quantize_ggml_rows(const char* type_name, const float* x, int64_t rows, int64_t cols, const QuantParams& p,
                          QuantBuffers* out, QuantizeRow&& row) {
  QRT_TRY(Traits::check_params(rows, cols, p));
  for (int64_t i = 0; i < rows * cols; ++i)
    if (!std::isfinite(x[i]))
      return invalid_argument("cannot quantize the non-finite value " + std::to_string(x[i]) + " at row " +
                              std::to_string(i / cols) + ", column " + std::to_string(i % cols));
  if (p.importance != nullptr)
    for (int64_t c = 0; c < cols; ++c)
      if (!std::isfinite(p.importance[c]) || p.importance[c] < 0.0f)
        return invalid_argument("the importance of column " + std::to_string(c) + " is " +
                                std::to_string(p.importance[c]) + " (expected a finite value >= 0)");
  out->data.assign(Traits::part_sizes(rows, cols, p).data, 0);
  out->scales.clear();
  out->biases.clear();
  const int64_t row_bytes = cols / Traits::block_elems * Traits::block_bytes;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    if (!row(xr, cols, p.importance, out->data.data() + r * row_bytes)) {
      float amax = 0.0f;
      for (int64_t c = 0; c < cols; ++c) amax = std::max(amax, std::fabs(xr[c]));
      return invalid_argument("row " + std::to_string(r) + " cannot be quantized to " + std::string(type_name) +
                              ": its grid search found no point for values this large (largest |x| " +
                              std::to_string(amax) + ")");
    }
  }
  return ok_status();
}

// The importance-weighted quantizers (ggml_weighted_quantize.hpp), which never fail, through quantize_ggml_rows.
template <class Traits>
Status quantize_weighted_rows(const char* type_name, const float* x, int64_t rows, int64_t cols, const QuantParams& p,
                              QuantBuffers* out, void (*row)(const float*, int64_t, const float*, uint8_t*)) {
  return quantize_ggml_rows<Traits>(type_name, x, rows, cols, p, out,
                                    [row](const float* xr, int64_t n, const float* w, uint8_t* dst) {
                                      row(xr, n, w, dst);
                                      return true;
                                    });
}

// Largest |x| of a block and the signed value that attains it first, as ggml's "amax < |v|" scan finds it.
inline void signed_absmax(const float* x, int n, float* amax, float* max) {
  *amax = 0.0f;
  *max = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float a = std::fabs(x[j]);
    if (*amax < a) {
      *amax = a;
      *max = x[j];
    }
  }
}

// Minimum and maximum of a block, scanned in order as ggml does.
inline void min_max(const float* x, int n, float* min, float* max) {
  *min = std::numeric_limits<float>::max();
  *max = -std::numeric_limits<float>::max();
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

// Q4_0 (type 2): x = d * (q - 8).
template <>
struct FormatTraits<FormatId::kQ4_0> : GgmlBlockBase<32, sizeof(block_q4_0)> {
  static constexpr int ggml_type = 2;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q4_0, d));
    const uint8_t* qs = b + offsetof(block_q4_0, qs);
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(static_cast<int>(qs[j] & 0x0F) - 8);
      out[j + 16] = d * static_cast<float>(static_cast<int>(qs[j] >> 4) - 8);
    }
  }

  // ggml's quantize_row_q4_0_ref: the signed value of largest magnitude maps to code 0 (d = max / -8), the rest
  // to trunc(x / d + 8.5) capped at 15.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    if (p.importance != nullptr)
      return quantize_weighted_rows<FormatTraits>("q4_0", x, rows, cols, p, out, quantize_row_q4_0_weighted);
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, [](const float* xb, uint8_t* dst) {
      float amax, max;
      signed_absmax(xb, 32, &amax, &max);
      const float d = max / -8.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      store_f16(dst + offsetof(block_q4_0, d), d);
      uint8_t* qs = dst + offsetof(block_q4_0, qs);
      for (int j = 0; j < 16; ++j) {
        const float x0 = xb[j] * id;
        const float x1 = xb[j + 16] * id;
        const int q0 = trunc_clamped(x0 + 8.5f, 0, 15);
        const int q1 = trunc_clamped(x1 + 8.5f, 0, 15);
        qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
    });
  }
};

// Q4_1 (type 3): x = d * q + m.
template <>
struct FormatTraits<FormatId::kQ4_1> : GgmlBlockBase<32, sizeof(block_q4_1)> {
  static constexpr int ggml_type = 3;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q4_1, d));
    const float m = load_f16(b + offsetof(block_q4_1, m));
    const uint8_t* qs = b + offsetof(block_q4_1, qs);
    for (int j = 0; j < 16; ++j) {
      out[j] = d * static_cast<float>(qs[j] & 0x0F) + m;
      out[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
    }
  }

  // ggml's quantize_row_q4_1_ref: d = (max - min) / 15, m = min, q = trunc((x - min) / d + 0.5) capped at 15.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    if (p.importance != nullptr)
      return quantize_weighted_rows<FormatTraits>("q4_1", x, rows, cols, p, out, quantize_row_q4_1_weighted);
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, [](const float* xb, uint8_t* dst) {
      float min, max;
      min_max(xb, 32, &min, &max);
      const float d = (max - min) / 15.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      store_f16(dst + offsetof(block_q4_1, d), d);
      store_f16(dst + offsetof(block_q4_1, m), min);
      uint8_t* qs = dst + offsetof(block_q4_1, qs);
      for (int j = 0; j < 16; ++j) {
        const float x0 = (xb[j] - min) * id;
        const float x1 = (xb[j + 16] - min) * id;
        const int q0 = trunc_clamped(x0 + 0.5f, 0, 15);
        const int q1 = trunc_clamped(x1 + 0.5f, 0, 15);
        qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
      }
    });
  }
};

// The 5-bit code of element j (0..31) of a Q5_0/Q5_1 block: a nibble of qs plus bit j of qh.
QRT_HD int q5_code(const uint8_t* qs, uint32_t qh, int j) {
  const int nibble = j < 16 ? (qs[j] & 0x0F) : (qs[j - 16] >> 4);
  return nibble | static_cast<int>(((qh >> j) & 1u) << 4);
}

// Packs 32 five-bit codes into qs (nibbles) and qh (fifth bits).
inline void pack_q5(const int* q, uint8_t* qs, uint8_t* qh) {
  uint32_t high = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4));
    high |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
    high |= static_cast<uint32_t>((q[j + 16] >> 4) & 1) << (j + 16);
  }
  store_u32(qh, high);
}

// Q5_0 (type 6): x = d * (q - 16).
template <>
struct FormatTraits<FormatId::kQ5_0> : GgmlBlockBase<32, sizeof(block_q5_0)> {
  static constexpr int ggml_type = 6;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q5_0, d));
    const uint32_t qh = load_u32(b + offsetof(block_q5_0, qh));
    const uint8_t* qs = b + offsetof(block_q5_0, qs);
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(q5_code(qs, qh, j) - 16);
  }

  // ggml's quantize_row_q5_0_ref: d = max / -16, q = trunc(x / d + 16.5) capped at 31.
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    if (p.importance != nullptr)
      return quantize_weighted_rows<FormatTraits>("q5_0", x, rows, cols, p, out, quantize_row_q5_0_weighted);
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, [](const float* xb, uint8_t* dst) {
      float amax, max;
      signed_absmax(xb, 32, &amax, &max);
      const float d = max / -16.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      store_f16(dst + offsetof(block_q5_0, d), d);
      int q[32];
      for (int j = 0; j < 32; ++j) {
        const float xs = xb[j] * id;
        q[j] = trunc_clamped(xs + 16.5f, 0, 31);
      }
      pack_q5(q, dst + offsetof(block_q5_0, qs), dst + offsetof(block_q5_0, qh));
    });
  }
};

// Q5_1 (type 7): x = d * q + m.
template <>
struct FormatTraits<FormatId::kQ5_1> : GgmlBlockBase<32, sizeof(block_q5_1)> {
  static constexpr int ggml_type = 7;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q5_1, d));
    const float m = load_f16(b + offsetof(block_q5_1, m));
    const uint32_t qh = load_u32(b + offsetof(block_q5_1, qh));
    const uint8_t* qs = b + offsetof(block_q5_1, qs);
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(q5_code(qs, qh, j)) + m;
  }

  // ggml's quantize_row_q5_1_ref: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5).
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    if (p.importance != nullptr)
      return quantize_weighted_rows<FormatTraits>("q5_1", x, rows, cols, p, out, quantize_row_q5_1_weighted);
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, [](const float* xb, uint8_t* dst) {
      float min, max;
      min_max(xb, 32, &min, &max);
      const float d = (max - min) / 31.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      store_f16(dst + offsetof(block_q5_1, d), d);
      store_f16(dst + offsetof(block_q5_1, m), min);
      int q[32];
      for (int j = 0; j < 32; ++j) {
        const float xs = (xb[j] - min) * id;
        q[j] = trunc_clamped(xs + 0.5f, 0, 31);
      }
      pack_q5(q, dst + offsetof(block_q5_1, qs), dst + offsetof(block_q5_1, qh));
    });
  }
};

// ggml's quantize_row_q8_0_ref for one block of 32: d = amax/127, q = round(x/d). Also what a q8_0 KV cache
// stores per 32 elements of a row (the CUDA kernel repeats this arithmetic, kernels/attention/kv_element.cuh).
inline void quantize_q8_0_block(const float* xb, uint8_t* dst) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_f16(dst + offsetof(block_q8_0, d), d);
  uint8_t* qs = dst + offsetof(block_q8_0, qs);
  for (int j = 0; j < 32; ++j) qs[j] = static_cast<uint8_t>(round_to_i8(xb[j] * id));
}

QRT_HD void decode_q8_0_block(const uint8_t* b, float* out) {
  const float d = load_f16(b + offsetof(block_q8_0, d));
  const uint8_t* qs = b + offsetof(block_q8_0, qs);
  for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(static_cast<int8_t>(qs[j]));
}

// Q8_0 (type 8): x = d * q.
template <>
struct FormatTraits<FormatId::kQ8_0> : GgmlBlockBase<32, sizeof(block_q8_0)> {
  static constexpr int ggml_type = 8;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    decode_q8_0_block(block_ptr(v, row, block), out);
  }

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, quantize_q8_0_block);
  }
};

// Q8_1 (type 9): x = d * q; s is not needed to decode.
template <>
struct FormatTraits<FormatId::kQ8_1> : GgmlBlockBase<32, sizeof(block_q8_1)> {
  static constexpr int ggml_type = 9;
  static constexpr bool has_quantizer = true;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q8_1, d));
    const uint8_t* qs = b + offsetof(block_q8_1, qs);
    for (int j = 0; j < 32; ++j) out[j] = d * static_cast<float>(static_cast<int8_t>(qs[j]));
  }

  // ggml's quantize_row_q8_1_ref: Q8_0's codes plus s = d * sum(q) (the CPU convention, not CUDA's sum(x)).
  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_ggml_blocks<FormatTraits>(x, rows, cols, p, out, [](const float* xb, uint8_t* dst) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      store_f16(dst + offsetof(block_q8_1, d), d);
      uint8_t* qs = dst + offsetof(block_q8_1, qs);
      int sum = 0;
      for (int j = 0; j < 32; ++j) {
        const int8_t q = round_to_i8(xb[j] * id);
        qs[j] = static_cast<uint8_t>(q);
        sum += q;
      }
      store_f16(dst + offsetof(block_q8_1, s), static_cast<float>(sum) * d);
    });
  }
};

}  // namespace qrt::quant
