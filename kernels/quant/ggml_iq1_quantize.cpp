#include "kernels/quant/ggml_iq1_quantize.hpp"

#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/quant/common.hpp"
#include "kernels/quant/ggml_legacy.hpp"  // store_u16 / store_u32
#include "kernels/quant/kquant_search.hpp"
#include "kernels/quant/iq_grid_search.hpp"

namespace qrt::quant {
namespace {

constexpr int kSuperBlock = 256;     // QK_K
constexpr int kGroup = 8;            // values per grid point
constexpr float kDelta = 0.125f;     // the shift of the ternary levels (IQ1S_DELTA = IQ1M_DELTA)
constexpr float kZeroEpsS = 1e-12f;  // IQ1_S sub-blocks below this magnitude are stored as zero
constexpr float kZeroEpsM = 1e-7f;   // IQ1_M's threshold (ggml uses a different one per format)
constexpr float kFudgeS = 1.125f;    // ggml's empirical factors on the stored super-scale
constexpr float kFudgeM = 1.1125f;

// Reconstruction levels of the lattice codes 0, 1, 2 (-1, 0, +1) with the shift up or down.
constexpr float kUp[3] = {-1.0f + kDelta, kDelta, 1.0f + kDelta};
constexpr float kDown[3] = {-1.0f - kDelta, -kDelta, 1.0f - kDelta};

// The shared search tables (iq_grid_search.hpp): each grid point's codes, which lattice keys are on the grid, and
// the nearest grid points of those that are not, in ggml's order (distance, then index).
using Tables = iq_grid::GridSearchTables;

const Tables& iq1_tables() { return iq_grid::grid_search_tables(iq_grid::GridId::kIQ1_S); }

// ---- Helpers -----------------------------------------------------------------------------------------------------

using kquant_search::nearest_int;

// The maximum as ggml's MAX macro takes it: b unless a is strictly larger (which decides what a NaN does).
float max_of(float a, float b) { return a > b ? a : b; }

// Top-down merge sort of the indices a[0, len) by v[index]: first half len / 2, and the merge takes the left run's
// element unless it is strictly greater.
void merge_sort(const float* v, int* a, int* tmp, int len) {
  if (len <= 1) return;
  const int n1 = len / 2;
  merge_sort(v, a, tmp, n1);
  merge_sort(v, a + n1, tmp, len - n1);
  int i = 0, j = n1, k = 0;
  while (i < n1 && j < len) tmp[k++] = v[a[i]] > v[a[j]] ? a[j++] : a[i++];
  while (i < n1) tmp[k++] = a[i++];
  std::memcpy(a, tmp, sizeof(int) * static_cast<size_t>(k));  // the rest of the right run is already in place
}

// The n (<= 32) element indices of xb in increasing order of value. ggml sorts (value, index) pairs with qsort,
// which glibc runs as exactly the merge above for arrays this small. The order decides the codes of tied values
// and the rounding of the running sums, so the same merge is used: it orders ties (by index) and NaNs (never
// greater than anything) as ggml does, where another sort would not.
void sort_by_value(const float* xb, int* order, int n) {
  for (int i = 0; i < n; ++i) order[i] = i;
  int tmp[32];
  merge_sort(xb, order, tmp, n);
}

// Weights of one super-block: the caller's column importance times sqrt(sigma2 + x^2), sigma2 being twice the
// mean square of the super-block, so that both a value's size and the block's level count; without importance
// (IQ1_M only) x^2. ggml computes them per sub-block with the same formula, hence the same values.
void super_block_weights(const float* xbl, const float* qw, float* weight) {
  float sumx2 = 0.0f;
  for (int i = 0; i < kSuperBlock; ++i) sumx2 += xbl[i] * xbl[i];
  const float sigma2 = 2.0f * sumx2 / static_cast<float>(kSuperBlock);
  for (int i = 0; i < kSuperBlock; ++i) {
    weight[i] = qw != nullptr ? qw[i] * std::sqrt(sigma2 + xbl[i] * xbl[i]) : xbl[i] * xbl[i];
  }
}

float abs_max(const float* xb, int n) {
  float m = std::fabs(xb[0]);
  for (int i = 1; i < n; ++i) m = max_of(m, std::fabs(xb[i]));
  return m;
}

// Weighted squared error of grid point g for a group of 8: sum of w * (scale * level - x)^2.
float group_error(const Tables& t, int g, const float* xg, const float* wg, float scale, const float* levels) {
  float d2 = 0.0f;
  for (int j = 0; j < kGroup; ++j) {
    const float diff = scale * levels[t.levels[g][j]] - xg[j];
    d2 += wg[j] * diff * diff;
  }
  return d2;
}

// The grid point for a group whose codes are off the grid: the listed neighbour with the least error at the given
// scale (the first on ties). Only when no error is finite and below FLT_MAX does ggml scan the whole grid; its scan
// reads past the group's 8 values (an indexing slip, so its outcome there is not reproducible) and this one uses
// the group's own values. If that finds nothing either, ggml aborts: -1.
int best_neighbour(const Tables& t, uint32_t key, const float* xg, const float* wg, float scale, const float* levels) {
  float best = FLT_MAX;
  int found = -1;
  for (const uint16_t g : t.neighbours_of(key)) {
    const float d2 = group_error(t, g, xg, wg, scale, levels);
    if (d2 < best) {
      best = d2;
      found = g;
    }
  }
  if (found >= 0) return found;
  for (int g = 0; g < t.size; ++g) {
    const float d2 = group_error(t, g, xg, wg, scale, levels);
    if (d2 < best) {
      best = d2;
      found = g;
    }
  }
  return found;
}

// Least-squares scale of the chosen grid points, which replaces the search's scale once some group had to move off
// its ideal codes (unless it is not positive); levels_of(k) gives group k's shifted levels.
template <class LevelsOf>
float refit_scale(const Tables& t, const float* xb, const float* wb, const int* index, int groups, LevelsOf levels_of,
                  float scale) {
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int k = 0; k < groups; ++k) {
    const float* levels = levels_of(k);
    for (int j = 0; j < kGroup; ++j) {
      const float w = wb[kGroup * k + j], q = levels[t.levels[index[k]][j]];
      sumqx += w * q * xb[kGroup * k + j];
      sumq2 += w * q * q;
    }
  }
  return sumqx > 0.0f && sumq2 > 0.0f ? sumqx / sumq2 : scale;
}

// Codes of a split of the sorted values: the i1 smallest get code 0, the next i2 - i1 code 1, the rest code 2.
void codes_from_split(const int* order, int n, int i1, int i2, int8_t* L) {
  for (int j = 0; j < n; ++j) L[order[j]] = static_cast<int8_t>(j < i1 ? 0 : j < i2 ? 1 : 2);
}

// Mirrors the codes (c -> 2 - c): with a negative best scale the same reconstruction has the positive scale, the
// mirrored codes and the opposite shift.
void mirror_codes(int8_t* L, int n) {
  for (int j = 0; j < n; ++j) L[j] = static_cast<int8_t>(2 - L[j]);
}

// The grid index of each group of a sub-block's codes, searching the neighbours where a group is off the grid.
// Returns -1 where ggml aborts, otherwise whether every group was on the grid (0 or 1).
template <class LevelsOf>
int snap_to_grid(const Tables& t, const int8_t* L, const float* xb, const float* wb, int groups, float scale,
                 LevelsOf levels_of, int* index) {
  bool all_on_grid = true;
  for (int k = 0; k < groups; ++k) {
    const uint32_t key = iq_grid::lattice_key(L + kGroup * k);
    int g = t.grid_index(key);
    if (g < 0) {
      all_on_grid = false;
      g = best_neighbour(t, key, xb + kGroup * k, wb + kGroup * k, scale, levels_of(k));
      if (g < 0) return -1;
    }
    index[k] = g;
  }
  return all_on_grid ? 1 : 0;
}

// ---- IQ1_S -------------------------------------------------------------------------------------------------------

constexpr int kSubS = 32;  // values per IQ1_S sub-block: 4 groups, one scale, one shift

struct SubS {
  bool zero = true;  // stored as zeros: no codes and scale 0
  float scale = 0.0f;
  int shift = 1;  // +1: levels kUp, -1: kDown
  int index[kSubS / kGroup] = {};
};

// Exact weighted least squares over the codes, before the grid: with the values sorted, an optimal code assignment
// is a split into a low, a middle and a high run, so trying every split (i1, i2) with both shifts and keeping the
// largest sumqx^2 / sumq2 finds the best (scale, codes). Prefix sums make each split O(1). Then each group is
// snapped to the grid. Returns false where ggml aborts.
bool quantize_sub_s(const Tables& t, const float* xb, const float* wb, SubS* out) {
  *out = SubS{};
  const float amax = abs_max(xb, kSubS);
  if (amax < kZeroEpsS) return true;
  int order[kSubS];
  sort_by_value(xb, order, kSubS);
  float cx[kSubS + 1], cw[kSubS + 1];
  cx[0] = cw[0] = 0.0f;
  for (int j = 0; j < kSubS; ++j) {
    const int i = order[j];
    cx[j + 1] = cx[j] + wb[i] * xb[i];
    cw[j + 1] = cw[j] + wb[i];
  }
  float best = -FLT_MAX, scale = amax;
  int b1 = -1, b2 = -1, shift = 0;
  for (int i1 = 0; i1 <= kSubS; ++i1) {
    for (int i2 = i1; i2 <= kSubS; ++i2) {
      for (int s = 1; s >= -1; s -= 2) {  // the upward shift first: it wins ties
        const float* v = s == 1 ? kUp : kDown;
        // The first run's sums are cx[i1] - cx[0] in ggml; with cx[0] = +0 that is cx[i1] bit for bit.
        const float sumqx = cx[i1] * v[0] + (cx[i2] - cx[i1]) * v[1] + (cx[kSubS] - cx[i2]) * v[2];
        const float sumq2 = cw[i1] * v[0] * v[0] + (cw[i2] - cw[i1]) * v[1] * v[1] + (cw[kSubS] - cw[i2]) * v[2] * v[2];
        if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
          scale = sumqx / sumq2;
          best = scale * sumqx;
          b1 = i1;
          b2 = i2;
          shift = s;
        }
      }
    }
  }
  if (b1 < 0) return true;  // no split scored (the sums are not finite): stored as a zero sub-block
  int8_t L[kSubS];
  codes_from_split(order, kSubS, b1, b2, L);
  if (scale < 0.0f) {
    mirror_codes(L, kSubS);
    scale = -scale;
    shift = -shift;
  }
  const float* levels = shift == 1 ? kUp : kDown;
  const auto levels_of = [levels](int) { return levels; };
  const int on_grid = snap_to_grid(t, L, xb, wb, kSubS / kGroup, scale, levels_of, out->index);
  if (on_grid < 0) return false;
  if (on_grid == 0) scale = refit_scale(t, xb, wb, out->index, kSubS / kGroup, levels_of, scale);
  if (!(scale >= 0.0f)) return false;  // ggml asserts this; a NaN scale fails it
  out->zero = false;
  out->scale = scale;
  out->shift = shift;
  return true;
}

// Block layout: f16 d, qs[32] (low 8 bits of each group's index), then per sub-block a u16 qh: bits 3k..3k+2 the
// high index bits of group k, bits 12-14 the 3-bit scale l (sub-block scale d * (2l + 1)), bit 15 set for the
// downward shift.
bool quantize_block_s(const Tables& t, const float* xbl, const float* qw, uint8_t* block) {
  std::memset(block, 0, 50);
  float weight[kSuperBlock];
  super_block_weights(xbl, qw, weight);
  constexpr int kSubs = kSuperBlock / kSubS;
  SubS sub[kSubs];
  uint16_t qh[kSubs] = {};
  float max_scale = 0.0f;
  for (int ib = 0; ib < kSubs; ++ib) {
    if (!quantize_sub_s(t, xbl + kSubS * ib, weight + kSubS * ib, &sub[ib])) return false;
    if (sub[ib].zero) continue;
    for (int k = 0; k < kSubS / kGroup; ++k) {
      block[2 + 4 * ib + k] = static_cast<uint8_t>(sub[ib].index[k] & 0xFF);
      qh[ib] = static_cast<uint16_t>(qh[ib] | ((sub[ib].index[k] >> 8) << (3 * k)));
    }
    max_scale = max_of(max_scale, sub[ib].scale);
  }
  // Sub-block scales become odd multiples of d = max_scale / 15; an all-zero super-block keeps d = 0 and no scale
  // bits. Zero sub-blocks get the scale bits of scale 0 (shift up).
  if (max_scale != 0.0f) {
    const float d = max_scale / 15.0f;
    store_u16(block, f32_to_fp16(d * kFudgeS));
    const float id = 1.0f / d;
    for (int ib = 0; ib < kSubs; ++ib) {
      int l = nearest_int(0.5f * (id * sub[ib].scale - 1.0f));
      l = l < 0 ? 0 : (l > 7 ? 7 : l);
      if (sub[ib].shift == -1) l |= 8;
      qh[ib] = static_cast<uint16_t>(qh[ib] | (l << 12));
    }
  }
  for (int ib = 0; ib < kSubs; ++ib) store_u16(block + 34 + 2 * ib, qh[ib]);
  return true;
}

// ---- IQ1_M -------------------------------------------------------------------------------------------------------

constexpr int kSubM = 16;  // values per IQ1_M sub-block: 2 groups, one 3-bit scale, a shift per group

// A sub-block's shift pattern 0..3: bit 1 shifts group 0 down, bit 0 group 1. The search tries the patterns in
// this order (0 = both up, 3 = both down), which decides ties.
const float* levels_m(int pattern, int group) {
  const bool down = group == 0 ? (pattern & 2) != 0 : (pattern & 1) != 0;
  return down ? kDown : kUp;
}

struct SubM {
  bool zero = true;
  float scale = 0.0f;
  int pattern = 0;
  int index[kSubM / kGroup] = {};
};

// As quantize_sub_s, but each group of 8 has its own shift, so all 4 shift patterns are scored for each split.
// ggml accumulates the sums afresh for every split, in sorted order, so they are not prefix sums here either
// (those would round differently); only the per-element products, the same for every split, are computed once.
bool quantize_sub_m(const Tables& t, const float* xb, const float* wb, SubM* out) {
  *out = SubM{};
  const float amax = abs_max(xb, kSubM);
  if (amax < kZeroEpsM) return true;
  int order[kSubM];
  sort_by_value(xb, order, kSubM);
  // px[s][c][i] = w * level * x, p2[s][c][i] = w * level * level, for shift s (0 up, 1 down) and code c.
  float px[2][3][kSubM], p2[2][3][kSubM];
  for (int s = 0; s < 2; ++s) {
    const float* v = s == 0 ? kUp : kDown;
    for (int c = 0; c < 3; ++c) {
      for (int i = 0; i < kSubM; ++i) {
        px[s][c][i] = wb[i] * v[c] * xb[i];
        p2[s][c][i] = wb[i] * v[c] * v[c];
      }
    }
  }
  float best = -FLT_MAX, scale = amax;
  int b1 = -1, b2 = -1, pattern = -1;
  for (int i1 = 0; i1 <= kSubM; ++i1) {
    for (int i2 = i1; i2 <= kSubM; ++i2) {
      float sumqx[4] = {}, sumq2[4] = {};
      for (int j = 0; j < kSubM; ++j) {
        const int i = order[j], c = j < i1 ? 0 : j < i2 ? 1 : 2;
        for (int p = 0; p < 4; ++p) {
          const int s = levels_m(p, i / kGroup) == kDown ? 1 : 0;
          sumqx[p] += px[s][c][i];
          sumq2[p] += p2[s][c][i];
        }
      }
      for (int p = 0; p < 4; ++p) {
        if (sumq2[p] > 0.0f && sumqx[p] * sumqx[p] > best * sumq2[p]) {
          scale = sumqx[p] / sumq2[p];
          best = scale * sumqx[p];
          b1 = i1;
          b2 = i2;
          pattern = p;
        }
      }
    }
  }
  if (b1 < 0) return true;
  int8_t L[kSubM];
  codes_from_split(order, kSubM, b1, b2, L);
  if (scale < 0.0f) {  // mirroring flips both groups' shifts: pattern p becomes 3 - p
    mirror_codes(L, kSubM);
    scale = -scale;
    pattern = 3 - pattern;
  }
  const auto levels_of = [pattern](int k) { return levels_m(pattern, k); };
  const int on_grid = snap_to_grid(t, L, xb, wb, kSubM / kGroup, scale, levels_of, out->index);
  if (on_grid < 0) return false;
  if (on_grid == 0) scale = refit_scale(t, xb, wb, out->index, kSubM / kGroup, levels_of, scale);
  if (!(scale >= 0.0f)) return false;
  out->zero = false;
  out->scale = scale;
  out->pattern = pattern;
  return true;
}

// Block layout: qs[32] (low 8 bits of each group's index), qh[16] one byte per sub-block (low nibble group 0, high
// nibble group 1: 3 high index bits, bit 3 set for the downward shift), scales[8] as 4 u16 words holding four 3-bit
// sub-block scales each (bits 0-11) and one nibble of the f16 super-scale (bits 12-15, word 0 the lowest nibble).
bool quantize_block_m(const Tables& t, const float* xbl, const float* qw, uint8_t* block) {
  std::memset(block, 0, 56);
  float weight[kSuperBlock];
  super_block_weights(xbl, qw, weight);
  constexpr int kSubs = kSuperBlock / kSubM;
  SubM sub[kSubs];
  float max_scale = 0.0f;
  for (int ib = 0; ib < kSubs; ++ib) {
    if (!quantize_sub_m(t, xbl + kSubM * ib, weight + kSubM * ib, &sub[ib])) return false;
    if (sub[ib].zero) continue;
    block[2 * ib] = static_cast<uint8_t>(sub[ib].index[0] & 0xFF);
    block[2 * ib + 1] = static_cast<uint8_t>(sub[ib].index[1] & 0xFF);
    block[32 + ib] = static_cast<uint8_t>((sub[ib].index[0] >> 8) | ((sub[ib].index[1] >> 8) << 4));
    max_scale = max_of(max_scale, sub[ib].scale);
  }
  if (max_scale == 0.0f) return true;  // all-zero super-block: no scales, no shift bits, super-scale 0
  // 3-bit scales as odd multiples of max_scale / 15, then the super-scale is refitted by least squares over the
  // whole super-block's scaled levels. Zero sub-blocks take part with what is stored for them: grid point 0, both
  // shifts up, multiple 1.
  float d = max_scale / 15.0f;
  const float id = 1.0f / d;
  uint16_t words[4] = {};
  float sumqx = 0.0f, sumq2 = 0.0f;
  for (int ib = 0; ib < kSubs; ++ib) {
    int l = nearest_int(0.5f * (id * sub[ib].scale - 1.0f));
    l = l < 0 ? 0 : (l > 7 ? 7 : l);
    words[ib / 4] = static_cast<uint16_t>(words[ib / 4] | (l << (3 * (ib % 4))));
    const int pattern = sub[ib].pattern;
    block[32 + ib] = static_cast<uint8_t>(block[32 + ib] | ((pattern & 2) ? 0x08 : 0) | ((pattern & 1) ? 0x80 : 0));
    const float* xb = xbl + kSubM * ib;
    const float* wb = weight + kSubM * ib;
    const float mult = static_cast<float>(2 * l + 1);
    for (int k = 0; k < kSubM / kGroup; ++k) {
      const float* levels = levels_m(pattern, k);
      for (int j = 0; j < kGroup; ++j) {
        const float w = wb[kGroup * k + j], q = levels[t.levels[sub[ib].index[k]][j]] * mult;
        sumqx += w * q * xb[kGroup * k + j];
        sumq2 += w * q * q;
      }
    }
  }
  if (sumq2 > 0.0f) d = sumqx / sumq2;
  const uint16_t s = f32_to_fp16(d * kFudgeM);
  words[0] = static_cast<uint16_t>(words[0] | ((s & 0x000F) << 12));
  words[1] = static_cast<uint16_t>(words[1] | ((s & 0x00F0) << 8));
  words[2] = static_cast<uint16_t>(words[2] | ((s & 0x0F00) << 4));
  words[3] = static_cast<uint16_t>(words[3] | (s & 0xF000));
  for (int w = 0; w < 4; ++w) store_u16(block + 48 + 2 * w, words[w]);
  return true;
}

}  // namespace

bool quantize_row_iq1_s(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  const Tables& t = iq1_tables();
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    if (!quantize_block_s(t, x + kSuperBlock * b, importance + kSuperBlock * b, dst + 50 * b)) return false;
  }
  return true;
}

bool quantize_row_iq1_m(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  const Tables& t = iq1_tables();
  for (int64_t b = 0; b < n / kSuperBlock; ++b) {
    const float* qw = importance != nullptr ? importance + kSuperBlock * b : nullptr;
    if (!quantize_block_m(t, x + kSuperBlock * b, qw, dst + 56 * b)) return false;
  }
  return true;
}

}  // namespace qrt::quant
