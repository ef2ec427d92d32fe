// Properties of the GGML 32-element block formats and the K-quants: geometry against spec/ggml.md §2.1, shape
// errors, part sizes, hand-built blocks decoded per the spec's formulas, and structural facts of ggml's reference
// quantizers. The bit-exact comparison with gguf-py lives in tests/oracle/quant.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;

struct SpecRow {
  FormatId id;
  int ggml_type;
  int block_elems;
  int block_bytes;
  double bits_per_weight;
};

// spec/ggml.md §2.1, typed in from the table.
constexpr SpecRow kSpec[] = {
    {FormatId::kQ4_0, 2, 32, 18, 4.5},      {FormatId::kQ4_1, 3, 32, 20, 5.0},
    {FormatId::kQ5_0, 6, 32, 22, 5.5},      {FormatId::kQ5_1, 7, 32, 24, 6.0},
    {FormatId::kQ8_0, 8, 32, 34, 8.5},      {FormatId::kQ8_1, 9, 32, 36, 9.0},
    {FormatId::kQ2_K, 10, 256, 84, 2.625},  {FormatId::kQ3_K, 11, 256, 110, 3.4375},
    {FormatId::kQ4_K, 12, 256, 144, 4.5},   {FormatId::kQ5_K, 13, 256, 176, 5.5},
    {FormatId::kQ6_K, 14, 256, 210, 6.5625}, {FormatId::kQ8_K, 15, 256, 292, 9.125},
};

std::vector<FormatId> spec_formats() {
  std::vector<FormatId> v;
  for (const SpecRow& r : kSpec) v.push_back(r.id);
  return v;
}

const SpecRow& spec_of(FormatId id) {
  for (const SpecRow& r : kSpec)
    if (r.id == id) return r;
  return kSpec[0];
}

class GgmlFormat : public testing::TestWithParam<FormatId> {};

TEST_P(GgmlFormat, GeometryMatchesSpecTable) {
  const SpecRow& s = spec_of(GetParam());
  const FormatInfo info = format_info(GetParam());
  EXPECT_EQ(info.family, Family::kGgml);
  EXPECT_EQ(info.ggml_type, s.ggml_type);
  EXPECT_EQ(info.block_elems, s.block_elems);
  EXPECT_EQ(info.block_bytes, s.block_bytes);
  EXPECT_DOUBLE_EQ(info.bits_per_weight, s.bits_per_weight);
  EXPECT_TRUE(info.has_quantizer);
  EXPECT_EQ(format_from_ggml_type(s.ggml_type), GetParam());
}

TEST_P(GgmlFormat, RejectsRowsThatAreNotWholeBlocks) {
  const FormatId id = GetParam();
  const int be = spec_of(id).block_elems;
  for (int64_t cols : {int64_t{be} / 2, int64_t{be} + 1, int64_t{3} * be - 16, int64_t{be} * 5 + be / 2}) {
    auto sizes = cpu::part_sizes(id, 2, cols, QuantParams{});
    ASSERT_FALSE(sizes.ok()) << cols;
    EXPECT_EQ(sizes.status().code(), ErrorCode::kInvalidArgument);
    // The message names the row length and the block size it must be a multiple of.
    EXPECT_NE(sizes.status().message().find(std::to_string(cols)), std::string::npos) << sizes.status().message();
    EXPECT_NE(sizes.status().message().find(std::to_string(be)), std::string::npos) << sizes.status().message();

    QuantView v;
    v.rows = 2;
    v.cols = cols;
    EXPECT_FALSE(cpu::check_view(id, v).ok());
    const std::vector<float> x(static_cast<size_t>(2 * cols), 1.0f);
    EXPECT_FALSE(cpu::quantize(id, x.data(), 2, cols, QuantParams{}).ok());
  }
}

TEST_P(GgmlFormat, RejectsEmptyAndOverflowingShapes) {
  const FormatId id = GetParam();
  const int be = spec_of(id).block_elems;
  EXPECT_FALSE(cpu::part_sizes(id, 0, be, QuantParams{}).ok());
  EXPECT_FALSE(cpu::part_sizes(id, 4, 0, QuantParams{}).ok());
  EXPECT_FALSE(cpu::part_sizes(id, -1, be, QuantParams{}).ok());
  EXPECT_FALSE(cpu::part_sizes(id, 4, -int64_t{be}, QuantParams{}).ok());
  // rows * cols does not fit in 64 bits: an error, not a wrapped size.
  auto huge = cpu::part_sizes(id, int64_t{1} << 40, int64_t{be} << 30, QuantParams{});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), ErrorCode::kInvalidArgument);
}

TEST_P(GgmlFormat, PartSizesAreWholeBlocksInOneDataPart) {
  const FormatId id = GetParam();
  const SpecRow& s = spec_of(id);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, s.block_elems}, {3, 2 * s.block_elems},
                            {7, 9 * s.block_elems}, {4096, 4096 / s.block_elems * s.block_elems}}) {
    auto sizes = cpu::part_sizes(id, rows, cols, QuantParams{});
    ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
    EXPECT_EQ(sizes->data, static_cast<uint64_t>(rows * (cols / s.block_elems) * s.block_bytes));
    EXPECT_EQ(sizes->scales, 0u);
    EXPECT_EQ(sizes->biases, 0u);
  }
}

TEST_P(GgmlFormat, QuantizerRefusesNonFiniteInputNamingThePosition) {
  const FormatId id = GetParam();
  const int64_t cols = spec_of(id).block_elems * 2;
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    auto x = test::random_normal(static_cast<size_t>(2 * cols), 3);
    x[static_cast<size_t>(cols + 5)] = bad;
    auto q = cpu::quantize(id, x.data(), 2, cols, QuantParams{});
    ASSERT_FALSE(q.ok());
    EXPECT_EQ(q.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(q.status().message().find("row 1, column 5"), std::string::npos) << q.status().message();
  }
}

TEST_P(GgmlFormat, ZeroAndConstantBlocksDecodeExactly) {
  // Every reference quantizer maps an all-zero block to zeros, and a block holding one repeated value v to a
  // reconstruction within the f16 precision of v.
  const FormatId id = GetParam();
  const int64_t cols = spec_of(id).block_elems * 2;
  std::vector<float> x(static_cast<size_t>(cols), 0.0f);
  for (int64_t c = cols / 2; c < cols; ++c) x[static_cast<size_t>(c)] = 0.3f;
  auto q = cpu::quantize(id, x.data(), 1, cols, QuantParams{});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  std::vector<float> back(x.size(), NAN);
  ASSERT_TRUE(cpu::dequantize(id, cpu::view_of(*q, 1, cols, QuantParams{}), back.data()).ok());
  for (int64_t c = 0; c < cols / 2; ++c) EXPECT_EQ(back[static_cast<size_t>(c)], 0.0f) << c;
  for (int64_t c = cols / 2; c < cols; ++c) EXPECT_NEAR(back[static_cast<size_t>(c)], 0.3f, 0.3f * 2e-3) << c;
}

TEST_P(GgmlFormat, ExtremeFiniteInputDoesNotBreakTheQuantizer) {
  // Values whose f16 scales overflow or underflow must still quantize (the result may not be useful).
  const FormatId id = GetParam();
  const int64_t cols = spec_of(id).block_elems;
  for (float scale : {1e30f, 1e-30f, 1e37f}) {
    auto x = test::random_normal(static_cast<size_t>(cols), 5, scale);
    auto q = cpu::quantize(id, x.data(), 1, cols, QuantParams{});
    ASSERT_TRUE(q.ok()) << scale << ": " << q.status().to_string();
    std::vector<float> back(x.size());
    EXPECT_TRUE(cpu::dequantize(id, cpu::view_of(*q, 1, cols, QuantParams{}), back.data()).ok());
  }
}

// Relative L2 error of the reference quantizers on unit Gaussian data [64, 1024], recorded from this
// implementation (seed 77). A regression in a quantizer's search (e.g. a K-quant falling back to plain rounding)
// shows up here long before the loose catch-all bound of the format-list round-trip test.
TEST_P(GgmlFormat, RoundTripErrorWithinRecordedBound) {
  struct Bound {
    FormatId id;
    double max_rel_l2;
  };
  constexpr Bound kBounds[] = {
      // measured: 0.0861, 0.0783, 0.0426, 0.0379, 0.00537, 0.00537, 0.2979, 0.1512, 0.0715, 0.0362, 0.0178, 0.00693
      {FormatId::kQ4_0, 0.088},  {FormatId::kQ4_1, 0.080},  {FormatId::kQ5_0, 0.0435}, {FormatId::kQ5_1, 0.0388},
      {FormatId::kQ8_0, 0.0055}, {FormatId::kQ8_1, 0.0055}, {FormatId::kQ2_K, 0.304},  {FormatId::kQ3_K, 0.154},
      {FormatId::kQ4_K, 0.073},  {FormatId::kQ5_K, 0.037},  {FormatId::kQ6_K, 0.0182}, {FormatId::kQ8_K, 0.0071},
  };
  const FormatId id = GetParam();
  double bound = 0.0;
  for (const Bound& b : kBounds)
    if (b.id == id) bound = b.max_rel_l2;
  const int64_t rows = 64, cols = 1024;
  const auto x = test::random_normal(static_cast<size_t>(rows * cols), 77);
  auto q = cpu::quantize(id, x.data(), rows, cols, QuantParams{});
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  std::vector<float> back(x.size());
  ASSERT_TRUE(cpu::dequantize(id, cpu::view_of(*q, rows, cols, QuantParams{}), back.data()).ok());
  const double err = test::relative_l2(back.data(), x.data(), back.size());
  EXPECT_LE(err, bound) << format_name(id);
}

double round_trip_error(FormatId id, const std::vector<float>& x, int64_t rows, int64_t cols) {
  auto q = cpu::quantize(id, x.data(), rows, cols, QuantParams{});
  if (!q.ok()) return INFINITY;
  std::vector<float> back(x.size());
  if (!cpu::dequantize(id, cpu::view_of(*q, rows, cols, QuantParams{}), back.data()).ok()) return INFINITY;
  return test::relative_l2(back.data(), x.data(), back.size());
}

// The point of the K-quants' searched scales: at the same storage cost they reconstruct better than the legacy
// block formats (Q4_K and Q4_0 are both 4.5 bits per weight, Q5_K and Q5_0 both 5.5).
TEST(GgmlQuantizer, KQuantsBeatLegacyFormatsOfEqualSize) {
  const int64_t rows = 16, cols = 2048;
  const auto x = test::random_normal(static_cast<size_t>(rows * cols), 78);
  EXPECT_LT(round_trip_error(FormatId::kQ4_K, x, rows, cols), round_trip_error(FormatId::kQ4_0, x, rows, cols));
  EXPECT_LT(round_trip_error(FormatId::kQ5_K, x, rows, cols), round_trip_error(FormatId::kQ5_0, x, rows, cols));
}

INSTANTIATE_TEST_SUITE_P(Formats, GgmlFormat, testing::ValuesIn(spec_formats()), test::format_test_name);

// ------------------------------------------------------------------------------------- hand-built blocks, decoded

std::vector<float> decode_one(FormatId id, const std::vector<uint8_t>& block) {
  const FormatInfo info = format_info(id);
  QuantView v;
  v.data = block.data();
  v.rows = 1;
  v.cols = info.block_elems;
  std::vector<float> out(static_cast<size_t>(info.block_elems), NAN);
  EXPECT_TRUE(cpu::dequantize(id, v, out.data()).ok());
  return out;
}

void put_u16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v & 0xFF);
  b[off + 1] = static_cast<uint8_t>(v >> 8);
}

constexpr uint16_t kHalfOne = 0x3C00, kHalfHalf = 0x3800, kHalfTwo = 0x4000, kHalfMinusThree = 0xC200;

TEST(GgmlDecode, Q4NibblesAreHalvesNotPairs) {
  // Byte j: low nibble = element j, high nibble = element j + 16.
  std::vector<uint8_t> b(18);
  put_u16(b, 0, kHalfTwo);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto x = decode_one(FormatId::kQ4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x[j], 2.0f * (j - 8)) << j;
    EXPECT_EQ(x[j + 16], 2.0f * (15 - j - 8)) << j;
  }
  std::vector<uint8_t> b1(20);
  put_u16(b1, 0, kHalfHalf);
  put_u16(b1, 2, kHalfMinusThree);
  for (int j = 0; j < 16; ++j) b1[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = decode_one(FormatId::kQ4_1, b1);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * j - 3.0f) << j;
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j) - 3.0f) << j;
  }
}

TEST(GgmlDecode, Q5FifthBitComesFromQhBitJ) {
  std::vector<uint8_t> b(22);
  put_u16(b, 0, kHalfOne);
  const uint32_t qh = 0xA5C3F00Fu;
  for (int i = 0; i < 4; ++i) b[2 + i] = static_cast<uint8_t>(qh >> (8 * i));
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>((j * 7 % 16) | ((j * 3 % 16) << 4));
  const auto x = decode_one(FormatId::kQ5_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(x[j], static_cast<float>(((j * 7 % 16) | static_cast<int>(((qh >> j) & 1) << 4)) - 16)) << j;
    EXPECT_EQ(x[j + 16], static_cast<float>(((j * 3 % 16) | static_cast<int>(((qh >> (j + 16)) & 1) << 4)) - 16)) << j;
  }
}

TEST(GgmlDecode, Q8_1IgnoresTheSumField) {
  std::vector<uint8_t> b(36);
  put_u16(b, 0, kHalfHalf);
  put_u16(b, 2, 0x7E00);  // a NaN sum must not leak into the values
  for (int j = 0; j < 32; ++j) b[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j * 8 - 128));
  const auto x = decode_one(FormatId::kQ8_1, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(x[j], 0.5f * static_cast<float>(j * 8 - 128)) << j;
}

TEST(GgmlDecode, Q2KElementsFollowTheSpecIndexing) {
  // Element i = 128h + 32j + l: q = (qs[32h+l] >> 2j) & 3, scale byte scales[8h + 2j + (l >= 16)].
  auto b = test::random_bytes(84, 21);
  put_u16(b, 80, kHalfHalf);         // d
  put_u16(b, 82, kHalfMinusThree);   // dmin
  const auto x = decode_one(FormatId::kQ2_K, b);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32;
    const int q = (b[16 + 32 * h + l] >> (2 * j)) & 3;
    const int sc = b[8 * h + 2 * j + (l >= 16)];
    EXPECT_EQ(x[i], 0.5f * (sc & 15) * q - (-3.0f) * (sc >> 4)) << i;
  }
}

TEST(GgmlDecode, Q3KHighBitSetMeansNoOffset) {
  auto b = test::random_bytes(110, 22);
  put_u16(b, 108, kHalfOne);
  const auto x = decode_one(FormatId::kQ3_K, b);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32, s = 8 * h + 2 * j + (l >= 16);
    const int low4 = s < 8 ? (b[96 + s] & 15) : (b[96 + s - 8] >> 4);
    const int high2 = (b[96 + 8 + s % 4] >> (2 * (s / 4))) & 3;
    const int scale = (low4 | (high2 << 4)) - 32;
    const int q = ((b[32 + 32 * h + l] >> (2 * j)) & 3) - (((b[l] >> (4 * h + j)) & 1) ? 0 : 4);
    EXPECT_EQ(x[i], static_cast<float>(scale * q)) << i;
  }
}

TEST(GgmlDecode, Q4KAndQ5KScalePacking) {
  // Scales and mins chosen so each 6-bit field is distinct: sub-block k has scale 10 + k (k < 4) or 40 + k, and
  // min 3k + 1; packed by hand per spec/ggml.md §2.3.
  int sc[8], mn[8];
  for (int k = 0; k < 8; ++k) {
    sc[k] = k < 4 ? 10 + k : 40 + k;
    mn[k] = 3 * k + 1 + (k >= 4 ? 32 : 0);
  }
  uint8_t packed[12] = {};
  for (int k = 0; k < 4; ++k) {
    packed[k] = static_cast<uint8_t>(sc[k] | ((sc[k + 4] >> 4) << 6));
    packed[k + 4] = static_cast<uint8_t>(mn[k] | ((mn[k + 4] >> 4) << 6));
    packed[k + 8] = static_cast<uint8_t>((sc[k + 4] & 15) | ((mn[k + 4] & 15) << 4));
  }
  auto b4 = test::random_bytes(144, 23);
  put_u16(b4, 0, kHalfOne);
  put_u16(b4, 2, kHalfHalf);
  std::memcpy(b4.data() + 4, packed, 12);
  const auto x = decode_one(FormatId::kQ4_K, b4);
  auto b5 = test::random_bytes(176, 24);
  put_u16(b5, 0, kHalfOne);
  put_u16(b5, 2, kHalfHalf);
  std::memcpy(b5.data() + 4, packed, 12);
  const auto y = decode_one(FormatId::kQ5_K, b5);
  for (int i = 0; i < 256; ++i) {
    const int p = i / 64, l = i % 64, k = 2 * p + (l >= 32);
    const uint8_t byte4 = b4[16 + 32 * p + l % 32];
    const int q4 = l < 32 ? (byte4 & 15) : (byte4 >> 4);
    EXPECT_EQ(x[i], static_cast<float>(sc[k] * q4) - 0.5f * mn[k]) << i;
    const uint8_t byte5 = b5[48 + 32 * p + l % 32];
    const int q5 = (l < 32 ? (byte5 & 15) : (byte5 >> 4)) + (((b5[16 + l % 32] >> k) & 1) ? 16 : 0);
    EXPECT_EQ(y[i], static_cast<float>(sc[k] * q5) - 0.5f * mn[k]) << i;
  }
}

TEST(GgmlDecode, Q6KElementsFollowTheSpecIndexing) {
  auto b = test::random_bytes(210, 25);
  put_u16(b, 208, kHalfHalf);
  const auto x = decode_one(FormatId::kQ6_K, b);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    const uint8_t lo_byte = b[64 * h + l + 32 * (k & 1)];
    const int lo = k < 2 ? (lo_byte & 15) : (lo_byte >> 4);
    const int hi = (b[128 + 32 * h + l] >> (2 * k)) & 3;
    const int scale = static_cast<int8_t>(b[192 + 8 * h + 2 * k + l / 16]);
    EXPECT_EQ(x[i], 0.5f * static_cast<float>(scale) * static_cast<float>((lo | (hi << 4)) - 32)) << i;
  }
}

TEST(GgmlDecode, Q8KUsesAnF32Scale) {
  std::vector<uint8_t> b(292, 0);
  const float d = 1.0f / 3.0f;  // not representable in f16
  std::memcpy(b.data(), &d, 4);
  for (int j = 0; j < 256; ++j) b[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 128));
  const auto x = decode_one(FormatId::kQ8_K, b);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(x[j], d * static_cast<float>(j - 128)) << j;
}

// --------------------------------------------------------------------- structure of the reference quantizers

QuantBuffers quantize_ok(FormatId id, const std::vector<float>& x, int64_t rows, int64_t cols) {
  auto q = cpu::quantize(id, x.data(), rows, cols, QuantParams{});
  EXPECT_TRUE(q.ok()) << q.status().to_string();
  return q.ok() ? *q : QuantBuffers{};
}

TEST(GgmlQuantizer, Q8KSumsAndScale) {
  const auto x = test::random_normal(512, 31);
  const auto q = quantize_ok(FormatId::kQ8_K, x, 1, 512);
  ASSERT_EQ(q.data.size(), 2u * 292u);
  for (int blk = 0; blk < 2; ++blk) {
    const uint8_t* b = q.data.data() + blk * 292;
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j)
      if (std::fabs(x[blk * 256 + j]) > amax) {
        amax = std::fabs(x[blk * 256 + j]);
        max = x[blk * 256 + j];
      }
    float d;
    std::memcpy(&d, b, 4);
    EXPECT_EQ(d, 1.0f / (-127.0f / max));
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += static_cast<int8_t>(b[4 + 16 * g + l]);
      EXPECT_EQ(static_cast<int16_t>(b[260 + 2 * g] | (b[261 + 2 * g] << 8)), sum) << g;
    }
  }
}

TEST(GgmlQuantizer, Q8_1SumIsScaleTimesCodeSum) {
  const auto x = test::random_normal(64, 32);
  const auto q = quantize_ok(FormatId::kQ8_1, x, 1, 64);
  for (int blk = 0; blk < 2; ++blk) {
    // s = d * sum(q) with the f32 scale amax / 127, before d itself is rounded to f16.
    const uint8_t* b = q.data.data() + blk * 36;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
    const float d = amax / 127.0f;
    EXPECT_EQ(load_u16(b), f32_to_fp16(d));
    int sum = 0;
    for (int j = 0; j < 32; ++j) sum += static_cast<int8_t>(b[4 + j]);
    EXPECT_EQ(load_u16(b + 2), f32_to_fp16(static_cast<float>(sum) * d));
  }
}

TEST(GgmlQuantizer, LargestSubBlockScaleTakesTheExtremeIndex) {
  // ggml's reference quantizers scale the sub-block scales so that the largest one lands on the end of the index
  // range: Q4_K/Q5_K index 63, Q6_K index -128, Q3_K index -32 (stored as 0) and Q2_K index 15.
  const auto x = test::random_normal(256, 33);
  {
    const auto q = quantize_ok(FormatId::kQ4_K, x, 1, 256);
    int best = 0;
    for (int k = 0; k < 8; ++k) {
      int sc, m;
      k4_scale_min(q.data.data() + 4, k, &sc, &m);
      best = std::max(best, sc);
    }
    EXPECT_EQ(best, 63);
  }
  {
    const auto q = quantize_ok(FormatId::kQ6_K, x, 1, 256);
    int extreme = 0;
    for (int s = 0; s < 16; ++s) extreme = std::min(extreme, static_cast<int>(static_cast<int8_t>(q.data[192 + s])));
    EXPECT_EQ(extreme, -128);
  }
  {
    const auto q = quantize_ok(FormatId::kQ3_K, x, 1, 256);
    int extreme = 0;
    for (int s = 0; s < 16; ++s) extreme = std::min(extreme, q3k_scale(q.data.data() + 96, s));
    EXPECT_EQ(extreme, -32);
  }
  {
    const auto q = quantize_ok(FormatId::kQ2_K, x, 1, 256);
    int best = 0;
    for (int s = 0; s < 16; ++s) best = std::max(best, q.data[s] & 15);
    EXPECT_EQ(best, 15);
  }
}

}  // namespace
}  // namespace qrt
