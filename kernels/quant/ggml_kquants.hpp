// GGML K-quants: 256-element super-blocks Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and the activation format Q8_K
// (spec/ggml.md §2.3). Block structs mirror the on-disk bytes; decoders read fields at their offsetof positions
// through the unaligned little-endian loads, because a super-block inside a tensor is only byte-aligned.
//
// Each output element is computed with the same float32 operations, in the same order, as ggml's
// dequantize_row_* and gguf-py's numpy dequantizers (sub-block scale first, d * sc, then times the code, then minus
// dmin * m), so the CPU decode is bit-exact against both. The reference quantizers (ggml's non-imatrix
// quantize_row_*_ref algorithms) live in ggml_kquants.cpp; they are host-only.
#pragma once

#include <cstddef>

#include "kernels/quant/format_list.hpp"
#include "kernels/quant/ggml_legacy.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

constexpr int kSuperBlockElems = 256;  // QK_K

// 16 sub-blocks of 16; element 128h + 32j + l has code (qs[32h + l] >> 2j) & 3 and scale byte
// scales[8h + 2j + l/16] = (4-bit min index << 4) | 4-bit scale index.
struct block_q2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;     // f16 super-scale of the scale indices
  uint16_t dmin;  // f16 super-scale of the min indices
};
static_assert(sizeof(block_q2_K) == 84, "Q2_K block is 84 bytes");

// 16 sub-blocks of 16 with 6-bit signed scales; a code's third bit lives in hmask (set = no -4 offset).
struct block_q3_K {
  uint8_t hmask[32];   // bit (i / 32) of hmask[i % 32] is element i's high bit
  uint8_t qs[64];      // low 2 bits, same placement as Q2_K
  uint8_t scales[12];  // 16 x 6 bits: low nibbles in bytes 0..7, high 2-bit pairs in bytes 8..11
  uint16_t d;          // f16 super-scale
};
static_assert(sizeof(block_q3_K) == 110, "Q3_K block is 110 bytes");

// 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed into 12 bytes.
struct block_q4_K {
  uint16_t d;           // f16 super-scale of the scales
  uint16_t dmin;        // f16 super-scale of the mins
  uint8_t scales[12];
  uint8_t qs[128];      // pair p: qs[32p + l] low nibble = element 64p + l, high nibble = element 64p + 32 + l
};
static_assert(sizeof(block_q4_K) == 144, "Q4_K block is 144 bytes");

struct block_q5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];   // as Q4_K
  uint8_t qh[32];       // fifth bits: bit 2p (low half of pair p) / 2p+1 (high half) of qh[l]
  uint8_t qs[128];      // as Q4_K
};
static_assert(sizeof(block_q5_K) == 176, "Q5_K block is 176 bytes");

// 16 sub-blocks of 16 with int8 scales; 6-bit codes split into a nibble (ql) and two high bits (qh).
struct block_q6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;  // f16 super-scale
};
static_assert(sizeof(block_q6_K) == 210, "Q6_K block is 210 bytes");

// ggml's CPU activation format: an f32 scale, int8 codes and per-16 code sums for dot products.
struct block_q8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};
static_assert(sizeof(block_q8_K) == 292, "Q8_K block is 292 bytes");

// Signed 6-bit scale s (0..15) of a Q3_K block, in -32..31.
QRT_HD int q3k_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? (scales[s] & 0x0F) : (scales[s - 8] >> 4);
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// 6-bit scale and min of sub-block k (0..7) of a Q4_K/Q5_K block. Bytes 0..3 hold scales 0..3 and the top two bits
// of scales 4..7, bytes 4..7 the mins likewise, bytes 8..11 the low nibbles of scale (low) and min (high) 4..7.
QRT_HD void k4_scale_min(const uint8_t* scales, int k, int* sc, int* m) {
  if (k < 4) {
    *sc = scales[k] & 63;
    *m = scales[k + 4] & 63;
  } else {
    *sc = (scales[k + 4] & 0x0F) | ((scales[k - 4] >> 6) << 4);
    *m = (scales[k + 4] >> 4) | ((scales[k] >> 6) << 4);
  }
}

// The host-only reference encoders of one super-block each: x: [256] finite floats, block: the format's bytes.
namespace kquant_ref {
void encode_q2_k(const float* x, uint8_t* block);
void encode_q3_k(const float* x, uint8_t* block);
void encode_q4_k(const float* x, uint8_t* block);
void encode_q5_k(const float* x, uint8_t* block);
void encode_q6_k(const float* x, uint8_t* block);
void encode_q8_k(const float* x, uint8_t* block);
}  // namespace kquant_ref

// Weighted: the importance-weighted row quantizer llama-quantize runs with an imatrix (nullptr for Q8_K, which
// ggml quantizes the same either way).
template <void (*Encode)(const float*, uint8_t*), int BlockBytes,
          void (*Weighted)(const float*, int64_t, const float*, uint8_t*) = nullptr>
struct KQuantBase : GgmlBlockBase<kSuperBlockElems, BlockBytes> {
  static constexpr bool has_quantizer = true;
  template <class Traits>
  static Status quantize_with(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    if constexpr (Weighted != nullptr)
      if (p.importance != nullptr)
        return quantize_weighted_rows<Traits>(Traits::kName, x, rows, cols, p, out, Weighted);
    return quantize_ggml_blocks<Traits>(x, rows, cols, p, out, [](const float* xb, uint8_t* dst) { Encode(xb, dst); });
  }
};

// Q2_K (type 10): x = (d * sc) * q - (dmin * m).
template <>
struct FormatTraits<FormatId::kQ2_K>
    : KQuantBase<kquant_ref::encode_q2_k, sizeof(block_q2_K), quantize_row_q2_k_weighted> {
  static constexpr const char* kName = "q2_k";
  static constexpr int ggml_type = 10;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q2_K, d));
    const float dmin = load_f16(b + offsetof(block_q2_K, dmin));
    const uint8_t* scales = b + offsetof(block_q2_K, scales);
    const uint8_t* qs = b + offsetof(block_q2_K, qs);
    for (int s = 0; s < 16; ++s) {  // sub-block s = 8h + 2j + half covers elements 128h + 32j + 16half + (0..15)
      const int h = s / 8, j = (s / 2) % 4, half = s % 2;
      const float dl = d * static_cast<float>(scales[s] & 0x0F);
      const float ml = dmin * static_cast<float>(scales[s] >> 4);
      const uint8_t* q = qs + 32 * h + 16 * half;
      float* o = out + 128 * h + 32 * j + 16 * half;
      for (int l = 0; l < 16; ++l) o[l] = dl * static_cast<float>((q[l] >> (2 * j)) & 3) - ml;
    }
  }

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_with<FormatTraits>(x, rows, cols, p, out);
  }
};

// Q3_K (type 11): x = (d * scale) * (q2 - (hbit ? 0 : 4)).
template <>
struct FormatTraits<FormatId::kQ3_K>
    : KQuantBase<kquant_ref::encode_q3_k, sizeof(block_q3_K), quantize_row_q3_k_weighted> {
  static constexpr const char* kName = "q3_k";
  static constexpr int ggml_type = 11;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q3_K, d));
    const uint8_t* hmask = b + offsetof(block_q3_K, hmask);
    const uint8_t* qs = b + offsetof(block_q3_K, qs);
    const uint8_t* scales = b + offsetof(block_q3_K, scales);
    for (int s = 0; s < 16; ++s) {
      const int h = s / 8, j = (s / 2) % 4, half = s % 2;
      const float dl = d * static_cast<float>(q3k_scale(scales, s));
      const int hshift = 4 * h + j;
      for (int l = 16 * half; l < 16 * half + 16; ++l) {
        const int q2 = (qs[32 * h + l] >> (2 * j)) & 3;
        const int offset = ((hmask[l] >> hshift) & 1) ? 0 : 4;
        out[128 * h + 32 * j + l] = dl * static_cast<float>(q2 - offset);
      }
    }
  }

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_with<FormatTraits>(x, rows, cols, p, out);
  }
};

// Q4_K (type 12): x = (d * sc) * q - (dmin * m).
template <>
struct FormatTraits<FormatId::kQ4_K>
    : KQuantBase<kquant_ref::encode_q4_k, sizeof(block_q4_K), quantize_row_q4_k_weighted> {
  static constexpr const char* kName = "q4_k";
  static constexpr int ggml_type = 12;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q4_K, d));
    const float dmin = load_f16(b + offsetof(block_q4_K, dmin));
    const uint8_t* scales = b + offsetof(block_q4_K, scales);
    const uint8_t* qs = b + offsetof(block_q4_K, qs);
    for (int k = 0; k < 8; ++k) {  // sub-block k: pair p = k/2, low nibbles when k is even
      int sc, m;
      k4_scale_min(scales, k, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (k / 2);
      const int shift = 4 * (k % 2);
      for (int l = 0; l < 32; ++l) out[32 * k + l] = dl * static_cast<float>((q[l] >> shift) & 0x0F) - ml;
    }
  }

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_with<FormatTraits>(x, rows, cols, p, out);
  }
};

// Q5_K (type 13): Q4_K with a fifth bit per code from qh.
template <>
struct FormatTraits<FormatId::kQ5_K>
    : KQuantBase<kquant_ref::encode_q5_k, sizeof(block_q5_K), quantize_row_q5_k_weighted> {
  static constexpr const char* kName = "q5_k";
  static constexpr int ggml_type = 13;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q5_K, d));
    const float dmin = load_f16(b + offsetof(block_q5_K, dmin));
    const uint8_t* scales = b + offsetof(block_q5_K, scales);
    const uint8_t* qh = b + offsetof(block_q5_K, qh);
    const uint8_t* qs = b + offsetof(block_q5_K, qs);
    for (int k = 0; k < 8; ++k) {  // k = 2p + half; the fifth bit of sub-block k is bit k of qh[l]
      int sc, m;
      k4_scale_min(scales, k, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      const uint8_t* q = qs + 32 * (k / 2);
      const int shift = 4 * (k % 2);
      for (int l = 0; l < 32; ++l) {
        const int code = ((q[l] >> shift) & 0x0F) | (((qh[l] >> k) & 1) << 4);
        out[32 * k + l] = dl * static_cast<float>(code) - ml;
      }
    }
  }

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_with<FormatTraits>(x, rows, cols, p, out);
  }
};

// Q6_K (type 14): x = (d * scale) * (q - 32).
template <>
struct FormatTraits<FormatId::kQ6_K>
    : KQuantBase<kquant_ref::encode_q6_k, sizeof(block_q6_K), quantize_row_q6_k_weighted> {
  static constexpr const char* kName = "q6_k";
  static constexpr int ggml_type = 14;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f16(b + offsetof(block_q6_K, d));
    const uint8_t* ql = b + offsetof(block_q6_K, ql);
    const uint8_t* qh = b + offsetof(block_q6_K, qh);
    const uint8_t* scales = b + offsetof(block_q6_K, scales);
    for (int s = 0; s < 16; ++s) {  // sub-block s = 8h + 2k + half covers elements 128h + 32k + 16half + (0..15)
      const int h = s / 8, k = (s / 2) % 4, half = s % 2;
      const float dl = d * static_cast<float>(static_cast<int8_t>(scales[s]));
      const uint8_t* lo = ql + 64 * h + 32 * (k & 1);
      const int lo_shift = k < 2 ? 0 : 4;
      for (int l = 16 * half; l < 16 * half + 16; ++l) {
        const int code = ((lo[l] >> lo_shift) & 0x0F) | (((qh[32 * h + l] >> (2 * k)) & 3) << 4);
        out[128 * h + 32 * k + l] = dl * static_cast<float>(code - 32);
      }
    }
  }

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_with<FormatTraits>(x, rows, cols, p, out);
  }
};

// Q8_K (type 15): x = d * q with an f32 d; bsums are only a dot-product aid.
template <>
struct FormatTraits<FormatId::kQ8_K> : KQuantBase<kquant_ref::encode_q8_k, sizeof(block_q8_K)> {
  static constexpr int ggml_type = 15;

  QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out) {
    const uint8_t* b = block_ptr(v, row, block);
    const float d = load_f32(b + offsetof(block_q8_K, d));
    const uint8_t* qs = b + offsetof(block_q8_K, qs);
    for (int j = 0; j < 256; ++j) out[j] = d * static_cast<float>(static_cast<int8_t>(qs[j]));
  }

  static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p, QuantBuffers* out) {
    return quantize_with<FormatTraits>(x, rows, cols, p, out);
  }
};

}  // namespace qrt::quant
