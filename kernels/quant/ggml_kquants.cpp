// Reference quantizers for the K-quants: ggml's quantize_row_{q2..q6,q8}_K_ref algorithms (the ones llama-quantize
// uses without an importance matrix), re-implemented from their published description.
//
// Byte-for-byte agreement with ggml needs the same float32 arithmetic in the same order, so every expression
// below keeps ggml's operand order (e.g. w * x * l is (w * x) * l) and the library is built without FMA
// contraction. Where ggml relies on C conversions (an int stored to a uint8_t wraps), the same conversions are
// written out explicitly. Input is finite (the driver in ggml_legacy.hpp checks).
//
// The scale searches and the steps that finish a super-block once its scales are chosen are shared with the
// importance-weighted encoders (ggml_weighted_quantize.cpp) through kquant_search.hpp; the finishing steps and the
// Q6_K encoder are defined here.
#include "kernels/quant/ggml_kquants.hpp"

#include <cmath>
#include <cstring>

#include "kernels/quant/kquant_search.hpp"

namespace qrt::quant::kquant_search {
namespace {

constexpr int kQK = kSuperBlockElems;

// Packs 2-bit codes L[256] the Q2_K/Q3_K way: byte 32h + l holds elements 128h + 32j + l at bits 2j.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* e = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>(e[0] | (e[32] << 2) | (e[64] << 4) | (e[96] << 6));
    }
}

// Writes the 6-bit scales and mins of 8 sub-blocks in the Q4_K/Q5_K packing (inverse of k4_scale_min). Indices
// above 63 are packed as ggml packs them (their excess bits spill into neighbouring fields), not rejected.
void pack_k4_scales(const uint8_t* ls, const uint8_t* lm, uint8_t* scales) {
  for (int k = 0; k < 4; ++k) {
    scales[k] = ls[k];
    scales[k + 4] = lm[k];
  }
  for (int k = 4; k < 8; ++k) {
    scales[k + 4] = static_cast<uint8_t>((ls[k] & 0x0F) | ((lm[k] & 0x0F) << 4));
    scales[k - 4] = static_cast<uint8_t>(scales[k - 4] | ((ls[k] >> 4) << 6));
    scales[k] = static_cast<uint8_t>(scales[k] | ((lm[k] >> 4) << 6));
  }
}

// The header of a Q4_K/Q5_K block (packed indices, f16 super-scales) and its codes requantized against the scales
// as stored. L: [256] codes 0..nmax.
void finish_k4_header(const float* x, int nmax, const uint8_t* ls, const uint8_t* lm, float d, float dmin,
                      uint8_t* d_field, uint8_t* dmin_field, uint8_t* scales, uint8_t* L) {
  pack_k4_scales(ls, lm, scales);
  store_f16(d_field, d);
  store_f16(dmin_field, dmin);
  const float d_all = load_f16(d_field);
  const float dmin_all = load_f16(dmin_field);
  for (int k = 0; k < 8; ++k) {
    int sc, m;
    k4_scale_min(scales, k, &sc, &m);
    const float dk = d_all * static_cast<float>(sc);
    if (dk == 0.0f) continue;  // keeps the fit's codes, as the reference does
    const float dm = dmin_all * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      L[32 * k + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[32 * k + l] + dm) / dk), 0, nmax));
  }
}

}  // namespace

void finish_q2_k(const float* x, uint8_t* L, uint8_t* block) {
  const uint8_t* scales = block + offsetof(block_q2_K, scales);
  const float d_all = load_f16(block + offsetof(block_q2_K, d));
  const float dmin_all = load_f16(block + offsetof(block_q2_K, dmin));
  for (int s = 0; s < 16; ++s) {
    const float d = d_all * static_cast<float>(scales[s] & 0x0F);
    if (d == 0.0f) continue;  // keeps the fit's codes, as the reference does
    const float dm = dmin_all * static_cast<float>(scales[s] >> 4);
    for (int l = 0; l < 16; ++l)
      L[16 * s + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[16 * s + l] + dm) / d), 0, 3));
  }
  pack_2bit(L, block + offsetof(block_q2_K, qs));
}

void finish_q3_k(const float* x, const uint8_t* scale_index, float d, int8_t* L, uint8_t* block) {
  // Index s: low nibble in byte s (s < 8) or the high nibble of byte s - 8; its top two bits in byte 8 + s % 4 at
  // bit 2 * (s / 4).
  uint8_t* scales = block + offsetof(block_q3_K, scales);
  std::memset(scales, 0, 12);
  for (int s = 0; s < 16; ++s) {
    const int l = scale_index[s];
    if (s < 8)
      scales[s] = static_cast<uint8_t>(l & 0x0F);
    else
      scales[s - 8] = static_cast<uint8_t>(scales[s - 8] | ((l & 0x0F) << 4));
    scales[8 + s % 4] = static_cast<uint8_t>(scales[8 + s % 4] | ((l >> 4) << (2 * (s / 4))));
  }
  uint8_t* d_field = block + offsetof(block_q3_K, d);
  store_f16(d_field, d);
  const float d_all = load_f16(d_field);
  for (int s = 0; s < 16; ++s) {
    const float ds = d_all * static_cast<float>(q3k_scale(scales, s));
    if (ds == 0.0f) continue;  // keeps the fit's codes, as the reference does
    for (int l = 0; l < 16; ++l)
      L[16 * s + l] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * s + l] / ds), -4, 3) + 4);
  }
  // Codes 4..7 set their high bit; element i's bit is bit i/32 of hmask[i % 32].
  uint8_t* hmask = block + offsetof(block_q3_K, hmask);
  std::memset(hmask, 0, 32);
  uint8_t low[kQK];
  for (int i = 0; i < kQK; ++i) {
    int l = L[i];
    if (l > 3) {
      hmask[i % 32] = static_cast<uint8_t>(hmask[i % 32] | (1u << (i / 32)));
      l -= 4;
    }
    low[i] = static_cast<uint8_t>(l);
  }
  pack_2bit(low, block + offsetof(block_q3_K, qs));
}

void finish_q4_k(const float* x, const uint8_t* ls, const uint8_t* lm, float d, float dmin, uint8_t* L,
                 uint8_t* block) {
  finish_k4_header(x, 15, ls, lm, d, dmin, block + offsetof(block_q4_K, d), block + offsetof(block_q4_K, dmin),
                   block + offsetof(block_q4_K, scales), L);
  uint8_t* qs = block + offsetof(block_q4_K, qs);
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l)
      qs[32 * p + l] = static_cast<uint8_t>(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
}

void finish_q5_k(const float* x, const uint8_t* ls, const uint8_t* lm, float d, float dmin, uint8_t* L,
                 uint8_t* block) {
  finish_k4_header(x, 31, ls, lm, d, dmin, block + offsetof(block_q5_K, d), block + offsetof(block_q5_K, dmin),
                   block + offsetof(block_q5_K, scales), L);
  uint8_t* qh = block + offsetof(block_q5_K, qh);
  uint8_t* qs = block + offsetof(block_q5_K, qs);
  std::memset(qh, 0, 32);
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l) {
      const int lo = L[64 * p + l], hi = L[64 * p + 32 + l];
      qh[l] = static_cast<uint8_t>(qh[l] | ((lo >> 4) << (2 * p)) | ((hi >> 4) << (2 * p + 1)));
      qs[32 * p + l] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
    }
}

void encode_q6_k_weighted_by(const float* x, const float* weights, uint8_t* block) {
  int8_t L[kQK];
  float sub_scales[16];
  float max_abs_scale = 0.0f, max_scale = 0.0f;
  for (int s = 0; s < 16; ++s) {
    sub_scales[s] = fit_symmetric(16, 32, x + 16 * s, weights != nullptr ? weights + 16 * s : nullptr, L + 16 * s);
    const float a = std::fabs(sub_scales[s]);
    if (a > max_abs_scale) {
      max_abs_scale = a;
      max_scale = sub_scales[s];
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(block, 0, sizeof(block_q6_K));
    return;
  }
  const float iscale = -128.0f / max_scale;
  uint8_t* d_field = block + offsetof(block_q6_K, d);
  uint8_t* scales = block + offsetof(block_q6_K, scales);
  store_f16(d_field, 1.0f / iscale);
  for (int s = 0; s < 16; ++s) {
    const int l = nearest_int(iscale * sub_scales[s]);
    scales[s] = static_cast<uint8_t>(static_cast<int8_t>(l < 127 ? l : 127));
  }
  const float d_all = load_f16(d_field);
  for (int s = 0; s < 16; ++s) {
    const float d = d_all * static_cast<float>(static_cast<int8_t>(scales[s]));
    if (d == 0.0f) continue;  // keeps the fit's codes, as the reference does
    for (int l = 0; l < 16; ++l)
      L[16 * s + l] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * s + l] / d), -32, 31) + 32);
  }
  // Element 128h + 32k + l: low nibble into ql[64h + 32(k&1) + l] (k < 2 low half, else high half),
  // high two bits into qh[32h + l] at bits 2k.
  uint8_t* ql = block + offsetof(block_q6_K, ql);
  uint8_t* qh = block + offsetof(block_q6_K, qh);
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const int8_t* e = L + 128 * h + l;
      ql[64 * h + l] = static_cast<uint8_t>((e[0] & 0x0F) | ((e[64] & 0x0F) << 4));
      ql[64 * h + 32 + l] = static_cast<uint8_t>((e[32] & 0x0F) | ((e[96] & 0x0F) << 4));
      qh[32 * h + l] =
          static_cast<uint8_t>((e[0] >> 4) | ((e[32] >> 4) << 2) | ((e[64] >> 4) << 4) | ((e[96] >> 4) << 6));
    }
}

}  // namespace qrt::quant::kquant_search

namespace qrt::quant::kquant_ref {
namespace {

using kquant_search::clamp_int;
using kquant_search::fit_asymmetric;
using kquant_search::kGroupMaxEps;
using kquant_search::largest_magnitude;
using kquant_search::nearest_int;

constexpr int kQK = kSuperBlockElems;

// Symmetric codes refined one element at a time (ggml's make_q3_quants with do_rmse): start from rounding at
// -nmax/max, then up to 5 passes that move single codes whenever that raises sumlx²/suml2 (weights x²).
// L[i] = code + nmax. Returns the least-squares scale.
float fit_symmetric_coordinate_descent(int n, int nmax, const float* x, int8_t* L) {
  float amax, max;
  largest_magnitude(x, n, &amax, &max);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      if (slx > 0.0f) {
        float sl2 = suml2 - w * li * li;
        const int new_l = clamp_int(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (sl2 > 0.0f && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// The reference Q4_K/Q5_K search: per-sub-block asymmetric fits weighted by rms + |x|, then 6-bit scale and min
// indices relative to the largest of each. Fills L with the fit's codes.
void fit_k4_reference(const float* x, int nmax, float rmin, float rdelta, int nstep, uint8_t* ls, uint8_t* lm,
                      float* d, float* dmin, uint8_t* L) {
  float sub_scales[8], sub_mins[8];
  float weights[32];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int k = 0; k < 8; ++k) {
    const float* xs = x + 32 * k;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    sub_scales[k] = fit_asymmetric(32, nmax, xs, weights, L + 32 * k, &sub_mins[k], rmin, rdelta, nstep, false);
    if (sub_scales[k] > max_scale) max_scale = sub_scales[k];
    if (sub_mins[k] > max_min) max_min = sub_mins[k];
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  for (int k = 0; k < 8; ++k) {
    // As in the reference: the rounded index is stored to a byte (wrapping) before being capped at 63.
    const uint8_t s = static_cast<uint8_t>(nearest_int(inv_scale * sub_scales[k]));
    const uint8_t m = static_cast<uint8_t>(nearest_int(inv_min * sub_mins[k]));
    ls[k] = s < 63 ? s : 63;
    lm[k] = m < 63 ? m : 63;
  }
  *d = max_scale / 63.0f;
  *dmin = max_min / 63.0f;
}

}  // namespace

void encode_q2_k(const float* x, uint8_t* block) {
  uint8_t L[kQK];
  float sub_scales[16], sub_mins[16];
  float weights[16];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int s = 0; s < 16; ++s) {
    const float* xs = x + 16 * s;
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(xs[l]);
    sub_scales[s] = fit_asymmetric(16, 3, xs, weights, L + 16 * s, &sub_mins[s], -0.5f, 0.1f, 15, true);
    if (sub_scales[s] > max_scale) max_scale = sub_scales[s];
    if (sub_mins[s] > max_min) max_min = sub_mins[s];
  }
  uint8_t* scales = block + offsetof(block_q2_K, scales);
  uint8_t* d_field = block + offsetof(block_q2_K, d);
  uint8_t* dmin_field = block + offsetof(block_q2_K, dmin);
  if (max_scale > 0.0f) {
    const float iscale = 15.0f / max_scale;
    for (int s = 0; s < 16; ++s) scales[s] = static_cast<uint8_t>(nearest_int(iscale * sub_scales[s]));
    store_f16(d_field, max_scale / 15.0f);
  } else {
    for (int s = 0; s < 16; ++s) scales[s] = 0;
    store_f16(d_field, 0.0f);
  }
  if (max_min > 0.0f) {
    const float iscale = 15.0f / max_min;
    for (int s = 0; s < 16; ++s)
      scales[s] = static_cast<uint8_t>(scales[s] | (nearest_int(iscale * sub_mins[s]) << 4));
    store_f16(dmin_field, max_min / 15.0f);
  } else {
    store_f16(dmin_field, 0.0f);
  }
  kquant_search::finish_q2_k(x, L, block);
}

void encode_q3_k(const float* x, uint8_t* block) {
  int8_t L[kQK];
  float sub_scales[16];
  float amax = 0.0f, max_scale = 0.0f;
  for (int s = 0; s < 16; ++s) {
    sub_scales[s] = fit_symmetric_coordinate_descent(16, 4, x + 16 * s, L + 16 * s);
    const float a = std::fabs(sub_scales[s]);
    if (a > amax) {
      amax = a;
      max_scale = sub_scales[s];
    }
  }
  // All-zero indices with d = 0 when every scale is zero: the bytes the reference leaves then.
  uint8_t index[16] = {};
  float d = 0.0f;
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int s = 0; s < 16; ++s) {
      // The reference narrows the rounded index to int8 before clamping; |index| <= 32 here, so nothing wraps.
      const int l = static_cast<int8_t>(nearest_int(iscale * sub_scales[s]));
      index[s] = static_cast<uint8_t>(clamp_int(l, -32, 31) + 32);
    }
    d = 1.0f / iscale;
  }
  kquant_search::finish_q3_k(x, index, d, L, block);
}

void encode_q4_k(const float* x, uint8_t* block) {
  uint8_t L[kQK], ls[8], lm[8];
  float d, dmin;
  fit_k4_reference(x, 15, -1.0f, 0.1f, 20, ls, lm, &d, &dmin, L);
  kquant_search::finish_q4_k(x, ls, lm, d, dmin, L, block);
}

void encode_q5_k(const float* x, uint8_t* block) {
  uint8_t L[kQK], ls[8], lm[8];
  float d, dmin;
  fit_k4_reference(x, 31, -0.5f, 0.1f, 15, ls, lm, &d, &dmin, L);
  kquant_search::finish_q5_k(x, ls, lm, d, dmin, L, block);
}

void encode_q6_k(const float* x, uint8_t* block) { kquant_search::encode_q6_k_weighted_by(x, nullptr, block); }

void encode_q8_k(const float* x, uint8_t* block) {
  std::memset(block, 0, sizeof(block_q8_K));
  float amax, max;
  largest_magnitude(x, kQK, &amax, &max);
  if (amax == 0.0f) return;  // d = 0, all codes and sums 0
  const float iscale = -127.0f / max;
  int8_t* qs = reinterpret_cast<int8_t*>(block + offsetof(block_q8_K, qs));
  for (int j = 0; j < kQK; ++j) {
    const int v = nearest_int(iscale * x[j]);
    qs[j] = static_cast<int8_t>(clamp_int(v, -128, 127));
  }
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += qs[16 * g + l];
    store_u16(block + offsetof(block_q8_K, bsums) + 2 * g, static_cast<uint16_t>(static_cast<int16_t>(sum)));
  }
  const float d = 1.0f / iscale;
  uint32_t bits;
  std::memcpy(&bits, &d, sizeof(bits));
  store_u32(block + offsetof(block_q8_K, d), bits);
}

}  // namespace qrt::quant::kquant_ref
