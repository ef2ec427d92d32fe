// Reference quantizers for the K-quants: ggml's quantize_row_{q2..q6,q8}_K_ref algorithms (the ones llama-quantize
// uses without an importance matrix), re-implemented from their published description.
//
// Byte-for-byte agreement with ggml needs the same float32 arithmetic in the same order, so every expression
// below keeps ggml's operand order (e.g. w * x * l is (w * x) * l) and the library is built without FMA
// contraction. Where ggml relies on C conversions (an int stored to a uint8_t wraps), the same conversions are
// written out explicitly. Input is finite (the driver in ggml_legacy.hpp checks).
#include "kernels/quant/ggml_kquants.hpp"

#include <cmath>
#include <cstring>

namespace qrt::quant::kquant_ref {
namespace {

constexpr int kQK = kSuperBlockElems;
// Below this magnitude a group counts as all zero.
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even. Adding 1.5 * 2^23 puts the rounded integer into the low mantissa bits; for
// |v| < 2^22 that is exactly rint(v), and outside that range it still yields some int without undefined
// behaviour (the reference uses the same trick, so even those cases agree).
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return static_cast<int>(bits & 0x007FFFFFu) - 0x00400000;
}

int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// The element of largest magnitude (first one on ties) and that magnitude.
void largest_magnitude(const float* x, int n, float* amax, float* max) {
  *amax = 0.0f;
  *max = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      *max = x[i];
    }
  }
}

// Symmetric codes with an x²-weighted least-squares scale (ggml's make_qx_quants, rmse_type 1, no importance
// weights). Tries 19 inverse scales around -nmax/max and keeps the one whose refitted scale explains most of
// the weighted signal. L[i] = code + nmax in 0 .. 2·nmax-1. Returns the scale (x ≈ scale · (L - nmax)).
float fit_symmetric_x2_weighted(int n, int nmax, const float* x, int8_t* L) {
  float amax, max;
  largest_magnitude(x, n, &amax, &max);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sumlx = suml2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      const float fl = static_cast<float>(l);
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = static_cast<int8_t>(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

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

// Asymmetric codes 0..nmax with x ≈ scale·L - min (ggml's make_qkx2_quants). Starts from the min/max range, then
// scans nstep+1 inverse scales (rmin + rdelta·k + nmax)/(max - min), solving the weighted least-squares scale and
// offset for each rounding and keeping the lowest weighted error (absolute when use_mad, else squared).
// Returns the scale; *neg_min receives -min (>= 0).
float fit_asymmetric(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min,
                     float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *neg_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
    L[i] = static_cast<uint8_t>(l);
    float diff = scale * static_cast<float>(l) + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  uint8_t trial[32];  // n <= 32
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
      trial[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      const float fl = static_cast<float>(l);
      sum_l += w * fl;
      sum_l2 += w * fl * fl;
      sum_xl += w * fl * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float error = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(trial[i]) + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        error += weights[i] * diff;
      }
      if (error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = trial[i];
        best_error = error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *neg_min = -min;
  return scale;
}

// Packs 2-bit codes L[256] the Q2_K/Q3_K way: byte 32h + l holds elements 128h + 32j + l at bits 2j.
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const uint8_t* e = L + 128 * h + l;
      qs[32 * h + l] = static_cast<uint8_t>(e[0] | (e[32] << 2) | (e[64] << 4) | (e[96] << 6));
    }
}

// Writes the 6-bit scales and mins of 8 sub-blocks in the Q4_K/Q5_K packing (inverse of k4_scale_min).
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

// The shared body of Q4_K and Q5_K: per-sub-block asymmetric fits, 6-bit scale/min indices relative to the
// largest, then codes requantized against the scales as stored. L: [256] codes 0..nmax.
void encode_k4_family(const float* x, int nmax, float rmin, float rdelta, int nstep, uint8_t* d_field,
                      uint8_t* dmin_field, uint8_t* scales, uint8_t* L) {
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
  uint8_t ls[8], lm[8];
  for (int k = 0; k < 8; ++k) {
    // As in the reference: the rounded index is stored to a byte (wrapping) before being capped at 63.
    const uint8_t s = static_cast<uint8_t>(nearest_int(inv_scale * sub_scales[k]));
    const uint8_t m = static_cast<uint8_t>(nearest_int(inv_min * sub_mins[k]));
    ls[k] = s < 63 ? s : 63;
    lm[k] = m < 63 ? m : 63;
  }
  pack_k4_scales(ls, lm, scales);
  store_f16(d_field, max_scale / 63.0f);
  store_f16(dmin_field, max_min / 63.0f);
  const float d_all = load_f16(d_field);
  const float dmin_all = load_f16(dmin_field);
  for (int k = 0; k < 8; ++k) {
    int sc, m;
    k4_scale_min(scales, k, &sc, &m);
    const float d = d_all * static_cast<float>(sc);
    if (d == 0.0f) continue;  // keeps the fit's codes, as the reference does
    const float dm = dmin_all * static_cast<float>(m);
    for (int l = 0; l < 32; ++l)
      L[32 * k + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[32 * k + l] + dm) / d), 0, nmax));
  }
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
  const float d_all = load_f16(d_field);
  const float dmin_all = load_f16(dmin_field);
  for (int s = 0; s < 16; ++s) {
    const float d = d_all * static_cast<float>(scales[s] & 0x0F);
    if (d == 0.0f) continue;  // keeps the fit's codes, as the reference does
    const float dm = dmin_all * static_cast<float>(scales[s] >> 4);
    for (int l = 0; l < 16; ++l)
      L[16 * s + l] = static_cast<uint8_t>(clamp_int(nearest_int((x[16 * s + l] + dm) / d), 0, 3));
  }
  pack_2bit(L, block + offsetof(block_q2_K, qs));
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
  uint8_t* scales = block + offsetof(block_q3_K, scales);
  uint8_t* d_field = block + offsetof(block_q3_K, d);
  std::memset(scales, 0, 12);
  if (max_scale != 0.0f) {
    const float iscale = -32.0f / max_scale;
    for (int s = 0; s < 16; ++s) {
      // The reference narrows the rounded index to int8 before clamping; |index| <= 32 here, so nothing wraps.
      int l = static_cast<int8_t>(nearest_int(iscale * sub_scales[s]));
      l = clamp_int(l, -32, 31) + 32;
      if (s < 8)
        scales[s] = static_cast<uint8_t>(l & 0x0F);
      else
        scales[s - 8] = static_cast<uint8_t>(scales[s - 8] | ((l & 0x0F) << 4));
      scales[8 + s % 4] = static_cast<uint8_t>(scales[8 + s % 4] | ((l >> 4) << (2 * (s / 4))));
    }
    store_f16(d_field, 1.0f / iscale);
  } else {
    store_f16(d_field, 0.0f);
  }
  const float d_all = load_f16(d_field);
  for (int s = 0; s < 16; ++s) {
    const float d = d_all * static_cast<float>(q3k_scale(scales, s));
    if (d == 0.0f) continue;  // keeps the fit's codes, as the reference does
    for (int l = 0; l < 16; ++l)
      L[16 * s + l] = static_cast<int8_t>(clamp_int(nearest_int(x[16 * s + l] / d), -4, 3) + 4);
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

void encode_q4_k(const float* x, uint8_t* block) {
  uint8_t L[kQK];
  encode_k4_family(x, 15, -1.0f, 0.1f, 20, block + offsetof(block_q4_K, d), block + offsetof(block_q4_K, dmin),
                   block + offsetof(block_q4_K, scales), L);
  uint8_t* qs = block + offsetof(block_q4_K, qs);
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l)
      qs[32 * p + l] = static_cast<uint8_t>(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
}

void encode_q5_k(const float* x, uint8_t* block) {
  uint8_t L[kQK];
  encode_k4_family(x, 31, -0.5f, 0.1f, 15, block + offsetof(block_q5_K, d), block + offsetof(block_q5_K, dmin),
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

void encode_q6_k(const float* x, uint8_t* block) {
  int8_t L[kQK];
  float sub_scales[16];
  float max_abs_scale = 0.0f, max_scale = 0.0f;
  for (int s = 0; s < 16; ++s) {
    sub_scales[s] = fit_symmetric_x2_weighted(16, 32, x + 16 * s, L + 16 * s);
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
