#include "kernels/quant/iq_grid_search.hpp"

#include <algorithm>
#include <cfloat>
#include <cstdlib>
#include <iterator>

#include "kernels/quant/iquant_tables.hpp"

namespace qrt::quant::iq_grid {
namespace {

// The largest squared position distance: positions are 1..7, so each element contributes at most 6^2.
constexpr int kMaxDist2 = kGroupSize * 36;

// Levels of an IQ2 grid from qrt's magnitude form (byte j = |element j|): each grid uses three distinct magnitudes
// (0x08, 0x19, 0x2b) and a magnitude's level is its rank among them. Ranking rather than a fixed byte -> level
// table keeps this independent of the exact magnitudes; the result equals ggml's index tables point for point.
template <size_t N>
std::vector<std::array<int8_t, kGroupSize>> levels_from_magnitudes(const uint64_t (&grid)[N]) {
  std::vector<uint8_t> magnitudes;
  for (const uint64_t point : grid)
    for (int i = 0; i < kGroupSize; ++i) magnitudes.push_back(static_cast<uint8_t>(point >> (8 * i)));
  std::sort(magnitudes.begin(), magnitudes.end());
  magnitudes.erase(std::unique(magnitudes.begin(), magnitudes.end()), magnitudes.end());
  if (magnitudes.size() != 3) std::abort();  // the tables are generated; anything else is a corrupted build
  std::vector<std::array<int8_t, kGroupSize>> levels(N);
  for (size_t j = 0; j < N; ++j) {
    for (int i = 0; i < kGroupSize; ++i) {
      const uint8_t m = static_cast<uint8_t>(grid[j] >> (8 * i));
      levels[j][i] =
          static_cast<int8_t>(std::lower_bound(magnitudes.begin(), magnitudes.end(), m) - magnitudes.begin());
    }
  }
  return levels;
}

// Levels of the IQ1_S grid: nibble j already holds element j + 1, i.e. the level.
std::vector<std::array<int8_t, kGroupSize>> levels_iq1s() {
  const auto& grid = iq_tables::detail::iq1s_grid_host;
  std::vector<std::array<int8_t, kGroupSize>> levels(std::size(grid));
  for (size_t j = 0; j < std::size(grid); ++j)
    for (int i = 0; i < kGroupSize; ++i) levels[j][i] = static_cast<int8_t>((grid[j] >> (4 * i)) & 0xF);
  return levels;
}

GridSearchTables build(GridId id) {
  GridSearchTables t;
  switch (id) {
    case GridId::kIQ2_XXS:
      t.levels = levels_from_magnitudes(iq_tables::detail::iq2xxs_grid_host);
      t.nwant = 2;
      break;
    case GridId::kIQ2_XS:
      t.levels = levels_from_magnitudes(iq_tables::detail::iq2xs_grid_host);
      t.nwant = 2;
      break;
    case GridId::kIQ2_S:
      t.levels = levels_from_magnitudes(iq_tables::detail::iq2s_grid_host);
      t.nwant = 1;
      break;
    case GridId::kIQ1_S:
      t.levels = levels_iq1s();
      t.nwant = 3;
      break;
  }
  t.size = static_cast<int>(t.levels.size());

  t.map.assign(kLatticeSize, -1);
  for (int j = 0; j < t.size; ++j) t.map[lattice_key(t.levels[j].data())] = j;

  // Distances are small integers, so instead of sorting all grid points per key (as ggml does) we mark which
  // distances occur, take the nwant smallest, and emit points distance by distance in index order: the same list.
  std::vector<int> dist2(static_cast<size_t>(t.size));
  for (int key = 0; key < kLatticeSize; ++key) {
    if (t.map[key] >= 0) continue;
    int pos[kGroupSize];
    for (int i = 0; i < kGroupSize; ++i) pos[i] = 2 * ((key >> (2 * i)) & 3) + 1;
    bool present[kMaxDist2 + 1] = {};
    for (int j = 0; j < t.size; ++j) {
      int d2 = 0;
      for (int i = 0; i < kGroupSize; ++i) {
        const int diff = 2 * t.levels[j][i] + 1 - pos[i];
        d2 += diff * diff;
      }
      dist2[j] = d2;
      present[d2] = true;
    }
    const size_t offset = t.neighbours.size();
    t.neighbours.push_back(0);
    int kept = 0;
    for (int d = 0; d <= kMaxDist2 && kept < t.nwant; ++d) {
      if (!present[d]) continue;
      ++kept;
      for (int j = 0; j < t.size; ++j)
        if (dist2[j] == d) t.neighbours.push_back(static_cast<uint16_t>(j));
    }
    t.neighbours[offset] = static_cast<uint16_t>(t.neighbours.size() - offset - 1);
    t.map[key] = -static_cast<int32_t>(offset) - 1;
  }
  return t;
}

}  // namespace

const GridSearchTables& grid_search_tables(GridId id) {
  switch (id) {
    case GridId::kIQ2_XXS: {
      static const GridSearchTables tables = build(GridId::kIQ2_XXS);
      return tables;
    }
    case GridId::kIQ2_XS: {
      static const GridSearchTables tables = build(GridId::kIQ2_XS);
      return tables;
    }
    case GridId::kIQ2_S: {
      static const GridSearchTables tables = build(GridId::kIQ2_S);
      return tables;
    }
    case GridId::kIQ1_S:
      break;
  }
  static const GridSearchTables tables = build(GridId::kIQ1_S);
  return tables;
}

int find_best_neighbour_iq2(const GridSearchTables& tables, uint32_t key, const float* xval, const float* weight,
                            float scale, int8_t* L) {
  float best_d2 = FLT_MAX;
  int best = -1;
  for (const uint16_t j : tables.neighbours_of(key)) {
    const int8_t* lv = tables.levels[j].data();
    float d2 = 0.0f;
    for (int i = 0; i < kGroupSize; ++i) {
      const float q = static_cast<float>(2 * lv[i] + 1);
      const float diff = scale * q - xval[i];
      d2 += weight[i] * diff * diff;
    }
    // Strictly smaller: a NaN or infinite distance never qualifies, and the first of equal ones is kept.
    if (d2 < best_d2) {
      best_d2 = d2;
      best = j;
    }
  }
  if (best >= 0) std::copy_n(tables.levels[best].data(), kGroupSize, L);
  return best;
}

}  // namespace qrt::quant::iq_grid
