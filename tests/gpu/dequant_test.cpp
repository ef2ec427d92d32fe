// dequantize_rows_half (the prefill path's W → fp16 step) against the CPU reference decode rounded to fp16, bit for
// bit up to one fp32 ulp of FMA contraction, for every format (decode-only ones from random blocks): a row range
// that starts inside the matrix, three 256-column blocks per row (so one warp's 32 blocks span rows, and the policy
// kernel's 16-row tiles end past the range), into an aligned output (the tensor-core policies' kernel for the formats
// that have one, the eight-element groups for the one-element formats, and the generic kernel called by itself) and
// into one that starts on an odd half (the generic kernel's element-wise store paths). Cells outside the range stay
// untouched.
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "decode_only_blocks.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/linear/dequant.hpp"
#include "kernels/quant/common.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;

struct DeviceBytes {
  void* ptr = nullptr;
  explicit DeviceBytes(size_t bytes) {
    if (bytes) cudaMalloc(&ptr, bytes);
  }
  ~DeviceBytes() { cudaFree(ptr); }
};

// The formats whose tensor-core GEMM weight policies (gemm_q8_mma_formats.cuh) dequantize, listed apart from them
// (AFQ has a policy for the GEMM; its dequantization stays on the generic kernel's chunks).
bool takes_policy(FormatId id) {
  for (FormatId f : {FormatId::kQ4_0, FormatId::kQ4_1, FormatId::kQ5_0, FormatId::kQ5_1, FormatId::kQ8_0,
                     FormatId::kQ2_K, FormatId::kQ3_K, FormatId::kQ4_K, FormatId::kQ5_K, FormatId::kQ6_K,
                     FormatId::kIQ4_NL, FormatId::kIQ4_XS, FormatId::kTQ2_0, FormatId::kMXFP4_GGML, FormatId::kMXFP4,
                     FormatId::kNVFP4, FormatId::kIQ2_XXS, FormatId::kIQ2_XS, FormatId::kIQ2_S, FormatId::kIQ3_XXS,
                     FormatId::kIQ3_S, FormatId::kIQ1_S, FormatId::kIQ1_M, FormatId::kTQ1_0})
    if (id == f) return true;
  return false;
}

// Rows [first, first + count) of a random [rows, cols] matrix in `id` with params p, through every kernel.
void check_rows_half(FormatId id, const QuantParams& p) {
  const FormatInfo info = format_info(id);
  const int64_t rows = 37, cols = 768, first = 5, count = 29;
  const auto values = test::random_normal(static_cast<size_t>(rows * cols), 31);
  const auto decode_only = test::decode_only_scale_field(id);
  auto q = decode_only ? Result<QuantBuffers>(QuantBuffers{test::random_blocks(*decode_only, rows, cols, 32), {}, {}})
                       : cpu::quantize(id, values.data(), rows, cols, p);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  const QuantView host = cpu::view_of(*q, rows, cols, p);
  std::vector<float> ref(static_cast<size_t>(rows * cols));
  ASSERT_TRUE(cpu::dequantize(id, host, ref.data()).ok());

  DeviceBytes data(q->data.size()), scales(q->scales.size()), biases(q->biases.size());
  cudaMemcpy(data.ptr, q->data.data(), q->data.size(), cudaMemcpyHostToDevice);
  if (!q->scales.empty()) cudaMemcpy(scales.ptr, q->scales.data(), q->scales.size(), cudaMemcpyHostToDevice);
  if (!q->biases.empty()) cudaMemcpy(biases.ptr, q->biases.data(), q->biases.size(), cudaMemcpyHostToDevice);
  QuantView dev = host;
  dev.data = static_cast<const uint8_t*>(data.ptr);
  dev.scales = q->scales.empty() ? nullptr : static_cast<const uint8_t*>(scales.ptr);
  dev.biases = q->biases.empty() ? nullptr : static_cast<const uint8_t*>(biases.ptr);

  const size_t n = static_cast<size_t>(count * cols);
  // dequantize_rows_half at both offsets (in halves: 1 puts every block on an odd address), then the generic kernel
  // itself on the aligned output, which dequantize_rows_half gives the policy kernel where there is one.
  for (auto [offset, generic] : {std::pair{0, false}, std::pair{1, false}, std::pair{0, true}}) {
    SCOPED_TRACE(std::string(info.name) + (generic ? " generic kernel" : "") + " offset " + std::to_string(offset));
    DeviceBytes out((n + 2) * sizeof(__half));
    cudaMemset(out.ptr, 0x7E, (n + 2) * sizeof(__half));  // 0x7E7E: a NaN, and the guard cells' value
    __half* dst = static_cast<__half*>(out.ptr) + offset;
    EXPECT_EQ(kernels::dequantize_rows_half_by_policy_applies(id, dev, dst), offset == 0 && takes_policy(id));
    const Status s = generic ? kernels::dequantize_rows_half_generic(id, dev, first, count, dst, nullptr)
                             : kernels::dequantize_rows_half(id, dev, first, count, dst, nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint16_t> got(n + 2);
    cudaMemcpy(got.data(), out.ptr, got.size() * 2, cudaMemcpyDeviceToHost);
    int64_t mismatches = 0;
    for (size_t i = 0; i < n; ++i) {
      // The device may contract a decode's multiply-add into one FMA (one fp32 ulp from the host's two roundings),
      // which can move the fp16 rounding by one step: the neighbours' roundings are accepted too.
      const float r = ref[static_cast<size_t>(first * cols) + i];
      const uint16_t want = f32_to_fp16(r);
      const bool near = got[i + offset] == f32_to_fp16(std::nextafter(r, INFINITY)) ||
                        got[i + offset] == f32_to_fp16(std::nextafter(r, -INFINITY));
      if (got[i + offset] != want && !near && ++mismatches <= 3)
        ADD_FAILURE() << "row " << first + static_cast<int64_t>(i) / cols
                      << " col " << static_cast<int64_t>(i) % cols << ": 0x" << std::hex << got[i + offset]
                      << " != 0x" << want;
    }
    EXPECT_EQ(mismatches, 0);
    EXPECT_EQ(got[offset == 0 ? n : 0], 0x7E7E) << "a cell outside the range was written";
    EXPECT_EQ(got[n + 1], 0x7E7E) << "a cell past the range was written";
  }
}

class DequantizeRowsHalf : public testing::TestWithParam<FormatId> {};

TEST_P(DequantizeRowsHalf, EqualsTheCpuDecodeRoundedToHalf) {
  QRT_REQUIRE_GPU();
  const FormatId id = GetParam();
  QuantParams p;
  p.group_size = format_info(id).block_elems == 0 ? 64 : 0;
  p.scale_type = ScalarType::kF16;
  if (id == FormatId::kNVFP4) p.global_scale = 0.75f;  // a tensor scale that is not 1 (both paths apply it)
  check_rows_half(id, p);
}

INSTANTIATE_TEST_SUITE_P(Formats, DequantizeRowsHalf, testing::ValuesIn(kAllFormats), test::format_test_name);

// AFQ's chunks of eight codes at every group size and scale dtype (a chunk's group found from its column). With F32
// scales the products q · s round, so on a GPU a fused multiply-add would miss the reference's 0 where q · s cancels
// the bias (the tensor-core policy's regrouped form did, under the SIMT layer too).
TEST(DequantizeRowsHalfAfq, EveryGroupSizeAndScaleType) {
  QRT_REQUIRE_GPU();
  for (FormatId id : {FormatId::kAFQ3, FormatId::kAFQ4, FormatId::kAFQ8})
    for (int group : {32, 128})
      for (ScalarType type : {ScalarType::kBF16, ScalarType::kF32}) {
        SCOPED_TRACE("group " + std::to_string(group) + (type == ScalarType::kF32 ? " f32" : " bf16"));
        QuantParams p;
        p.group_size = group;
        p.scale_type = type;
        check_rows_half(id, p);
      }
}

TEST(DequantizeRowsHalfRange, RowsOutsideTheMatrixAreRefused) {
  alignas(16) static const uint8_t bytes[4 * 8 * 34] = {};
  QuantView w;
  w.rows = 4;
  w.cols = 256;
  w.data = bytes;  // aligned, so that the policy kernel applies
  for (auto* fn : {&kernels::dequantize_rows_half, &kernels::dequantize_rows_half_by_policy,
                   &kernels::dequantize_rows_half_generic}) {
    const Status s = fn(FormatId::kQ8_0, w, 2, 3, nullptr, nullptr);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.to_string().find("outside a matrix of 4 rows"), std::string::npos) << s.to_string();
  }
}

}  // namespace
}  // namespace qrt
