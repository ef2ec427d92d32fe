// MXFP4 repacking between UQFF's layout and GGUF's blocks (tools/convert/mxfp4_repack): every code and exponent
// moves, the decoded values of the two encodings (qrt's reference decoders of both formats) are the same floats, and
// the round trip gives the bytes back.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "tools/convert/mxfp4_repack.hpp"

namespace qrt::convert {
namespace {

TEST(Mxfp4Repack, SameValuesAndRoundTrip) {
  const int64_t rows = 5, cols = 96;
  std::mt19937 rng(11);
  std::vector<uint8_t> weight(static_cast<size_t>(rows * cols / 2)), scales(static_cast<size_t>(rows * cols / 32));
  for (uint8_t& b : weight) b = static_cast<uint8_t>(rng());
  for (uint8_t& e : scales) e = static_cast<uint8_t>(110 + rng() % 30);  // 2^-17 .. 2^12

  const std::vector<uint8_t> blocks = mxfp4_uqff_to_gguf(weight.data(), scales.data(), rows, cols);
  ASSERT_EQ(blocks.size(), static_cast<size_t>(rows * cols / 32 * 17));
  EXPECT_EQ(blocks[0], scales[0]) << "the exponent byte leads each block";
  EXPECT_EQ(blocks[1] & 0xF, weight[0] & 0xF) << "element 0: low nibble of byte 0 in both";
  EXPECT_EQ(blocks[1] >> 4, weight[8] & 0xF) << "element 16: the high nibble of GGUF's byte 0";

  quant::QuantView uqff, gguf;
  uqff.data = weight.data();
  uqff.scales = scales.data();
  uqff.rows = gguf.rows = rows;
  uqff.cols = gguf.cols = cols;
  gguf.data = blocks.data();
  std::vector<float> a(static_cast<size_t>(rows * cols)), b(a.size());
  ASSERT_TRUE(cpu::dequantize(quant::FormatId::kMXFP4, uqff, a.data()).ok());
  ASSERT_TRUE(cpu::dequantize(quant::FormatId::kMXFP4_GGML, gguf, b.data()).ok());
  EXPECT_EQ(a, b);
  int nonzero = 0;
  for (float v : a) nonzero += v != 0.0f;
  EXPECT_GT(nonzero, static_cast<int>(a.size()) / 2);

  std::vector<uint8_t> weight_back, scales_back;
  mxfp4_gguf_to_uqff(blocks.data(), rows, cols, &weight_back, &scales_back);
  EXPECT_EQ(weight_back, weight);
  EXPECT_EQ(scales_back, scales);
}

}  // namespace
}  // namespace qrt::convert
