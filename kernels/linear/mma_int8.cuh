// One warp-wide int8 tensor-core product, mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 (sm_80 and later):
// C[16, 8] += A[16, 32] · B[32, 8] in exact int32. The fragments, per lane with g = lane / 4 and t = lane % 4 (the
// PTX ISA's "Matrix Fragments for mma.m16n8k32" with .s8 inputs), four int8 values per 32-bit register, the lowest
// byte first:
//   A (row-major):  a[0] = A[g][4t .. 4t+3]      a[1] = A[g+8][4t .. 4t+3]
//                   a[2] = A[g][16+4t .. 16+4t+3] a[3] = A[g+8][16+4t .. 16+4t+3]
//   B (column-major): b[0] = B[4t .. 4t+3][g]    b[1] = B[16+4t .. 16+4t+3][g]
//   C:              c[0] = C[g][2t]  c[1] = C[g][2t+1]  c[2] = C[g+8][2t]  c[3] = C[g+8][2t+1]
// Under the SIMT layer (QRT_SIMT) the same product is computed from those definitions, the warp's fragments
// exchanged in one layer collective (simt::detail::warp_gather), so a kernel that places its bytes against this
// layout is checked on the CPU; only the instruction itself is left to a GPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace qrt::kernels {

#if defined(QRT_SIMT)
namespace mma_detail {
__device__ __forceinline__ int sbyte(uint32_t word, int i) {
  return static_cast<int>(static_cast<int8_t>(static_cast<uint8_t>(word >> (8 * i))));
}
// One lane's operands of an m16n8k32 product.
struct Fragments {
  uint32_t a[4];
  uint32_t b[2];
};
}  // namespace mma_detail
#endif

__device__ __forceinline__ void mma_s8_16832(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(QRT_SIMT)
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  // C[row][col] = Σ_k A[row][k] · B[k][col]: A's row g lives in lanes 4g + q (a[0], a[2]) and row g + 8 in the same
  // lanes (a[1], a[3]); B's column n in lanes 4n + q, for k = 4q + i (first register) and 16 + 4q + i (second).
  // The warp's fragments meet in one layer collective (what 32 shuffles would give each lane).
  const mma_detail::Fragments mine{{a[0], a[1], a[2], a[3]}, {b0, b1}};
  mma_detail::Fragments all[32];
  qrt::simt::detail::warp_gather(0xffffffffu, &mine, all, sizeof mine);
  for (int q = 0; q < 4; ++q) {
    uint32_t ra[4], rb[2][2];
    for (int r = 0; r < 4; ++r) ra[r] = all[4 * g + q].a[r];
    for (int e = 0; e < 2; ++e) {
      rb[e][0] = all[4 * (2 * t + e) + q].b[0];
      rb[e][1] = all[4 * (2 * t + e) + q].b[1];
    }
    for (int e = 0; e < 4; ++e) {
      const int half = e >> 1, col = e & 1;
      for (int i = 0; i < 4; ++i) {
        c[e] += mma_detail::sbyte(ra[half], i) * mma_detail::sbyte(rb[col][0], i);
        c[e] += mma_detail::sbyte(ra[2 + half], i) * mma_detail::sbyte(rb[col][1], i);
      }
    }
  }
#else
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

}  // namespace qrt::kernels
