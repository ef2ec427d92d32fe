// The generic GEMV against the CPU reference, for every format (decode-only ones from random blocks) and batch 1..8.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/linear/gemv_generic.hpp"
#include "decode_only_blocks.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;

// Owns a device buffer; frees it on scope exit so a failed assertion leaks nothing.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { if (bytes) cudaMalloc(&ptr, bytes); }
  ~DeviceBuffer() { cudaFree(ptr); }
  template <class T> T* as() const { return static_cast<T*>(ptr); }
};

const uint8_t* upload(const std::vector<uint8_t>& bytes, std::vector<std::unique_ptr<DeviceBuffer>>& keep) {
  if (bytes.empty()) return nullptr;
  keep.push_back(std::make_unique<DeviceBuffer>(bytes.size()));
  cudaMemcpy(keep.back()->ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice);
  return keep.back()->as<uint8_t>();
}

class GemvGeneric : public testing::TestWithParam<FormatId> {};

TEST_P(GemvGeneric, MatchesCpuReference) {
  QRT_REQUIRE_GPU();
  const FormatId id = GetParam();
  const FormatInfo info = format_info(id);
  const int64_t rows = 96, cols = 1024;
  QuantParams p;
  p.group_size = info.block_elems == 0 ? 64 : 0;
  p.scale_type = ScalarType::kF16;
  const auto w = test::random_normal(rows * cols, 11);
  // Formats without a quantizer (decode-only GGML blocks) get random blocks with finite scales.
  const auto decode_only = test::decode_only_scale_field(id);
  auto q = decode_only ? Result<QuantBuffers>(QuantBuffers{test::random_blocks(*decode_only, rows, cols, 12), {}, {}})
                       : cpu::quantize(id, w.data(), rows, cols, p);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  std::vector<std::unique_ptr<DeviceBuffer>> keep;
  QuantView dv = cpu::view_of(*q, rows, cols, p);
  const QuantView hv = dv;
  dv.data = upload(q->data, keep);
  dv.scales = upload(q->scales, keep);
  dv.biases = upload(q->biases, keep);
  for (int m : {1, 3, 8}) {
    const auto x = test::random_normal(m * cols, 100 + m);
    std::vector<float> ref(m * rows), got(m * rows);
    ASSERT_TRUE(cpu::matmul(id, hv, x.data(), m, ref.data()).ok());
    DeviceBuffer dx(x.size() * 4), dy(got.size() * 4);
    cudaMemcpy(dx.ptr, x.data(), x.size() * 4, cudaMemcpyHostToDevice);
    cudaMemset(dy.ptr, 0xFF, got.size() * 4);  // poison: NaN everywhere until written
    Status s = kernels::gemv_generic(id, dv, dx.as<float>(), m, dy.as<float>(), nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(got.data(), dy.ptr, got.size() * 4, cudaMemcpyDeviceToHost);
    for (float v : got) ASSERT_TRUE(std::isfinite(v)) << "unwritten output";
    EXPECT_LT(test::relative_l2(got.data(), ref.data(), got.size()), 1e-5) << info.name << " m=" << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GemvGeneric, testing::ValuesIn(kAllFormats),
                         test::format_test_name);

}  // namespace
}  // namespace qrt
