// Search tables for the lattice grids of the 2-bit and 1-bit i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S; IQ1_M
// uses IQ1_S's), as ggml's quantizers use them (ggml-quants.c, iq2xs_init_impl): host-only, built on first use,
// immutable afterwards and safe to share between threads (each is a function-local static).
//
// Levels and keys
//   Every grid point is a group of 8 elements, each at one of 3 levels l = 0, 1, 2 (IQ2: the magnitudes
//   0x08, 0x19, 0x2b of iquant_tables.hpp in increasing order; IQ1: the values -1, 0, +1, i.e. nibble j of
//   iq1s_grid). ggml reasons in "positions" 2 * l + 1 (1, 3, 5): IQ2 scales a position by the sub-block scale,
//   IQ1 uses l - 1 (or a per-level value xg[l]). The key of a group of 8 levels is
//       key = sum_i l_i << (2 * i)          (element 0 in the lowest two bits; lattice_key() below)
//   The lattice covers every key in [0, kLatticeSize): all groups with levels 0..2 (keys <= 0xAAAA), plus the
//   few keys below kLatticeSize that contain a level 3 (ggml's map size; those positions are 7).
//
// The map (GridSearchTables::map, kLatticeSize int32 entries)
//   map[key] >= 0 : the key is a grid point; the value is its index in the grid (the index the blocks store).
//   map[key] <  0 : off grid; -map[key] - 1 is the offset of its neighbour list in `neighbours`.
//
// Neighbour lists (GridSearchTables::neighbours, uint16)
//   At the offset: the count n (> 0), followed by n grid indices. They are all grid points whose squared
//   position distance sum_i (2 l_i + 1 - pos_i)^2 to the key is among the `nwant` smallest distinct distances
//   (nwant = 2 for IQ2_XXS and IQ2_XS, 1 for IQ2_S, 3 for IQ1_S), in increasing distance, ties by increasing grid
//   index: exactly ggml's order, which matters because its searches keep the first of equal candidates.
//   neighbours_of(key) returns that list without the count.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace qrt::quant::iq_grid {

inline constexpr int kGroupSize = 8;        // elements per grid point
inline constexpr int kLatticeSize = 43692;  // keys covered by the map (ggml's kmap_size)

enum class GridId { kIQ2_XXS, kIQ2_XS, kIQ2_S, kIQ1_S };

// Key of 8 levels (each 0..3). A key of levels 0..2 is always < kLatticeSize.
inline uint32_t lattice_key(const int8_t* levels) {
  uint32_t key = 0;
  for (int i = 0; i < kGroupSize; ++i) key |= static_cast<uint32_t>(levels[i] & 3) << (2 * i);
  return key;
}

struct GridSearchTables {
  int size = 0;                                        // number of grid points (256, 512, 1024, 2048)
  int nwant = 0;                                       // distinct distances kept per neighbour list
  std::vector<std::array<int8_t, kGroupSize>> levels;  // levels[j][i]: level (0..2) of element i of point j
  std::vector<int32_t> map;                            // kLatticeSize entries, see above
  std::vector<uint16_t> neighbours;                    // [count, index...] lists, see above

  // Grid index of an on-grid key, or -1 (off grid, or a key outside the lattice).
  int grid_index(uint32_t key) const {
    if (key >= static_cast<uint32_t>(kLatticeSize)) return -1;
    return map[key] >= 0 ? map[key] : -1;
  }
  // The neighbour list of an off-grid key (empty for an on-grid key or one outside the lattice).
  std::span<const uint16_t> neighbours_of(uint32_t key) const {
    if (key >= static_cast<uint32_t>(kLatticeSize) || map[key] >= 0) return {};
    const size_t offset = static_cast<size_t>(-(map[key] + 1));
    return {neighbours.data() + offset + 1, neighbours[offset]};
  }
};

// The tables of one grid, built on the first call (IQ1_S takes the longest, well under a second).
const GridSearchTables& grid_search_tables(GridId id);

// IQ2 best neighbour (ggml's iq2_find_best_neighbour): among the neighbours of the off-grid `key`, the grid point
// minimising sum_i weight[i] * (scale * (2 l_i + 1) - xval[i])^2 (float32, element order, first minimum wins).
// Writes its 8 levels to L and returns its index; returns -1 and leaves L alone where no candidate has a finite
// distance below FLT_MAX (ggml aborts there), or where the key has no neighbour list.
int find_best_neighbour_iq2(const GridSearchTables& tables, uint32_t key, const float* xval, const float* weight,
                            float scale, int8_t* L);

}  // namespace qrt::quant::iq_grid
