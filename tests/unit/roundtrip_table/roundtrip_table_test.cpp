// The round-trip error table: every format in the list that has a quantizer quantizes the same Gaussian matrix,
// dequantizes it, and its relative RMS error ||x̂ − x|| / ||x|| must stay under the bound recorded below. A format
// without a recorded bound fails, so a new format cannot slip in untested.
//
// QRT_PRINT_ROUNDTRIP_TABLE=1 prints the table as markdown (the one in docs/formats.md):
//   QRT_PRINT_ROUNDTRIP_TABLE=1 build/tests/unit/roundtrip_table/qrt_roundtrip_table_tests
//       --gtest_filter=RoundTripTable.PrintMarkdown
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "kernels/cpu/quant_reference.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;

// The matrix every format quantizes: [64, 1024] standard normal, fixed seed. 1024 is a multiple of every block
// and group length in the list (up to 256). Group-scaled formats (block_elems 0) use group 64 with F16 scales,
// as the other list-wide tests do; everything else keeps its defaults (global scale 1, HQQ group 64).
constexpr int64_t kRows = 64, kCols = 1024;
constexpr uint64_t kSeed = 20240611;

QuantParams table_params(const FormatInfo& info) {
  QuantParams p;
  p.group_size = info.block_elems == 0 ? 64 : 0;
  p.scale_type = ScalarType::kF16;
  return p;
}

// Recorded bounds: the measured error (see docs/formats.md) plus about 5%, so a different standard library's
// normal draws pass while a real regression does not.
struct RecordedBound {
  std::string_view format;
  double max_relative_rms;
};
constexpr RecordedBound kBounds[] = {
    // unquantized
    {"f32", 1e-9},
    {"f16", 0.000219},
    {"bf16", 0.00175},
    // MLX affine (MLX's GPU quantizer), group 64, F16 scale and bias
    {"afq2", 0.415},
    {"afq3", 0.2},
    {"afq4", 0.0955},
    {"afq5", 0.0465},
    {"afq6", 0.023},
    {"afq8", 0.0057},
    // microscaled floats (MLX's fp quantizer; nvfp4 without a global scale)
    {"mxfp4", 0.121},
    {"mxfp8", 0.0279},
    {"nvfp4", 0.101},
    // FP8 (per-tensor scale 1, 128x128 tiles, F8Q8 blocks)
    {"fp8", 0.0279},
    {"fp8_block", 0.0278},
    {"f8q8", 0.0283},
    // HQQ (initial min/max scale and zero, no proximal optimizer), group 64, F16 scale and zero
    {"hqq4", 0.0946},
    {"hqq8", 0.00557},
    // GGML 32-element blocks (ggml's reference quantizers)
    {"q4_0", 0.0898},
    {"q4_1", 0.0821},
    {"q5_0", 0.0447},
    {"q5_1", 0.0398},
    {"q8_0", 0.00557},
    {"q8_1", 0.00557},
    // GGML K-quants (reference quantizers, no importance matrix)
    {"q2_k", 0.312},
    {"q3_k", 0.158},
    {"q4_k", 0.075},
    {"q5_k", 0.038},
    {"q6_k", 0.0186},
    {"q8_k", 0.00724},
    // GGML i-quants on their grids (ggml's searches, no importance matrix: uniform for IQ1_S, IQ2_XXS, IQ2_XS)
    {"iq1_s", 0.509},
    {"iq1_m", 0.608},
    {"iq2_xxs", 0.361},
    {"iq2_xs", 0.315},
    {"iq2_s", 0.279},
    {"iq3_xxs", 0.225},
    {"iq3_s", 0.174},
    // GGML non-linear 4-bit (ggml's search over 15 trial scales, no importance matrix)
    {"iq4_nl", 0.08},
    {"iq4_xs", 0.0806},
    // GGML ternary: d = the block's largest magnitude, so most Gaussian values round to 0 (made for ternary-trained
    // weights, not Gaussian ones)
    {"tq1_0", 0.846},
    {"tq2_0", 0.846},
    // GGML MXFP4 (ggml's reference: shared exponent from the block maximum, nearest E2M1 value)
    {"mxfp4_ggml", 0.121},
};

std::optional<double> recorded_bound(std::string_view name) {
  for (const RecordedBound& b : kBounds)
    if (b.format == name) return b.max_relative_rms;
  return std::nullopt;
}

// Relative RMS error of one format on the table's matrix (computed once per format and cached).
Result<double> measured_error(FormatId id) {
  static std::map<FormatId, double> cache;
  if (auto it = cache.find(id); it != cache.end()) return it->second;
  static const std::vector<float> x = test::random_normal(kRows * kCols, kSeed);
  const FormatInfo info = format_info(id);
  const QuantParams p = table_params(info);
  QRT_ASSIGN_OR_RETURN(QuantBuffers q, cpu::quantize(id, x.data(), kRows, kCols, p));
  std::vector<float> back(x.size());
  QRT_TRY(cpu::dequantize(id, cpu::view_of(q, kRows, kCols, p), back.data()));
  const double err = test::relative_l2(back.data(), x.data(), x.size());
  cache[id] = err;
  return err;
}

class RoundTripTable : public testing::TestWithParam<FormatId> {};

TEST_P(RoundTripTable, ErrorWithinRecordedBound) {
  const FormatInfo info = format_info(GetParam());
  if (!info.has_quantizer) GTEST_SKIP() << info.name << " has no quantizer";
  auto err = measured_error(info.id);
  ASSERT_TRUE(err.ok()) << info.name << ": " << err.status().to_string();
  const std::optional<double> bound = recorded_bound(info.name);
  ASSERT_TRUE(bound.has_value()) << "no recorded round-trip bound for format \"" << info.name << "\" (measured "
                                 << *err << "): add one to kBounds in tests/unit/roundtrip_table/"
                                    "roundtrip_table_test.cpp, and its row to docs/formats.md";
  EXPECT_LE(*err, *bound) << info.name << ": relative RMS error grew past its recorded bound";
}

INSTANTIATE_TEST_SUITE_P(Formats, RoundTripTable, testing::ValuesIn(kAllFormats), test::format_test_name);

// Stale rows (a renamed or removed format, or a bound for a format without a quantizer) fail too.
TEST(RoundTripTableBounds, EveryRecordedBoundNamesAFormatWithAQuantizer) {
  for (const RecordedBound& b : kBounds) {
    const std::optional<FormatId> id = format_from_name(b.format);
    ASSERT_TRUE(id.has_value()) << "kBounds names unknown format \"" << b.format << "\"";
    EXPECT_TRUE(format_info(*id).has_quantizer) << "kBounds has a bound for " << b.format << ", which has no quantizer";
  }
}

// Prints the markdown table when QRT_PRINT_ROUNDTRIP_TABLE is set; otherwise checks nothing beyond the tests above.
TEST(RoundTripTable, PrintMarkdown) {
  const char* env = std::getenv("QRT_PRINT_ROUNDTRIP_TABLE");
  if (env == nullptr || *env == '\0' || std::string_view(env) == "0") return;
  std::printf("| format | bits per weight | relative RMS error | recorded bound |\n");
  std::printf("|---|---:|---:|---:|\n");
  for (FormatId id : kAllFormats) {
    const FormatInfo info = format_info(id);
    if (!info.has_quantizer) {
      std::printf("| %s | %.4g | (no quantizer) | |\n", std::string(info.name).c_str(), info.bits_per_weight);
      continue;
    }
    auto err = measured_error(id);
    ASSERT_TRUE(err.ok()) << info.name << ": " << err.status().to_string();
    const std::optional<double> bound = recorded_bound(info.name);
    char bound_text[32] = "missing";
    if (bound) std::snprintf(bound_text, sizeof bound_text, "%.3g", *bound);
    std::printf("| %s | %.4g | %.4g | %s |\n", std::string(info.name).c_str(), info.bits_per_weight, *err,
                bound_text);
  }
}

}  // namespace
}  // namespace qrt
