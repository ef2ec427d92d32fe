#include "kernels/quant/ggml_iq3_quantize.hpp"

#include <array>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "kernels/quant/common.hpp"
#include "kernels/quant/ggml_legacy.hpp"  // store_u16 / store_u32
#include "kernels/quant/kquant_search.hpp"
#include "kernels/quant/iquant_tables.hpp"

namespace qrt::quant {
namespace {

constexpr int kSuperBlock = 256;
constexpr int kSubBlock = 32;
constexpr int kSubBlocks = kSuperBlock / kSubBlock;
constexpr int kPointsPerSub = kSubBlock / 4;  // grid points (4 elements each) per sub-block
constexpr int kSignBytesPerSub = kSubBlock / 8;
constexpr int kTopLevel = 7;         // levels are 3 bits
constexpr int kCodeSpace = 1 << 12;  // every combination of 4 levels
constexpr float kTopOdd = 15.0f;     // 2 * kTopLevel + 1, the largest lattice value
constexpr int kScaleBits = 4;        // sub-block scale index in [0, 15]

constexpr size_t kXxsBlockBytes = 98;  // f16 d, 64 grid indices, 8 u32 of sign indices and scale
constexpr size_t kSBlockBytes = 110;   // f16 d, qs[64], qh[8], signs[32], scales[4]

// ---- The grids in level form ------------------------------------------------------------------------------------
// qrt stores each grid point as the magnitudes it decodes to (byte j = |element j|): 4, 12, ..., 52, 62 for IQ3_XXS
// and 1, 3, ..., 15 for IQ3_S. ggml searches both grids on one lattice, where a coordinate is a level l in [0, 8)
// standing for the odd value 2l + 1, and a point is its 4 levels packed 3 bits each (element j at bit 3j). Each grid
// uses exactly 8 magnitudes, and level l is the l-th smallest of them; the static_asserts below check that this gives
// every grid point its own code, and the recorded ggml vectors check the whole mapping.

template <size_t N>
constexpr std::array<int, 256> magnitude_levels(const uint32_t (&grid)[N]) {
  std::array<bool, 256> used{};
  for (size_t i = 0; i < N; ++i)
    for (int j = 0; j < 4; ++j) used[(grid[i] >> (8 * j)) & 0xFFu] = true;
  std::array<int, 256> level{};
  int next = 0;
  for (int m = 0; m < 256; ++m) level[m] = used[m] ? next++ : -1;
  return level;
}

template <size_t N>
constexpr int distinct_magnitudes(const uint32_t (&grid)[N]) {
  int count = 0;
  for (const int l : magnitude_levels(grid)) count += l >= 0 ? 1 : 0;
  return count;
}

template <size_t N>
constexpr std::array<uint16_t, N> level_codes(const uint32_t (&grid)[N]) {
  const std::array<int, 256> level = magnitude_levels(grid);
  std::array<uint16_t, N> codes{};
  for (size_t i = 0; i < N; ++i) {
    int code = 0;
    for (int j = 0; j < 4; ++j) code |= level[(grid[i] >> (8 * j)) & 0xFFu] << (3 * j);
    codes[i] = static_cast<uint16_t>(code);
  }
  return codes;
}

template <size_t N>
constexpr bool all_distinct(const std::array<uint16_t, N>& codes) {
  std::array<bool, kCodeSpace> seen{};
  for (const uint16_t c : codes) {
    if (seen[c]) return false;
    seen[c] = true;
  }
  return true;
}

constexpr std::array<uint16_t, 256> kXxsCodes = level_codes(iq_tables::detail::iq3xxs_grid_host);
constexpr std::array<uint16_t, 512> kSCodes = level_codes(iq_tables::detail::iq3s_grid_host);
static_assert(distinct_magnitudes(iq_tables::detail::iq3xxs_grid_host) == kTopLevel + 1, "IQ3_XXS: 8 magnitudes");
static_assert(distinct_magnitudes(iq_tables::detail::iq3s_grid_host) == kTopLevel + 1, "IQ3_S: 8 magnitudes");
static_assert(all_distinct(kXxsCodes) && all_distinct(kSCodes), "each grid point has its own level code");
static_assert(kXxsCodes[0] == 0 && kSCodes[0] == 0, "the search starts from point 0, all lowest levels");

int level_at(int code, int j) { return (code >> (3 * j)) & kTopLevel; }
float odd_value(int code, int j) { return static_cast<float>(2 * level_at(code, j) + 1); }

// ---- Lattice lookup ---------------------------------------------------------------------------------------------
// Which grid point a level code is, if any, and for each code off the grid the candidates the search may replace
// it with: every grid point at one of the `rings` smallest distinct squared distances from it, nearest first and by
// ascending index among equals. That order matters: nearest_neighbour keeps the first of equally good candidates.
// (Distances are in level units, a quarter of ggml's odd-value units: the same order.)
struct Lattice {
  std::vector<uint16_t> code;   // grid index -> level code
  std::vector<int16_t> index;   // level code -> grid index, or -1 off the grid
  std::vector<uint32_t> first;  // candidates of code u: near[first[u], first[u + 1])
  std::vector<uint16_t> near;
};

template <size_t N>
Lattice build_lattice(const std::array<uint16_t, N>& codes, int rings) {
  constexpr int kMaxDist = 4 * kTopLevel * kTopLevel;
  Lattice lat;
  lat.code.assign(codes.begin(), codes.end());
  lat.index.assign(kCodeSpace, -1);
  for (size_t i = 0; i < N; ++i) lat.index[codes[i]] = static_cast<int16_t>(i);
  lat.first.resize(kCodeSpace + 1);
  std::vector<int> dist(N);
  for (int u = 0; u < kCodeSpace; ++u) {
    lat.first[u] = static_cast<uint32_t>(lat.near.size());
    if (lat.index[u] >= 0) continue;
    std::array<int, kMaxDist + 1> count{};
    for (size_t i = 0; i < N; ++i) {
      int d2 = 0;
      for (int j = 0; j < 4; ++j) {
        const int diff = level_at(u, j) - level_at(codes[i], j);
        d2 += diff * diff;
      }
      dist[i] = d2;
      ++count[d2];
    }
    for (int d = 0, kept = 0; d <= kMaxDist && kept < rings; ++d) {
      if (count[d] == 0) continue;
      ++kept;
      for (size_t i = 0; i < N; ++i)
        if (dist[i] == d) lat.near.push_back(static_cast<uint16_t>(i));
    }
  }
  lat.first[kCodeSpace] = static_cast<uint32_t>(lat.near.size());
  return lat;
}

// ---- What differs between the two formats -----------------------------------------------------------------------
struct Variant {
  const Lattice* lattice;
  int trial_steps;   // trial inverse scales (15 + 0.2 t) / max for t in [-trial_steps, trial_steps]
  float zero_below;  // a sub-block whose largest |x| is below this is stored as zeros
  // IQ3_XXS stores 7 sign bits per 8 elements (the 8th is their parity), so each group of 8 must have an even
  // number of negatives: the least important element's sign is given up where it is odd.
  bool even_signs;
  // IQ3_XXS takes every grid point as on the grid until a trial scale says otherwise, and at the final scale
  // re-derives only those off it; IQ3_S starts from none on the grid and re-derives all of them.
  bool refine_off_grid_only;
};

const Variant& xxs_variant() {
  static const Lattice lattice = build_lattice(kXxsCodes, 2);
  static const Variant v{&lattice, 15, 1e-8f, true, true};
  return v;
}

const Variant& s_variant() {
  // zero_below is the smallest subnormal: IQ3_S skips only a sub-block that is exactly zero.
  static const Lattice lattice = build_lattice(kSCodes, 3);
  static const Variant v{&lattice, 9, FLT_TRUE_MIN, false, false};
  return v;
}

// ---- Search -----------------------------------------------------------------------------------------------------

using kquant_search::nearest_int;

int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// The level code of 4 magnitudes at inverse scale id: level l stands for 2l + 1, so l = round((id * x - 1) / 2).
int lattice_code(const float* xv, float id) {
  int code = 0;
  for (int j = 0; j < 4; ++j) code |= clamp_int(nearest_int(0.5f * (id * xv[j] - 1.0f)), 0, kTopLevel) << (3 * j);
  return code;
}

// Among the candidates of an off-grid code, the grid point closest to magnitudes xv in sum_j w_j (scale q_j - x_j)^2
// (sw: square roots of the weights), the first on ties. -1 when none compares below FLT_MAX (overflowed or NaN
// values), where ggml aborts.
int nearest_neighbour(const Lattice& lat, int code, const float* xv, const float* sw, float scale) {
  float best = FLT_MAX;
  int found = -1;
  for (uint32_t p = lat.first[code]; p < lat.first[code + 1]; ++p) {
    const int g = lat.near[p];
    float d2 = 0.0f;
    for (int j = 0; j < 4; ++j) {
      const float diff = scale * odd_value(lat.code[g], j) - xv[j];
      d2 += sw[j] * diff * diff;
    }
    if (d2 < best) {
      best = d2;
      found = g;
    }
  }
  return found;
}

// The grid point for 4 magnitudes at inverse scale id (scale = its inverse, for the neighbour distances): the
// rounded code where it is on the grid, else its nearest candidate. -1 where there is none.
int grid_point(const Lattice& lat, const float* xv, const float* sw, float id, float scale, bool* on_grid) {
  const int code = lattice_code(xv, id);
  *on_grid = lat.index[code] >= 0;
  return *on_grid ? lat.index[code] : nearest_neighbour(lat, code, xv, sw, scale);
}

// The weighted least-squares sums of magnitudes xv against lattice values 2l + 1 for the points' codes.
void lattice_sums(const Lattice& lat, const int* points, const float* xv, const float* weight, float* sumqx,
                  float* sumq2) {
  *sumqx = 0.0f;
  *sumq2 = 0.0f;
  for (int i = 0; i < kSubBlock; ++i) {
    const float q = odd_value(lat.code[points[i / 4]], i % 4);
    *sumqx += weight[i] * xv[i] * q;
    *sumq2 += weight[i] * q * q;
  }
}

struct SubBlockResult {
  bool skipped = false;  // all (near) zero: nothing is stored for it
  float scale = 0.0f;
  int points[kPointsPerSub] = {};
  uint8_t signs[kSignBytesPerSub] = {};  // per 8 elements: bit i set = element i negative (7 bits for IQ3_XXS)
};

// One 32-element sub-block: signs split off, then the grid points and scale found by trying inverse scales around
// 15 / max (magnitudes rounded to the lattice, off-grid points replaced by their nearest candidate) and keeping the
// trial with the largest sumqx^2 / sumq2; points off the grid are then re-derived at the chosen scale and the scale
// refit. weight: the 32 element weights. Returns false where ggml aborts.
bool quantize_sub_block(const Variant& v, const float* xb, const float* weight, SubBlockResult* r) {
  const Lattice& lat = *v.lattice;
  const uint8_t sign_mask = v.even_signs ? 0x7F : 0xFF;
  float sw[kSubBlock], xv[kSubBlock];
  for (int i = 0; i < kSubBlock; ++i) sw[i] = std::sqrt(weight[i]);
  for (int k = 0; k < kSignBytesPerSub; ++k) {
    const float* xg = xb + 8 * k;
    float* vg = xv + 8 * k;
    int negatives = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; ++i) {
      if (xg[i] >= 0.0f) {
        vg[i] = xg[i];
      } else {
        vg[i] = -xg[i];
        ++negatives;
        s = static_cast<uint8_t>(s | (1u << i));
      }
    }
    if (v.even_signs && negatives % 2 != 0) {
      // Give up the sign of the element with the smallest w x^2: it keeps its stored sign, so its magnitude is
      // negated instead (it then rounds to the lowest level).
      int imin = 0;
      float min = weight[8 * k] * xg[0] * xg[0];
      for (int i = 1; i < 8; ++i) {
        const float e = weight[8 * k + i] * xg[i] * xg[i];
        if (e < min) {
          min = e;
          imin = i;
        }
      }
      vg[imin] = -vg[imin];
      s = static_cast<uint8_t>(s ^ (1u << imin));
    }
    r->signs[k] = static_cast<uint8_t>(s & sign_mask);
  }
  float max = xv[0];
  for (int i = 1; i < kSubBlock; ++i) max = max > xv[i] ? max : xv[i];
  if (max < v.zero_below) {
    r->skipped = true;
    r->scale = 0.0f;
    return true;
  }

  // Points of the best trial so far; all at the lowest levels until a trial is accepted.
  int* points = r->points;
  for (int k = 0; k < kPointsPerSub; ++k) points[k] = lat.index[0];
  bool on_grid[kPointsPerSub], trial_on_grid[kPointsPerSub];
  for (bool& b : on_grid) b = v.refine_off_grid_only;
  float best = 0.0f, scale = max / kTopOdd;
  for (int t = -v.trial_steps; t <= v.trial_steps; ++t) {
    const float id = (kTopOdd + static_cast<float>(t) * 0.2f) / max;
    const float trial_scale = 1.0f / id;
    int trial[kPointsPerSub];
    for (int k = 0; k < kPointsPerSub; ++k) {
      trial[k] = grid_point(lat, xv + 4 * k, sw + 4 * k, id, trial_scale, &trial_on_grid[k]);
      if (trial[k] < 0) return false;
    }
    float sumqx, sumq2;
    lattice_sums(lat, trial, xv, weight, &sumqx, &sumq2);
    if (sumq2 > 0.0f && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(points, trial, sizeof(trial));
      std::memcpy(on_grid, trial_on_grid, sizeof(on_grid));
    }
  }

  bool any_off_grid = false;
  for (const bool b : on_grid) any_off_grid = any_off_grid || !b;
  if (any_off_grid && scale > 0.0f) {
    const float id = 1.0f / scale;
    for (int k = 0; k < kPointsPerSub; ++k) {
      if (v.refine_off_grid_only && on_grid[k]) continue;
      bool unused;
      points[k] = grid_point(lat, xv + 4 * k, sw + 4 * k, id, scale, &unused);
      if (points[k] < 0) return false;
    }
    float sumqx, sumq2;
    lattice_sums(lat, points, xv, weight, &sumqx, &sumq2);
    if (sumq2 > 0.0f) scale = sumqx / sumq2;
  }
  if (scale < 0.0f) {
    // Scales are stored unsigned: a negative fit is stored as its negation with every sign flipped.
    scale = -scale;
    for (uint8_t& s : r->signs) s = static_cast<uint8_t>(~s & sign_mask);
  }
  if (!(scale >= 0.0f)) return false;  // NaN
  r->scale = scale;
  return true;
}

// The super-block's element weights: x^2 without importance, else importance * sqrt(sigma2 + x^2) with sigma2
// twice the super-block's mean square.
void element_weights(const float* x, const float* importance, float* weight) {
  if (importance == nullptr) {
    for (int i = 0; i < kSuperBlock; ++i) weight[i] = x[i] * x[i];
    return;
  }
  float sumx2 = 0.0f;
  for (int i = 0; i < kSuperBlock; ++i) sumx2 += x[i] * x[i];
  const float sigma2 = 2.0f * sumx2 / static_cast<float>(kSuperBlock);
  for (int i = 0; i < kSuperBlock; ++i) weight[i] = importance[i] * std::sqrt(sigma2 + x[i] * x[i]);
}

// All sub-blocks of a super-block; false where ggml aborts.
bool quantize_sub_blocks(const Variant& v, const float* x, const float* importance, SubBlockResult* subs,
                         float* max_scale) {
  float weight[kSuperBlock];
  element_weights(x, importance, weight);
  *max_scale = 0.0f;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    if (!quantize_sub_block(v, x + kSubBlock * ib, weight + kSubBlock * ib, &subs[ib])) return false;
    *max_scale = *max_scale > subs[ib].scale ? *max_scale : subs[ib].scale;
  }
  return true;
}

// The 4-bit index l of a sub-block scale s, stored as d * (2l + 1) (before the format's fudge factor on d).
int scale_index(float id, float s) { return clamp_int(nearest_int(0.5f * (id * s - 1.0f)), 0, (1 << kScaleBits) - 1); }

bool encode_iq3_xxs(const float* x, const float* importance, uint8_t* block) {
  SubBlockResult subs[kSubBlocks];
  float max_scale;
  if (!quantize_sub_blocks(xxs_variant(), x, importance, subs, &max_scale)) return false;
  std::memset(block, 0, kXxsBlockBytes);
  if (max_scale == 0.0f) return true;  // all zero, d included
  const float d = max_scale / 31.0f;
  store_u16(block, f32_to_fp16(d * 1.0125f));  // ggml's fudge factor, a small measured gain
  const float id = 1.0f / d;
  uint8_t* indices = block + 2;
  uint8_t* words = block + 2 + kSubBlocks * kPointsPerSub;
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const SubBlockResult& s = subs[ib];
    uint32_t word = static_cast<uint32_t>(scale_index(id, s.scale)) << 28;
    if (!s.skipped) {  // a skipped sub-block keeps zero indices and signs
      for (int k = 0; k < kPointsPerSub; ++k) indices[kPointsPerSub * ib + k] = static_cast<uint8_t>(s.points[k]);
      for (int k = 0; k < kSignBytesPerSub; ++k) word |= static_cast<uint32_t>(s.signs[k]) << (7 * k);
    }
    store_u32(words + 4 * ib, word);
  }
  return true;
}

bool encode_iq3_s(const float* x, const float* importance, uint8_t* block) {
  SubBlockResult subs[kSubBlocks];
  float max_scale;
  if (!quantize_sub_blocks(s_variant(), x, importance, subs, &max_scale)) return false;
  std::memset(block, 0, kSBlockBytes);
  uint8_t* qs = block + 2;
  uint8_t* qh = qs + kSubBlocks * kPointsPerSub;
  uint8_t* signs = qh + kSubBlocks;
  uint8_t* scales = signs + kSubBlocks * kSignBytesPerSub;
  // Each sub-block's indices and signs go to its own slot. ggml (d99724f2) advances its qs and signs write
  // positions only past the sub-blocks it stores, so after an all-zero sub-block the later ones' low index bits and
  // signs land one slot early while their high bits (qh) stay: its blocks then decode wrongly. qrt writes the
  // layout the decoder reads instead, so its bytes differ from ggml's exactly for a super-block with some, but not
  // all, sub-blocks zero (tests/unit/ggml_quants: IQ3_S with a zero sub-block).
  for (int ib = 0; ib < kSubBlocks; ++ib) {
    const SubBlockResult& s = subs[ib];
    if (s.skipped) continue;
    for (int k = 0; k < kPointsPerSub; ++k) {
      qs[kPointsPerSub * ib + k] = static_cast<uint8_t>(s.points[k] & 0xFF);
      qh[ib] = static_cast<uint8_t>(qh[ib] | ((s.points[k] >> 8) << k));
    }
    std::memcpy(signs + kSignBytesPerSub * ib, s.signs, kSignBytesPerSub);
  }
  if (max_scale == 0.0f) return true;
  const float d = max_scale / 31.0f;
  store_u16(block, f32_to_fp16(d * 1.033f));  // ggml's fudge factor for this format
  const float id = 1.0f / d;
  for (int ib = 0; ib < kSubBlocks; ib += 2)
    scales[ib / 2] = static_cast<uint8_t>(scale_index(id, subs[ib].scale) | (scale_index(id, subs[ib + 1].scale) << 4));
  return true;
}

template <class Encode>
bool quantize_row(const float* x, int64_t n, const float* importance, uint8_t* dst, size_t block_bytes, Encode encode) {
  const int64_t blocks = n / kSuperBlock;
  for (int64_t b = 0; b < blocks; ++b) {
    const float* qw = importance != nullptr ? importance + kSuperBlock * b : nullptr;
    if (!encode(x + kSuperBlock * b, qw, dst + block_bytes * b)) {
      std::memset(dst, 0, block_bytes * static_cast<size_t>(blocks));
      return false;
    }
  }
  return true;
}

}  // namespace

bool quantize_row_iq3_xxs(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  return quantize_row(x, n, importance, dst, kXxsBlockBytes, encode_iq3_xxs);
}

bool quantize_row_iq3_s(const float* x, int64_t n, const float* importance, uint8_t* dst) {
  return quantize_row(x, n, importance, dst, kSBlockBytes, encode_iq3_s);
}

}  // namespace qrt::quant
