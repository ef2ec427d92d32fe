// One warp-wide 16-bit tensor-core product, mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32
// (sm_80 and later): C[16, 8] += A[16, 16] · B[16, 8], products and sums in fp32. The fragments, per lane with
// g = lane / 4 and t = lane % 4 (the PTX ISA's "Matrix Fragments for mma.m16n8k16 with floating point type"), two
// 16-bit values per 32-bit register, the lower column (A) or row (B) in the low half:
//   A (row-major):    a[0] = A[g][2t, 2t+1]    a[1] = A[g+8][2t, 2t+1]
//                     a[2] = A[g][2t+8, 2t+9]  a[3] = A[g+8][2t+8, 2t+9]
//   B (column-major): b0 = B[2t, 2t+1][g]      b1 = B[2t+8, 2t+9][g]
//   C:                c[0] = C[g][2t]  c[1] = C[g][2t+1]  c[2] = C[g+8][2t]  c[3] = C[g+8][2t+1]
// Under the SIMT layer (QRT_SIMT) the product is computed from those definitions, the warp's fragments exchanged in
// one layer collective (simt::detail::warp_gather, where shuffles would take 32 rounds of the warp), so a kernel
// that places its values against this layout is checked on the CPU; only the instruction is left to a GPU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace qrt::kernels {

// The bits of a 16-bit float, and two of them in one register (lo in the low half).
template <class T>
__device__ __forceinline__ uint32_t bits16(T x) {
  static_assert(sizeof(T) == 2, "a 16-bit float type");
  uint16_t u;
  memcpy(&u, &x, 2);
  return u;
}
template <class T>
__device__ __forceinline__ uint32_t pack16x2(T lo, T hi) {
  return bits16(lo) | (bits16(hi) << 16);
}

#if defined(QRT_SIMT)
namespace mma_detail {
template <class T>
__device__ __forceinline__ float half_of(uint32_t word, int i) {
  const uint16_t u = static_cast<uint16_t>(word >> (16 * i));
  T x;
  memcpy(&x, &u, 2);
  return static_cast<float>(x);
}
// One lane's operands of an m16n8k16 product.
struct Fragments16 {
  uint32_t a[4];
  uint32_t b[2];
};
}  // namespace mma_detail
#endif

// T: __half or __nv_bfloat16 (A and B of one type).
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  static_assert(std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, "f16 or bf16 operands");
#if defined(QRT_SIMT)
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  // C[row][col] = Σ_k A[row][k] · B[k][col]. Lane 4g + q holds A's rows g and g + 8 at k = 2q, 2q + 1 (a[0], a[1])
  // and 8 + 2q, 9 + 2q (a[2], a[3]); lane 4n + q holds B's column n at the same k (b0, b1).
  const mma_detail::Fragments16 mine{{a[0], a[1], a[2], a[3]}, {b0, b1}};
  mma_detail::Fragments16 all[32];
  qrt::simt::detail::warp_gather(0xffffffffu, &mine, all, sizeof mine);
  for (int q = 0; q < 4; ++q) {
    uint32_t ra[4], rb[2][2];
    for (int r = 0; r < 4; ++r) ra[r] = all[4 * g + q].a[r];
    for (int e = 0; e < 2; ++e) {
      rb[e][0] = all[4 * (2 * t + e) + q].b[0];
      rb[e][1] = all[4 * (2 * t + e) + q].b[1];
    }
    for (int e = 0; e < 4; ++e) {
      const int row_half = e >> 1, col = e & 1;
      for (int i = 0; i < 2; ++i) {
        c[e] += mma_detail::half_of<T>(ra[row_half], i) * mma_detail::half_of<T>(rb[col][0], i);
        c[e] += mma_detail::half_of<T>(ra[2 + row_half], i) * mma_detail::half_of<T>(rb[col][1], i);
      }
    }
  }
#else
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 (sm_75 and later): four 8 × 8 matrices of 16-bit elements from
// shared memory, one instruction per warp. Lane l passes the address of row l % 8 of matrix l / 8 (16 bytes,
// 16-byte aligned); r[i] receives from matrix i, with g = lane / 4 and t = lane % 4,
//   plain:  M_i[g][2t, 2t+1]         (a B fragment of mma_16816 from a matrix stored one B column per row)
//   trans:  M_i[2t][g], M_i[2t+1][g] (a B fragment from a matrix stored one B row per row)
// each pair with the lower index in the low half, as mma_16816's fragments take them. Under the SIMT layer the rows'
// addresses meet in one warp gather and each lane reads its elements itself; a misaligned row traps, as on a GPU.
template <bool kTrans>
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(QRT_SIMT)
  if (reinterpret_cast<uintptr_t>(row) % 16 != 0) __trap();
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;
  const void* rows[32];
  qrt::simt::detail::warp_gather(0xffffffffu, &row, rows, sizeof row);
  for (int i = 0; i < 4; ++i) {
    if constexpr (kTrans) {
      const auto* lo = static_cast<const uint16_t*>(rows[8 * i + 2 * t]);
      const auto* hi = static_cast<const uint16_t*>(rows[8 * i + 2 * t + 1]);
      r[i] = static_cast<uint32_t>(lo[g]) | (static_cast<uint32_t>(hi[g]) << 16);
    } else {
      const auto* at = static_cast<const uint32_t*>(rows[8 * i + g]);
      r[i] = at[t];
    }
  }
#else
  const auto at = static_cast<uint32_t>(__cvta_generic_to_shared(row));
  if constexpr (kTrans) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(at));
  }
#endif
}

}  // namespace qrt::kernels
