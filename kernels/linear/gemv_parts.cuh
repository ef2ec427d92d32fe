// The device side of a GEMV launch over parts (gemv_batch.hpp's GemvPartGrid): which part a block works on, and
// that part's entry of a per-part array of the kernel's parameters, selected element by element so that the
// parameters stay in the constant bank (no dynamic index into them).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/gemv_batch.hpp"

namespace qrt::kernels {

// The last part whose first block is not past `block`.
__device__ __forceinline__ int gemv_part_of_block(const GemvPartGrid& g, int64_t block) {
  int k = 0;
#pragma unroll
  for (int j = 1; j < kGemvMaxParts; ++j)
    if (j < g.parts && block >= g.first_block[j]) k = j;
  return k;
}

template <class T>
__device__ __forceinline__ T gemv_part_value(int k, const T (&values)[kGemvMaxParts]) {
  static_assert(kGemvMaxParts == 3, "the selection names every part");
  return k == 0 ? values[0] : (k == 1 ? values[1] : values[2]);
}

}  // namespace qrt::kernels
