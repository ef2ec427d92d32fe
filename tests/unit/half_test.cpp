#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/quant/common.hpp"

namespace qrt::quant {
namespace {

TEST(Half, KnownValues) {
  EXPECT_EQ(fp16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_f32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::signbit(fp16_to_f32(0x8000)));
  EXPECT_TRUE(std::isinf(fp16_to_f32(0x7C00)));
  EXPECT_TRUE(std::isnan(fp16_to_f32(0x7E00)));
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
}

// Every finite half survives half -> float -> half unchanged; the two directions were written independently.
TEST(Half, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_fp16(f), h) << "half 0x" << std::hex << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  // 1 + 2^-11 lies exactly between 1 and the next half (1 + 2^-10): ties go to the even mantissa (1.0).
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(f32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7C00);  // rounds up to infinity
  EXPECT_EQ(f32_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // half of the smallest subnormal: tie to even (0)
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3F80);  // tie -> even
}

}  // namespace
}  // namespace qrt::quant
