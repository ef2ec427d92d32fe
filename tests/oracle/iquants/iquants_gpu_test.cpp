// The decode-only GGML formats (i-quants, ternary, IQ4_NL, GGML MXFP4) through the generic CUDA GEMV against the CPU
// reference. The generic GEMV test needs a quantizer to make weights; these formats have none, so this test feeds
// random blocks instead. It is what proves the device reads its own (__constant__) copy of the grid tables.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/linear/gemv_generic.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;

// Where each format keeps its scale, so random blocks can be given finite, moderate scales (random bytes would
// give inf/NaN rows and nothing to compare).
enum class ScaleKind { kF16At, kIq1mNibbles, kE8m0At0 };
struct ScaleField {
  FormatId id;
  ScaleKind kind;
  int offset;  // byte offset of the f16 d for kF16At
};
constexpr ScaleField kScaleFields[] = {
    {FormatId::kIQ1_S, ScaleKind::kF16At, 0},     {FormatId::kIQ1_M, ScaleKind::kIq1mNibbles, 48},
    {FormatId::kIQ2_XXS, ScaleKind::kF16At, 0},   {FormatId::kIQ2_XS, ScaleKind::kF16At, 0},
    {FormatId::kIQ2_S, ScaleKind::kF16At, 0},     {FormatId::kIQ3_XXS, ScaleKind::kF16At, 0},
    {FormatId::kIQ3_S, ScaleKind::kF16At, 0},     {FormatId::kIQ4_NL, ScaleKind::kF16At, 0},
    {FormatId::kIQ4_XS, ScaleKind::kF16At, 0},    {FormatId::kTQ1_0, ScaleKind::kF16At, 52},
    {FormatId::kTQ2_0, ScaleKind::kF16At, 64},    {FormatId::kMXFP4_GGML, ScaleKind::kE8m0At0, 0},
};

// Random blocks for a [rows, cols] tensor with every scale finite (|d| in [2^-8, 2^-4], either sign).
std::vector<uint8_t> random_tensor(const ScaleField& f, int64_t rows, int64_t cols, uint64_t seed) {
  const FormatInfo info = format_info(f.id);
  const int64_t nblocks = rows * cols / info.block_elems;
  std::vector<uint8_t> bytes = test::random_bytes(static_cast<size_t>(nblocks * info.block_bytes), seed);
  std::mt19937_64 gen(seed ^ 0x5eed);
  std::uniform_real_distribution<float> mag(1.0f / 256, 1.0f / 16);
  for (int64_t b = 0; b < nblocks; ++b) {
    uint8_t* blk = bytes.data() + b * info.block_bytes;
    const uint16_t d = f32_to_fp16((gen() & 1) ? -mag(gen) : mag(gen));
    switch (f.kind) {
      case ScaleKind::kF16At:
        blk[f.offset] = static_cast<uint8_t>(d & 0xFF);
        blk[f.offset + 1] = static_cast<uint8_t>(d >> 8);
        break;
      case ScaleKind::kIq1mNibbles:  // top nibble of scale word w = bits 4w..4w+3 of d
        for (int w = 0; w < 4; ++w) {
          uint8_t& hi = blk[f.offset + 2 * w + 1];
          hi = static_cast<uint8_t>((hi & 0x0F) | (((d >> (4 * w)) & 0xF) << 4));
        }
        break;
      case ScaleKind::kE8m0At0:
        blk[0] = static_cast<uint8_t>(118 + gen() % 12);  // 2^-10 .. 2^1
        break;
    }
  }
  return bytes;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { if (bytes) cudaMalloc(&ptr, bytes); }
  ~DeviceBuffer() { cudaFree(ptr); }
  template <class T> T* as() const { return static_cast<T*>(ptr); }
};

class DecodeOnlyGemv : public testing::TestWithParam<ScaleField> {};

TEST_P(DecodeOnlyGemv, MatchesCpuReference) {
  QRT_REQUIRE_GPU();
  const ScaleField f = GetParam();
  const int64_t rows = 64, cols = 1024;
  const std::vector<uint8_t> w = random_tensor(f, rows, cols, 1000 + static_cast<uint64_t>(f.id));
  QuantView hv;
  hv.data = w.data();
  hv.rows = rows;
  hv.cols = cols;
  DeviceBuffer dw(w.size());
  ASSERT_EQ(cudaMemcpy(dw.ptr, w.data(), w.size(), cudaMemcpyHostToDevice), cudaSuccess);
  QuantView dv = hv;
  dv.data = dw.as<uint8_t>();

  // The host decode must be finite everywhere, or the comparison below proves nothing.
  std::vector<float> dense(rows * cols);
  ASSERT_TRUE(cpu::dequantize(f.id, hv, dense.data()).ok());
  for (float v : dense) ASSERT_TRUE(std::isfinite(v));

  for (int m : {1, 8}) {
    const auto x = test::random_normal(m * cols, 200 + m);
    std::vector<float> ref(m * rows), got(m * rows);
    ASSERT_TRUE(cpu::matmul(f.id, hv, x.data(), m, ref.data()).ok());
    DeviceBuffer dx(x.size() * 4), dy(got.size() * 4);
    ASSERT_EQ(cudaMemcpy(dx.ptr, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
    cudaMemset(dy.ptr, 0xFF, got.size() * 4);  // poison: NaN until written
    const Status s = kernels::gemv_generic(f.id, dv, dx.as<float>(), m, dy.as<float>(), nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(got.data(), dy.ptr, got.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "unwritten output";
    EXPECT_LT(test::relative_l2(got.data(), ref.data(), got.size()), 1e-5) << format_name(f.id) << " m=" << m;
  }
}

// Every decode-only format of this family is listed above exactly once.
TEST(DecodeOnlyGemvList, CoversTheFamily) {
  EXPECT_EQ(std::size(kScaleFields), 12u);
  for (const ScaleField& f : kScaleFields) EXPECT_FALSE(format_info(f.id).has_quantizer) << format_name(f.id);
}

INSTANTIATE_TEST_SUITE_P(Formats, DecodeOnlyGemv, testing::ValuesIn(kScaleFields),
                         [](const testing::TestParamInfo<ScaleField>& i) {
                           return std::string(format_name(i.param.id));
                         });

}  // namespace
}  // namespace qrt
