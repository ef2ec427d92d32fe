// The layer's integer SIMD intrinsics against values worked out by hand from the PTX ISA's definitions of dp4a
// (four byte products added to a 32-bit accumulator, bytes signed for the s32 form), vadd4 and vsub4 (per-byte sum
// and difference modulo 256) and from CUDA's for __byte_perm (3-bit byte selectors), run inside a kernel as qrt's
// GEMV kernels call them.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace qrt::simt::test {
namespace {

__global__ void integer_simd(int* out) {
  // bytes (low first) a = {1, -2, 3, -128}, b = {5, 6, -7, -1}: 5 - 12 - 21 + 128 = 100, plus c = 1000.
  out[0] = __dp4a(static_cast<int>(0x8003FE01u), static_cast<int>(0xFFF90605u), 1000);
  // unsigned: {1, 254, 3, 128} · {5, 6, 249, 255} = 5 + 1524 + 747 + 32640 = 34916.
  out[1] = static_cast<int>(__dp4a(0x8003FE01u, 0xFFF90605u, 0u));
  // the accumulator wraps: INT32_MAX + 127·127.
  out[2] = __dp4a(0x0000007F, 0x0000007F, 2147483647);
  // {0x10, 0x00, 0x3F, 0x20} - 0x20 per byte = {0xF0, 0xE0, 0x1F, 0x00}: no borrow crosses a byte.
  out[3] = static_cast<int>(__vsub4(0x203F0010u, 0x20202020u));
  // {0xFF, 0x01, 0xF8, 0x7F} + {0x01, 0xFF, 0x01, 0x01} per byte = {0x00, 0x00, 0xF9, 0x80}: no carry crosses a byte.
  out[4] = static_cast<int>(__vadd4(0x7FF801FFu, 0x0101FF01u));
  // {y, x} bytes 0..7 = 0x10, 0x91, 0x22, 0xB3, 0x44, 0xD5, 0x66, 0xF7. Selector nibbles 2, 5, 0xC (= 4: bit 3 is
  // ignored, where PTX prmt would replicate the sign of byte 4) and 0xF (= 7); the upper 16 bits of s are not used.
  out[5] = static_cast<int>(__byte_perm(0xB3229110u, 0xF766D544u, 0x1234FC52u));
}

TEST(SimtIntrinsics, Dp4aVadd4Vsub4AndBytePermFollowTheDefinitions) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 6 * sizeof(int)), cudaSuccess);
  integer_simd<<<1, 1>>>(d);
  int h[6] = {};
  ASSERT_EQ(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(h[0], 1100);
  EXPECT_EQ(h[1], 34916);
  EXPECT_EQ(h[2], static_cast<int>(static_cast<uint32_t>(2147483647u) + 16129u));
  EXPECT_EQ(static_cast<uint32_t>(h[3]), 0x001FE0F0u);
  EXPECT_EQ(static_cast<uint32_t>(h[4]), 0x80F90000u);
  EXPECT_EQ(static_cast<uint32_t>(h[5]), 0xF744D522u);
  cudaFree(d);
}

}  // namespace
}  // namespace qrt::simt::test
