// IQ2_XXS / IQ2_XS / IQ2_S quantizers (see the header). All three fit each sub-block the same way: the elements'
// magnitudes are matched against a lattice grid of 8-element groups with levels 0..2 (positions 1, 3, 5 times a
// scale), trying a range of scales; groups that round off the grid snap to the nearest grid point by weighted
// distance (iq_grid_search.hpp). Signs are stored separately: IQ2_XXS and IQ2_XS store 7 sign bits per group
// (an even number of negatives, the 8th sign implied), IQ2_S all 8.
//
// Bit-exactness with ggml: every expression keeps ggml's operand order (w * x * q is (w * x) * q), nothing is
// contracted into FMAs (the library builds with -ffp-contract=off), max/min follow C's `a > b ? a : b` (which
// decides how a NaN propagates), and every place where ggml asserts or aborts makes the row fail instead.
#include "kernels/quant/ggml_iq2_quantize.hpp"

#include <cmath>
#include <cstring>

#include "kernels/quant/common.hpp"
#include "kernels/quant/ggml_legacy.hpp"  // store_u16 / store_u32
#include "kernels/quant/kquant_search.hpp"
#include "kernels/quant/iq_grid_search.hpp"

namespace qrt::quant {
namespace {

using iq_grid::GridSearchTables;
using iq_grid::kGroupSize;

constexpr int kSuperBlock = 256;
constexpr int kMaxLevel = 2;  // grid levels 0..2: positions 1, 3, 5
constexpr int kTopPosition = 2 * kMaxLevel + 1;
constexpr float kGroupMaxEps = 1e-15f;      // IQ2_XXS / IQ2_XS: below this a sub-block counts as all zero
constexpr float kGroupMaxEpsIq2s = 1e-8f;   // IQ2_S's threshold
constexpr float kIq2sScaleFudge = 0.9875f;  // IQ2_S stores d slightly smaller than the one its scales use

constexpr size_t kBlockBytesXxs = 66;
constexpr size_t kBlockBytesXs = 74;
constexpr size_t kBlockBytesS = 82;

using kquant_search::nearest_int;

// C's MAX / MIN macros: with a NaN operand the second one wins, as in ggml.
float max_of(float a, float b) { return a > b ? a : b; }
int clamp_level(int l) { return l < 0 ? 0 : (l > kMaxLevel ? kMaxLevel : l); }

// The grid level of value x for inverse scale id: x * id is a position, level = round((position - 1) / 2).
int level_for(float id, float x) { return clamp_level(nearest_int(0.5f * (id * x - 1.0f))); }

// Least-squares accumulation of codes against values: sumqx = sum w x q, sumq2 = sum w q q, q = 2 L + 1.
void accumulate(int n, const float* weight, const float* xval, const int8_t* L, float* sumqx, float* sumq2) {
  float sqx = 0.0f, sq2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float w = weight[i];
    const float q = static_cast<float>(2 * L[i] + 1);
    sqx += w * xval[i] * q;
    sq2 += w * q * q;
  }
  *sumqx = sqx;
  *sumq2 = sq2;
}

// ggml's make_qp_quants (kquant_search.hpp). IQ2_XXS uses it only to find the range of its scale search, so only the
// scale is kept.
float fit_positive_codes(int n, int nmax, const float* x, const float* weight) {
  uint8_t L[32];
  return kquant_search::fit_positive(n, nmax, x, weight, L);
}

// Levels of one group for inverse scale id, snapped onto the grid: an off-grid rounding takes its best neighbour
// at `scale` (weights `waux`, ggml's square-rooted weights). Returns false where no neighbour qualifies.
// *on_grid tells whether the rounding was on the grid already.
bool fit_group(const GridSearchTables& grid, float id, float scale, const float* xval, const float* waux, int8_t* L,
               bool* on_grid) {
  for (int i = 0; i < kGroupSize; ++i) L[i] = static_cast<int8_t>(level_for(id, xval[i]));
  const uint32_t key = iq_grid::lattice_key(L);
  *on_grid = grid.grid_index(key) >= 0;
  return *on_grid || iq_grid::find_best_neighbour_iq2(grid, key, xval, waux, scale, L) >= 0;
}

// Sign handling of IQ2_XXS / IQ2_XS: xval = |x| per element, the flipped elements as 7 sign bits. An odd number
// of negatives cannot be stored, so the element that costs least (smallest w x^2) keeps its wrong sign: its xval
// becomes negative, which the fit then accounts for.
uint8_t even_parity_signs(const float* xb, const float* weight, float* xval) {
  int nflip = 0;
  uint8_t s = 0;
  for (int i = 0; i < kGroupSize; ++i) {
    if (xb[i] >= 0) {
      xval[i] = xb[i];
    } else {
      xval[i] = -xb[i];
      ++nflip;
      s = static_cast<uint8_t>(s | (1u << i));
    }
  }
  if (nflip % 2) {
    int imin = 0;
    float min = weight[0] * xb[0] * xb[0];
    for (int i = 1; i < kGroupSize; ++i) {
      const float ax = weight[i] * xb[i] * xb[i];
      if (ax < min) {
        min = ax;
        imin = i;
      }
    }
    xval[imin] = -xval[imin];
    s = static_cast<uint8_t>(s ^ (1u << imin));
  }
  return static_cast<uint8_t>(s & 127);
}

// The 4-bit sub-block scale code: scale ~ d * (2 l + 1) with d = max_scale / 31.
uint8_t scale_code(float id, float scale) {
  const int l = nearest_int(0.5f * (id * scale - 1.0f));
  return static_cast<uint8_t>(l < 0 ? 0 : (l > 15 ? 15 : l));
}

// How a sub-block's fit ended: all zero (its words stay zero and its scale is 0), fitted, or where ggml aborts.
enum class Fit { kZero, kFitted, kFailed };

// ---- IQ2_XXS: 8 sub-blocks of 32 (4 groups), grid of 256 ------------------------------------------------------

// Fits one 32-element sub-block: levels in L, signs in signs[4], its scale in *scale_out. The search brackets the
// make_qp_quants scale with 13 trial scales, keeps the best sumqx^2 / sumq2, then re-rounds every group at the
// winning scale and refits the scale to the snapped levels.
Fit fit_subblock_xxs(const GridSearchTables& grid, const float* xb, const float* qw, float sigma2, int8_t* L,
                     uint8_t* signs, float* scale_out) {
  constexpr int kN = 32;
  float weight[kN], waux[kN], xval[kN];
  int8_t Laux[kN];
  for (int i = 0; i < kN; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
  for (int i = 0; i < kN; ++i) waux[i] = std::sqrt(weight[i]);
  for (int k = 0; k < 4; ++k) signs[k] = even_parity_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
  *scale_out = 0.0f;
  float max = xval[0];
  for (int i = 1; i < kN; ++i) max = max_of(max, xval[i]);
  if (max < kGroupMaxEps) return Fit::kZero;
  float scale = fit_positive_codes(kN, kMaxLevel + 2, xval, weight);
  const float eff_max = scale * static_cast<float>(kMaxLevel + 1);
  if (eff_max <= 0) return Fit::kZero;
  // Until a trial wins, L is not a valid grid point; the re-rounding below replaces it whenever scale > 0.
  std::memset(L, 0, kN);
  float best = 0.0f;
  bool on_grid;
  for (int t = -6; t <= 6; ++t) {
    const float id = (static_cast<float>(kTopPosition) + static_cast<float>(t) * 0.1f) / eff_max;
    const float this_scale = 1.0f / id;
    for (int k = 0; k < 4; ++k)
      if (!fit_group(grid, id, this_scale, xval + 8 * k, waux + 8 * k, Laux + 8 * k, &on_grid)) return Fit::kFailed;
    float sumqx, sumq2;
    accumulate(kN, weight, xval, Laux, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, Laux, kN);
    }
  }
  if (scale > 0) {
    const float id = 1.0f / scale;
    for (int k = 0; k < 4; ++k)
      if (!fit_group(grid, id, scale, xval + 8 * k, waux + 8 * k, L + 8 * k, &on_grid)) return Fit::kFailed;
    float sumqx, sumq2;
    accumulate(kN, weight, xval, L, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  if (scale < 0) {
    // Scales are stored unsigned: a negative fit flips every stored sign instead.
    scale = -scale;
    for (int k = 0; k < 4; ++k) signs[k] = static_cast<uint8_t>(~signs[k] & 127);
  }
  if (!(scale >= 0)) return Fit::kFailed;  // NaN: ggml's assertion
  *scale_out = scale;
  return Fit::kFitted;
}

bool quantize_block_xxs(const GridSearchTables& grid, const float* xbl, const float* qw, uint8_t* block) {
  uint32_t q2[16] = {};
  float scales[8];
  float max_scale = 0.0f;
  float sumx2 = 0.0f;
  for (int i = 0; i < kSuperBlock; ++i) sumx2 += xbl[i] * xbl[i];
  const float sigma2 = sumx2 / kSuperBlock;
  for (int ib = 0; ib < 8; ++ib) {
    int8_t L[32];
    uint8_t signs[4];
    const Fit fit = fit_subblock_xxs(grid, xbl + 32 * ib, qw + 32 * ib, sigma2, L, signs, &scales[ib]);
    if (fit == Fit::kFailed) return false;
    if (fit == Fit::kZero) continue;
    for (int k = 0; k < 4; ++k) {
      const int index = grid.grid_index(iq_grid::lattice_key(L + 8 * k));
      if (index < 0) return false;  // ggml: "found point not on grid"
      q2[2 * ib] |= static_cast<uint32_t>(index) << (8 * k);
      q2[2 * ib + 1] |= static_cast<uint32_t>(signs[k]) << (7 * k);
    }
    max_scale = max_of(max_scale, scales[ib]);
  }
  std::memset(block, 0, kBlockBytesXxs);
  if (!max_scale) return true;
  const float d = max_scale / 31;
  store_u16(block, f32_to_fp16(d));
  const float id = 1.0f / d;
  for (int ib = 0; ib < 8; ++ib) q2[2 * ib + 1] |= static_cast<uint32_t>(scale_code(id, scales[ib])) << 28;
  for (int w = 0; w < 16; ++w) store_u32(block + 2 + 4 * w, q2[w]);
  return true;
}

// ---- IQ2_XS and IQ2_S: 16 sub-blocks of 16 (2 groups), grids of 512 and 1024 ----------------------------------

// Fits one 16-element sub-block given its weights and magnitudes: 19 trial scales around max / 5 keep the best
// sumqx^2 / sumq2; groups that had to snap to a neighbour at the winning trial are re-rounded at the fitted scale
// (snapping again if needed) and the scale is refitted. Levels in L; *flip set where the scale came out negative.
Fit fit_subblock_16(const GridSearchTables& grid, const float* weight, const float* waux, const float* xval, float eps,
                    int8_t* L, float* scale_out, bool* flip) {
  constexpr int kN = 16;
  int8_t Laux[kN];
  bool on_grid[2] = {true, true};
  bool on_grid_aux[2];
  *scale_out = 0.0f;
  *flip = false;
  float max = xval[0];
  for (int i = 1; i < kN; ++i) max = max_of(max, xval[i]);
  std::memset(L, 0, kN);
  if (max < eps) return Fit::kZero;
  float best = 0.0f;
  float scale = max / kTopPosition;
  for (int t = -9; t <= 9; ++t) {
    const float id = (static_cast<float>(kTopPosition) + static_cast<float>(t) * 0.1f) / max;
    const float this_scale = 1.0f / id;
    for (int k = 0; k < 2; ++k)
      if (!fit_group(grid, id, this_scale, xval + 8 * k, waux + 8 * k, Laux + 8 * k, &on_grid_aux[k]))
        return Fit::kFailed;
    float sumqx, sumq2;
    accumulate(kN, weight, xval, Laux, &sumqx, &sumq2);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, Laux, kN);
      on_grid[0] = on_grid_aux[0];
      on_grid[1] = on_grid_aux[1];
    }
  }
  if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
    const float id = 1.0f / scale;
    bool unused;
    for (int k = 0; k < 2; ++k) {
      if (on_grid[k]) continue;
      if (!fit_group(grid, id, scale, xval + 8 * k, waux + 8 * k, L + 8 * k, &unused)) return Fit::kFailed;
    }
    float sumqx, sumq2;
    accumulate(kN, weight, xval, L, &sumqx, &sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  if (scale < 0) {
    scale = -scale;
    *flip = true;
  }
  if (!(scale >= 0)) return Fit::kFailed;  // NaN: ggml's assertion
  *scale_out = scale;
  return Fit::kFitted;
}

// Per-super-block driver shared by IQ2_XS and IQ2_S; the format-specific parts are the weights, the sign coding
// and the packing. Scales are returned for the 4-bit scale codes; *max_scale is their maximum.
struct SubBlock16 {
  int index[2];
  uint8_t signs[2];
};

template <typename Weights, typename Signs>
bool fit_super_block_16(const GridSearchTables& grid, const float* xbl, float eps, Weights make_weights,
                        Signs make_signs, SubBlock16* sub, bool* fitted, float* scales, float* max_scale) {
  *max_scale = 0.0f;
  for (int ib = 0; ib < 16; ++ib) {
    const float* xb = xbl + 16 * ib;
    float weight[16], waux[16], xval[16];
    make_weights(ib, xb, weight);
    for (int i = 0; i < 16; ++i) waux[i] = std::sqrt(weight[i]);
    for (int k = 0; k < 2; ++k) sub[ib].signs[k] = make_signs(xb + 8 * k, weight + 8 * k, xval + 8 * k);
    int8_t L[16];
    bool flip;
    const Fit fit = fit_subblock_16(grid, weight, waux, xval, eps, L, &scales[ib], &flip);
    if (fit == Fit::kFailed) return false;
    fitted[ib] = fit == Fit::kFitted;
    if (!fitted[ib]) continue;
    for (int k = 0; k < 2; ++k) {
      if (flip) sub[ib].signs[k] = static_cast<uint8_t>(~sub[ib].signs[k]);
      sub[ib].index[k] = grid.grid_index(iq_grid::lattice_key(L + 8 * k));
      if (sub[ib].index[k] < 0) return false;  // ggml: "found point not on grid"
    }
    *max_scale = max_of(*max_scale, scales[ib]);
  }
  return true;
}

// Two 4-bit scale codes per byte, even sub-block in the low nibble.
void pack_scale_codes(float d, const float* scales, uint8_t* out) {
  const float id = 1.0f / d;
  for (int ib = 0; ib < 16; ib += 2)
    out[ib / 2] = static_cast<uint8_t>(scale_code(id, scales[ib]) | (scale_code(id, scales[ib + 1]) << 4));
}

bool quantize_block_xs(const GridSearchTables& grid, const float* xbl, const float* qw, uint8_t* block) {
  float sumx2 = 0.0f;
  for (int i = 0; i < kSuperBlock; ++i) sumx2 += xbl[i] * xbl[i];
  const float sigma2 = sumx2 / kSuperBlock;
  const auto weights = [&](int ib, const float* xb, float* weight) {
    for (int i = 0; i < 16; ++i) weight[i] = qw[16 * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i]);
  };
  SubBlock16 sub[16];
  bool fitted[16];
  float scales[16], max_scale;
  if (!fit_super_block_16(grid, xbl, kGroupMaxEps, weights, even_parity_signs, sub, fitted, scales, &max_scale))
    return false;
  std::memset(block, 0, kBlockBytesXs);
  if (!max_scale) return true;
  const float d = max_scale / 31;
  store_u16(block, f32_to_fp16(d));
  for (int ib = 0; ib < 16; ++ib) {
    if (!fitted[ib]) continue;
    for (int k = 0; k < 2; ++k) {
      // The 7 sign bits are kept to 7 even when a negative scale flipped them (ggml's & 127).
      const uint16_t q = static_cast<uint16_t>(sub[ib].index[k] | ((sub[ib].signs[k] & 127) << 9));
      store_u16(block + 2 + 2 * (2 * ib + k), q);
    }
  }
  pack_scale_codes(d, scales, block + 2 + 64);
  return true;
}

// IQ2_S stores all 8 signs, so magnitudes are plain |x|.
uint8_t plain_signs(const float* xb, const float*, float* xval) {
  uint8_t s = 0;
  for (int i = 0; i < kGroupSize; ++i) {
    if (xb[i] >= 0) {
      xval[i] = xb[i];
    } else {
      xval[i] = -xb[i];
      s = static_cast<uint8_t>(s | (1u << i));
    }
  }
  return s;
}

bool quantize_block_s(const GridSearchTables& grid, const float* xbl, const float* qw, uint8_t* block) {
  float sumx2 = 0.0f;
  for (int i = 0; i < kSuperBlock; ++i) sumx2 += xbl[i] * xbl[i];
  const float sigma2 = 2 * sumx2 / kSuperBlock;
  const auto weights = [&](int ib, const float* xb, float* weight) {
    if (qw) {
      for (int i = 0; i < 16; ++i) weight[i] = qw[16 * ib + i] * std::sqrt(sigma2 + xb[i] * xb[i]);
    } else {
      for (int i = 0; i < 16; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
    }
  };
  SubBlock16 sub[16];
  bool fitted[16];
  float scales[16], max_scale;
  if (!fit_super_block_16(grid, xbl, kGroupMaxEpsIq2s, weights, plain_signs, sub, fitted, scales, &max_scale))
    return false;
  std::memset(block, 0, kBlockBytesS);
  uint8_t* qs = block + 2;       // [0, 32): low index bytes; [32, 64): sign bytes
  uint8_t* qh = block + 2 + 64;  // 2 high index bits per group
  for (int ib = 0; ib < 16; ++ib) {
    if (!fitted[ib]) continue;
    for (int k = 0; k < 2; ++k) {
      const int g = 2 * ib + k;
      qs[g] = static_cast<uint8_t>(sub[ib].index[k] & 255);
      qh[g / 4] = static_cast<uint8_t>(qh[g / 4] | ((sub[ib].index[k] >> 8) << (2 * (g % 4))));
      qs[32 + g] = sub[ib].signs[k];
    }
  }
  if (!max_scale) return true;  // unlike IQ2_XS, the indices and signs stay
  const float d = max_scale / 31;
  store_u16(block, f32_to_fp16(d * kIq2sScaleFudge));
  pack_scale_codes(d, scales, block + 2 + 64 + 8);
  return true;
}

// Runs one block quantizer over a row; a failed row is left all zero.
template <typename Block>
bool quantize_row(const float* x, int64_t n, const float* importance, uint8_t* dst, size_t block_bytes,
                  iq_grid::GridId id, Block quantize_block) {
  const GridSearchTables& grid = iq_grid::grid_search_tables(id);
  const int64_t nblocks = n / kSuperBlock;
  for (int64_t b = 0; b < nblocks; ++b) {
    const float* qw = importance ? importance + kSuperBlock * b : nullptr;
    if (!quantize_block(grid, x + kSuperBlock * b, qw, dst + block_bytes * b)) {
      std::memset(dst, 0, block_bytes * static_cast<size_t>(nblocks));
      return false;
    }
  }
  return true;
}

}  // namespace

bool quantize_row_iq2_xxs(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  return quantize_row(x, n, importance, dst, kBlockBytesXxs, iq_grid::GridId::kIQ2_XXS, quantize_block_xxs);
}

bool quantize_row_iq2_xs(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  return quantize_row(x, n, importance, dst, kBlockBytesXs, iq_grid::GridId::kIQ2_XS, quantize_block_xs);
}

bool quantize_row_iq2_s(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  return quantize_row(x, n, importance, dst, kBlockBytesS, iq_grid::GridId::kIQ2_S, quantize_block_s);
}

}  // namespace qrt::quant
