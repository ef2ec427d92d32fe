// ggml's importance-weighted quantizers (its quantize_row_*_impl given quant_weights) for Q4_0, Q4_1, Q5_0, Q5_1
// and Q2_K .. Q6_K, re-implemented from their description. See ggml_weighted_quantize.hpp for the contract.
//
// The scheme common to all of them: element j of a block gets the weight importance[j] · sqrt(sigma2 + x[j]²), so a
// column the model leans on costs more to get wrong, while sigma2 (a mean square, of the whole row for the legacy
// types, of the 256-element super-block for the K-quants) keeps small elements from being ignored outright. Those
// weights drive the same scale searches as the reference encoders (kquant_search.hpp); the K-quants then also pick
// their sub-block scale indices with a weighted search (each sub-block's weight sum) instead of scaling by the
// largest. Q6_K is the odd one out: it weights by the importance alone, without the sigma2 term.
//
// Bytes match ggml only with its float32 operations in its order and no FMA contraction; the expressions below keep
// ggml's operand order, and ints stored to bytes wrap where ggml's do. For a row whose squares overflow (|x| near
// 1e30) the weights become inf/NaN; the searches then run on those values exactly as ggml's do, so the (meaningless)
// bytes still agree.
#include "kernels/quant/ggml_weighted_quantize.hpp"

#include <cmath>
#include <cstddef>
#include <cstring>

#include "kernels/quant/ggml_kquants.hpp"
#include "kernels/quant/ggml_legacy.hpp"
#include "kernels/quant/kquant_search.hpp"

namespace qrt::quant {
namespace {

using kquant_search::fit_asymmetric;
using kquant_search::fit_positive;
using kquant_search::fit_symmetric;
using kquant_search::kGroupMaxEps;
using kquant_search::nearest_int;

constexpr int kQK = kSuperBlockElems;
constexpr int kLegacyBlock = 32;

// Σ x², accumulated in order in float32 as ggml does (a double or pairwise sum would change the weights' low bits).
float sum_of_squares(const float* x, int64_t n) {
  float sum = 0.0f;
  for (int64_t j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum;
}

// w[j] = importance[j] · sqrt(sigma2 + x[j]²) for j < n; returns Σ w in order (the K-quants' sub-block weight).
float spread_weights(const float* x, const float* importance, float sigma2, int n, float* w) {
  float sum = 0.0f;
  for (int j = 0; j < n; ++j) w[j] = importance[j] * std::sqrt(sigma2 + x[j] * x[j]);
  for (int j = 0; j < n; ++j) sum += w[j];
  return sum;
}


// Block i of a row of blocks of the given size.
uint8_t* block_at(uint8_t* dst, size_t block_bytes, int64_t i) { return dst + block_bytes * static_cast<size_t>(i); }

// The legacy types' shared loop: weights from the whole row's mean square, then encode(xb, weights, block) per block.
template <size_t BlockBytes, class EncodeBlock>
void quantize_legacy_row(const float* x, int64_t n, const float* importance, uint8_t* dst, EncodeBlock&& encode) {
  const float sigma2 = sum_of_squares(x, n) / static_cast<float>(n);
  float weights[kLegacyBlock];
  for (int64_t b = 0; b < n / kLegacyBlock; ++b) {
    const float* xb = x + kLegacyBlock * b;
    spread_weights(xb, importance + kLegacyBlock * b, sigma2, kLegacyBlock, weights);
    encode(xb, weights, block_at(dst, BlockBytes, b));
  }
}

// Nibble packing of Q4_0/Q4_1: element j low, element j + 16 high.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

void pack_five_bit(const uint8_t* L, uint8_t* qs, uint8_t* qh) {
  int codes[kLegacyBlock];
  for (int j = 0; j < kLegacyBlock; ++j) codes[j] = L[j];
  pack_q5(codes, qs, qh);
}

// Symmetric legacy block (Q4_0: nmax 8, Q5_0: nmax 16): codes L = q + nmax, d the fitted scale.
float fit_symmetric_block(const float* xb, const float* weights, int nmax, uint8_t* L) {
  int8_t codes[kLegacyBlock];
  const float d = fit_symmetric(kLegacyBlock, nmax, xb, weights, codes);
  for (int j = 0; j < kLegacyBlock; ++j) L[j] = static_cast<uint8_t>(codes[j]);
  return d;
}

// Asymmetric legacy block (Q4_1: nmax 15, Q5_1: nmax 31) with ggml's weighted search settings.
float fit_asymmetric_block(const float* xb, const float* weights, int nmax, uint8_t* L, float* neg_min) {
  return fit_asymmetric(kLegacyBlock, nmax, xb, weights, L, neg_min, -0.9f, 0.05f, 36, false);
}

// The K-quants' per-super-block mean square. Q2_K uses Σx²/256; Q3_K, Q4_K and Q5_K twice that (as in ggml).
float superblock_sigma2(const float* x, float factor) {
  return factor * sum_of_squares(x, kQK) / static_cast<float>(kQK);
}

// Sub-block scale and min indices for Q4_K/Q5_K from the asymmetric fits of 8 sub-blocks of 32. fit_positive already
// caps indices at 63; only a negative rounding, wrapped through the byte, can exceed that. cap63 clamps such a byte
// to 63 as ggml's Q5_K does; its Q4_K packs it unclamped, so Q4_K passes false to keep the same bytes.
void fit_k4_weighted(const float* x, const float* importance, int nmax, bool cap63, uint8_t* ls, uint8_t* lm,
                     float* d, float* dmin, uint8_t* L) {
  const float sigma2 = superblock_sigma2(x, 2.0f);
  float weights[32], sub_weight[8], sub_scales[8], sub_mins[8];
  for (int k = 0; k < 8; ++k) {
    const float* xs = x + 32 * k;
    sub_weight[k] = spread_weights(xs, importance + 32 * k, sigma2, 32, weights);
    sub_scales[k] = fit_asymmetric(32, nmax, xs, weights, L + 32 * k, &sub_mins[k], -0.9f, 0.05f, 36, false);
  }
  *d = fit_positive(8, 63, sub_scales, sub_weight, ls);
  *dmin = fit_positive(8, 63, sub_mins, sub_weight, lm);
  if (cap63)
    for (int k = 0; k < 8; ++k) {
      if (ls[k] > 63) ls[k] = 63;
      if (lm[k] > 63) lm[k] = 63;
    }
}

}  // namespace

void quantize_row_q4_0_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  quantize_legacy_row<sizeof(block_q4_0)>(x, n, importance, dst, [](const float* xb, const float* w, uint8_t* b) {
    uint8_t L[kLegacyBlock];
    store_f16(b + offsetof(block_q4_0, d), fit_symmetric_block(xb, w, 8, L));
    pack_nibbles(L, b + offsetof(block_q4_0, qs));
  });
}

void quantize_row_q4_1_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  quantize_legacy_row<sizeof(block_q4_1)>(x, n, importance, dst, [](const float* xb, const float* w, uint8_t* b) {
    uint8_t L[kLegacyBlock];
    float neg_min;
    store_f16(b + offsetof(block_q4_1, d), fit_asymmetric_block(xb, w, 15, L, &neg_min));
    store_f16(b + offsetof(block_q4_1, m), -neg_min);
    pack_nibbles(L, b + offsetof(block_q4_1, qs));
  });
}

void quantize_row_q5_0_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  quantize_legacy_row<sizeof(block_q5_0)>(x, n, importance, dst, [](const float* xb, const float* w, uint8_t* b) {
    uint8_t L[kLegacyBlock];
    store_f16(b + offsetof(block_q5_0, d), fit_symmetric_block(xb, w, 16, L));
    pack_five_bit(L, b + offsetof(block_q5_0, qs), b + offsetof(block_q5_0, qh));
  });
}

void quantize_row_q5_1_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  quantize_legacy_row<sizeof(block_q5_1)>(x, n, importance, dst, [](const float* xb, const float* w, uint8_t* b) {
    uint8_t L[kLegacyBlock];
    float neg_min;
    store_f16(b + offsetof(block_q5_1, d), fit_asymmetric_block(xb, w, 31, L, &neg_min));
    store_f16(b + offsetof(block_q5_1, m), -neg_min);
    pack_five_bit(L, b + offsetof(block_q5_1, qs), b + offsetof(block_q5_1, qh));
  });
}

void quantize_row_q2_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  for (int64_t sb = 0; sb < n / kQK; ++sb) {
    const float* xb = x + kQK * sb;
    const float* qw = importance + kQK * sb;
    uint8_t* block = block_at(dst, sizeof(block_q2_K), sb);
    const float sigma2 = superblock_sigma2(xb, 1.0f);
    uint8_t L[kQK], ls[16], lm[16];
    float weights[16], sub_weight[16], sub_scales[16], sub_mins[16];
    for (int s = 0; s < 16; ++s) {
      const float* xs = xb + 16 * s;
      sub_weight[s] = spread_weights(xs, qw + 16 * s, sigma2, 16, weights);
      sub_scales[s] = fit_asymmetric(16, 3, xs, weights, L + 16 * s, &sub_mins[s], -0.9f, 0.05f, 36, false);
    }
    store_f16(block + offsetof(block_q2_K, d), fit_positive(16, 15, sub_scales, sub_weight, ls));
    store_f16(block + offsetof(block_q2_K, dmin), fit_positive(16, 15, sub_mins, sub_weight, lm));
    uint8_t* scales = block + offsetof(block_q2_K, scales);
    for (int s = 0; s < 16; ++s) scales[s] = static_cast<uint8_t>(ls[s] | (lm[s] << 4));
    kquant_search::finish_q2_k(xb, L, block);
  }
}

void quantize_row_q3_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  for (int64_t sb = 0; sb < n / kQK; ++sb) {
    const float* xb = x + kQK * sb;
    const float* qw = importance + kQK * sb;
    const float sigma2 = superblock_sigma2(xb, 2.0f);
    int8_t L[kQK], index[16];
    float weights[16], sub_weight[16], sub_scales[16];
    for (int s = 0; s < 16; ++s) {
      const float* xs = xb + 16 * s;
      sub_weight[s] = spread_weights(xs, qw + 16 * s, sigma2, 16, weights);
      sub_scales[s] = fit_symmetric(16, 4, xs, weights, L + 16 * s);
    }
    // The 6-bit signed scale indices come from the same symmetric search, run over the 16 sub-block scales.
    const float d = fit_symmetric(16, 32, sub_scales, sub_weight, index);
    uint8_t scale_index[16];
    for (int s = 0; s < 16; ++s) scale_index[s] = static_cast<uint8_t>(index[s]);
    kquant_search::finish_q3_k(xb, scale_index, d, L, block_at(dst, sizeof(block_q3_K), sb));
  }
}

void quantize_row_q4_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  for (int64_t sb = 0; sb < n / kQK; ++sb) {
    const float* xb = x + kQK * sb;
    uint8_t L[kQK], ls[8], lm[8];
    float d, dmin;
    fit_k4_weighted(xb, importance + kQK * sb, 15, false, ls, lm, &d, &dmin, L);
    kquant_search::finish_q4_k(xb, ls, lm, d, dmin, L, block_at(dst, sizeof(block_q4_K), sb));
  }
}

void quantize_row_q5_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  for (int64_t sb = 0; sb < n / kQK; ++sb) {
    const float* xb = x + kQK * sb;
    uint8_t L[kQK], ls[8], lm[8];
    float d, dmin;
    fit_k4_weighted(xb, importance + kQK * sb, 31, true, ls, lm, &d, &dmin, L);
    kquant_search::finish_q5_k(xb, ls, lm, d, dmin, L, block_at(dst, sizeof(block_q5_K), sb));
  }
}

void quantize_row_q6_k_weighted(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  for (int64_t sb = 0; sb < n / kQK; ++sb)
    kquant_search::encode_q6_k_weighted_by(x + kQK * sb, importance + kQK * sb, block_at(dst, sizeof(block_q6_K), sb));
}

}  // namespace qrt::quant
