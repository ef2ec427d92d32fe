#include "kernels/quant/ggml_iq4_quantize.hpp"

#include <cmath>
#include <cstring>

#include "kernels/quant/common.hpp"
#include "kernels/quant/ggml_legacy.hpp"  // store_u16 / store_u32
#include "kernels/quant/kquant_search.hpp"
#include "kernels/quant/iquant_tables.hpp"

namespace qrt::quant {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // below this magnitude a sub-block counts as all zero
constexpr int kTrials = 7;              // trial scales (values[0] + t) / max for t in [-7, 7]

const int8_t* levels() { return iq_tables::detail::kvalues_iq4nl_host; }

using kquant_search::nearest_int;

// The level nearest to x by binary search over the 16 sorted levels; on a tie the upper one.
int nearest_level(float x) {
  const int8_t* v = levels();
  if (x <= v[0]) return 0;
  if (x >= v[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < v[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - v[hi - 1] < v[hi] - x ? hi - 1 : hi;
}

// The element weights of a block of n values (32 for IQ4_NL, 256 for IQ4_XS): x^2 without importance, else
// importance * sqrt(sigma2 + x^2), sigma2 being twice the mean square over the whole block (not just over each
// 32-element sub-block).
void element_weights(const float* x, int n, const float* importance, float* weight) {
  if (importance == nullptr) {
    for (int j = 0; j < n; ++j) weight[j] = x[j] * x[j];
    return;
  }
  float sigma2 = 0.0f;
  for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.0f / static_cast<float>(n);
  for (int j = 0; j < n; ++j) weight[j] = importance[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// The best scale of one 32-element sub-block under the given weights: first the least-squares scale for the codes
// that -max/values[0] gives, then each trial scale's codes and least-squares scale, keeping the one with the largest
// sumqx^2 / sumq2. Codes are written to L. Returns 0 for an all-zero sub-block.
float best_scale(const float* xb, const float* weight, uint8_t* L) {
  const int8_t* v = levels();
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const float ax = std::fabs(xb[j]);
    if (ax > amax) {
      amax = ax;
      max = xb[j];
    }
  }
  if (amax < kGroupMaxEps) return 0.0f;
  float d = -max / static_cast<float>(v[0]);
  float id = 1.0f / d;
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int j = 0; j < 32; ++j) {
    const int l = nearest_level(id * xb[j]);
    L[j] = static_cast<uint8_t>(l);
    const float q = static_cast<float>(v[l]), w = weight[j];
    sumqx += w * q * xb[j];
    sumq2 += w * q * q;
  }
  d = sumq2 > 0.0f ? sumqx / sumq2 : 0.0f;
  float best = d * sumqx;
  for (int t = -kTrials; t <= kTrials; ++t) {
    id = static_cast<float>(t + v[0]) / max;
    sumqx = sumq2 = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const float q = static_cast<float>(v[nearest_level(id * xb[j])]), w = weight[j];
      sumqx += w * q * xb[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// Nibbles as both formats store them: byte j of a sub-block holds code j (low) and code j + 16 (high).
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[16 + j] << 4));
}

void encode_iq4_nl(const float* x, const float* importance, uint8_t* block) {
  float weight[32];
  element_weights(x, 32, importance, weight);
  uint8_t L[32] = {};
  const float d = best_scale(x, weight, L);
  store_u16(block, f32_to_fp16(d));
  // The codes again for the chosen scale; an all-zero block gets the level nearest 0 everywhere, as in ggml.
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_level(id * x[j]));
  pack_nibbles(L, block + 2);
}

void encode_iq4_xs(const float* x, const float* importance, uint8_t* block) {
  float weight[256];
  element_weights(x, 256, importance, weight);
  float scales[8];
  uint8_t L[256] = {};
  float max_scale = 0.0f, amax_scale = 0.0f;
  for (int ib = 0; ib < 8; ++ib) {
    scales[ib] = best_scale(x + 32 * ib, weight + 32 * ib, L + 32 * ib);
    const float a = std::fabs(scales[ib]);
    if (a > amax_scale) {
      amax_scale = a;
      max_scale = scales[ib];
    }
  }
  // One f16 d for the super-block; each sub-block's scale becomes the 6-bit l in [-32, 31] with scale d * l.
  const float d = -max_scale / 32.0f;
  store_u16(block, f32_to_fp16(d));
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  uint16_t scales_h = 0;
  uint8_t scales_l[4] = {};
  for (int ib = 0; ib < 8; ++ib) {
    int l = nearest_int(id * scales[ib]);
    l = l < -32 ? -32 : (l > 31 ? 31 : l);
    const float dl = d * static_cast<float>(l);
    const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
    for (int j = 0; j < 32; ++j) L[32 * ib + j] = static_cast<uint8_t>(nearest_level(idl * x[32 * ib + j]));
    l += 32;
    scales_l[ib / 2] = static_cast<uint8_t>(scales_l[ib / 2] | ((l & 0xF) << (4 * (ib % 2))));
    scales_h = static_cast<uint16_t>(scales_h | ((l >> 4) << (2 * (ib % 8))));
  }
  store_u16(block + 2, scales_h);
  std::memcpy(block + 4, scales_l, 4);
  for (int ib = 0; ib < 8; ++ib) pack_nibbles(L + 32 * ib, block + 8 + 16 * ib);
}

}  // namespace

void quantize_iq4_nl_block(const float* x, uint8_t* block) { encode_iq4_nl(x, nullptr, block); }

void quantize_iq4_xs_block(const float* x, uint8_t* block) { encode_iq4_xs(x, nullptr, block); }

// The importance weights of a block are the row's columns it covers: ggml's sigma2 spans no more than the block.
void quantize_row_iq4_nl(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  constexpr int64_t kElems = 32, kBytes = 18;
  for (int64_t b = 0; b < n / kElems; ++b)
    encode_iq4_nl(x + kElems * b, importance != nullptr ? importance + kElems * b : nullptr, dst + kBytes * b);
}

void quantize_row_iq4_xs(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  constexpr int64_t kElems = 256, kBytes = 136;
  for (int64_t b = 0; b < n / kElems; ++b)
    encode_iq4_xs(x + kElems * b, importance != nullptr ? importance + kElems * b : nullptr, dst + kBytes * b);
}

}  // namespace qrt::quant
