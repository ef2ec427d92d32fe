// The decode-only GGML formats (i-quants, ternary, IQ4_NL, GGML MXFP4) through the generic CUDA GEMV against the CPU
// reference. The generic GEMV test needs a quantizer to make weights; these formats have none, so this test feeds
// random blocks instead. It is what proves the device reads its own (__constant__) copy of the grid tables.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/linear/gemv_generic.hpp"
#include "decode_only_blocks.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;
using test::kScaleFields;
using test::ScaleField;

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
  const std::vector<uint8_t> w = test::random_blocks(f, rows, cols, 1000 + static_cast<uint64_t>(f.id));
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

// Every format without a quantizer has exactly one scale field in the list (a new decode-only format must add one,
// or it would go untested on the device); formats with a quantizer are listed at most once (those tested with random
// codes as well).
TEST(DecodeOnlyGemvList, CoversEveryFormatWithoutAQuantizer) {
  for (FormatId id : kAllFormats) {
    const auto listed = std::count_if(std::begin(kScaleFields), std::end(kScaleFields),
                                      [&](const ScaleField& f) { return f.id == id; });
    if (format_info(id).has_quantizer) {
      EXPECT_LE(listed, 1) << format_name(id);
    } else {
      EXPECT_EQ(listed, 1) << format_name(id);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, DecodeOnlyGemv, testing::ValuesIn(kScaleFields),
                         [](const testing::TestParamInfo<ScaleField>& i) {
                           return std::string(format_name(i.param.id));
                         });

}  // namespace
}  // namespace qrt
