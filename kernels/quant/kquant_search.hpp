// Internal to the host-side GGML encoders: ggml_kquants.cpp (ggml's reference K-quant algorithms),
// ggml_weighted_quantize.cpp (its importance-weighted ones, legacy types included) and the i-quant quantizers
// (ggml_iq*_quantize.cpp). They pick codes with the same few scale searches and, once a K-quant super-block's scales
// are chosen, finish it the same way (requantize every code against the scales as stored, then pack), so those
// pieces live here rather than in each. Not part of the quant API.
//
// Byte-for-byte agreement with ggml needs its float32 operations in its order (w * x * l is (w * x) * l), no FMA
// contraction, and its C conversions (an int stored to a uint8_t wraps) written out explicitly.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace qrt::quant::kquant_search {

// Below this magnitude a group counts as all zero.
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even. Adding 1.5 * 2^23 puts the rounded integer into the low mantissa bits; for
// |v| < 2^22 that is exactly rint(v), and outside that range (or for NaN) it still yields some int without undefined
// behaviour. ggml uses the same trick, so even those cases agree.
inline int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  uint32_t bits;
  std::memcpy(&bits, &shifted, sizeof(bits));
  return static_cast<int>(bits & 0x007FFFFFu) - 0x00400000;
}

inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// The element of largest magnitude (first one on ties) and that magnitude.
inline void largest_magnitude(const float* x, int n, float* amax, float* max) {
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

// Codes 0..nmax for non-negative values x ≈ scale · L (ggml's make_qp_quants), used for the K-quants' sub-block
// scale and min indices. Tries 9 inverse scales around nmax/max by weighted squared error, then refines single codes
// for up to 5 passes while that raises the weighted fit (sumlx² / suml2). n <= 16. Returns the least-squares scale.
// Codes are stored through a byte, so a negative rounding (only possible for a negative input) wraps as in ggml,
// and the refinement reads the wrapped byte back, also as ggml does.
inline float fit_positive(int n, int nmax, const float* x, const float* weights, uint8_t* L) {
  float max = 0.0f;
  for (int i = 0; i < n; ++i) max = max > x[i] ? max : x[i];  // this form lets a NaN through, like ggml's MAX
  if (max < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = fnmax / max;
  for (int i = 0; i < n; ++i) L[i] = static_cast<uint8_t>(nearest_int(iscale * x[i]));
  const float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float diff = x[i] - scale * static_cast<float>(L[i]);
    best_error += weights[i] * diff * diff;
  }
  for (int step = -4; step <= 4; ++step) {
    if (step == 0) continue;
    const float trial_iscale = (0.1f * static_cast<float>(step) + fnmax) / max;
    const float trial_scale = 1.0f / trial_iscale;
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::min(nmax, nearest_int(trial_iscale * x[i]));
      const float diff = x[i] - trial_scale * static_cast<float>(l);
      error += weights[i] * diff * diff;
    }
    if (error < best_error) {
      best_error = error;
      iscale = trial_iscale;
    }
  }
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::min(nmax, nearest_int(iscale * x[i]));
    L[i] = static_cast<uint8_t>(l);
    const float w = weights[i];
    const float fl = static_cast<float>(l);  // the int, not the byte, enters these first sums
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  for (int pass = 0; pass < 5; ++pass) {
    int changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = weights[i];
      const float li = static_cast<float>(L[i]);
      float slx = sumlx - w * x[i] * li;
      float sl2 = suml2 - w * li * li;
      if (slx > 0.0f && sl2 > 0.0f) {
        const int new_l = std::min(nmax, nearest_int(x[i] * sl2 / slx));
        if (new_l != static_cast<int>(L[i])) {
          const float fl = static_cast<float>(new_l);
          slx += w * x[i] * fl;
          sl2 += w * fl * fl;
          if (slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<uint8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++changed;
          }
        }
      }
    }
    if (changed == 0) break;
  }
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Symmetric codes with a weighted least-squares scale (ggml's make_qx_quants, rmse_type 1). Tries 19 inverse scales
// around -nmax/max and keeps the one whose refitted scale explains most of the weighted signal. weights: n values,
// or null for ggml's default x². L[i] = code + nmax in 0 .. 2·nmax-1. Returns the scale (x ≈ scale · (L - nmax)).
inline float fit_symmetric(int n, int nmax, const float* x, const float* weights, int8_t* L) {
  float amax, max;
  largest_magnitude(x, n, &amax, &max);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  // The weight expression is evaluated where ggml does, so a null weights pointer reproduces its x² bit for bit.
  auto weight = [&](int i) { return weights != nullptr ? weights[i] : x[i] * x[i]; };
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0.0f, suml2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = weight(i);
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
      const float w = weight(i);
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

// Asymmetric codes 0..nmax with x ≈ scale·L - min (ggml's make_qkx2_quants, and make_qkx3_quants given weights: the
// two agree then). Starts from the min/max range, then scans nstep+1 inverse scales (rmin + rdelta·k + nmax)/(max -
// min), solving the weighted least-squares scale and offset for each rounding and keeping the lowest weighted error
// (absolute when use_mad, else squared). n <= 32, nstep >= 1. Returns the scale; *neg_min receives -min.
inline float fit_asymmetric(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* neg_min,
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
  uint8_t trial[32];
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

// Steps that finish a super-block once its scales are chosen; defined in ggml_kquants.cpp. x: the block's [256]
// inputs; L: [256] codes from the fits, overwritten with the requantized ones (sub-blocks whose stored scale is
// zero keep the fit's codes, as ggml does).

// Q2_K whose scales, d and dmin are already stored: requantize against them and pack.
void finish_q2_k(const float* x, uint8_t* L, uint8_t* block);
// Q3_K from 16 six-bit scale indices (stored scale + 32, 0..63) and the super-scale d: store, requantize, pack.
void finish_q3_k(const float* x, const uint8_t* scale_index, float d, int8_t* L, uint8_t* block);
// Q4_K / Q5_K from 8 scale and 8 min indices (bytes, packed as given even above 63) and their super-scales.
void finish_q4_k(const float* x, const uint8_t* ls, const uint8_t* lm, float d, float dmin, uint8_t* L,
                 uint8_t* block);
void finish_q5_k(const float* x, const uint8_t* ls, const uint8_t* lm, float d, float dmin, uint8_t* L,
                 uint8_t* block);
// All of Q6_K, whose only difference with an importance matrix is the sub-block fit's weights (null: x²).
void encode_q6_k_weighted_by(const float* x, const float* weights, uint8_t* block);

}  // namespace qrt::quant::kquant_search
