// The per-family fast GEMV kernels through kernels::gemv() against the CPU reference (cpu::matmul): every format
// that has a fast kernel (FastGemv<id>::kAvailable, so a new fast kernel is tested without touching this file), on
// quantizer output and on random code bytes, batch 1..8, with awkward shapes (rows not a multiple of the rows per
// warp, a single tile or group, rows ending inside a tile or a chunk, long rows, row counts that select 1, 2 and 4
// warps per block), output poisoned with NaN before every run, and a second run that must match bit for bit (no
// races: nothing in the kernels depends on scheduling). Inputs the fast kernels cannot take (misaligned data, x or
// scales; packed rows that are not whole 16-byte copies) must fall back to the generic kernel and still be right,
// and gemv_kernel_name must say which kernel runs.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <ostream>
#include <memory>
#include <string>
#include <vector>

#include "gemv_test_weights.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/cuda/device_facts.hpp"
#include "kernels/linear/gemv.hpp"
#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/gemv_fast.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {
using namespace qrt::quant;

bool has_fast_gemv(FormatId id) {
  return dispatch_format(id, [](auto tag) { return kernels::FastGemv<decltype(tag)::id>::kAvailable; });
}

std::string fast_gemv_name(FormatId id) {
  return dispatch_format(id, [](auto tag) -> std::string {
    using F = kernels::FastGemv<decltype(tag)::id>;
    if constexpr (F::kAvailable) return std::string(F::kName);
    return "none";
  });
}

// A device allocation freed on scope exit. `offset` shifts the pointer handed out (to misalign it on purpose).
class DeviceBytes {
 public:
  DeviceBytes(size_t bytes, size_t offset = 0) : offset_(offset) {
    if (cudaMalloc(&base_, bytes + offset + 16) != cudaSuccess) base_ = nullptr;
  }
  ~DeviceBytes() { cudaFree(base_); }
  DeviceBytes(const DeviceBytes&) = delete;
  DeviceBytes& operator=(const DeviceBytes&) = delete;
  bool ok() const { return base_ != nullptr; }
  uint8_t* get() const { return static_cast<uint8_t*>(base_) + offset_; }

 private:
  void* base_ = nullptr;
  size_t offset_;
};

// Device copies of one weight tensor's parts, each at its own byte offset from a 256-byte aligned allocation.
struct DeviceWeights {
  std::vector<std::unique_ptr<DeviceBytes>> parts;
  QuantView view;
};

struct Offsets {
  size_t data = 0;
  size_t scales = 0;
  size_t x = 0;  // bytes
};

::testing::AssertionResult upload(const std::vector<uint8_t>& bytes, size_t offset, DeviceWeights& dw,
                                  const uint8_t** out) {
  *out = nullptr;
  if (bytes.empty()) return ::testing::AssertionSuccess();
  dw.parts.push_back(std::make_unique<DeviceBytes>(bytes.size(), offset));
  if (!dw.parts.back()->ok()) return ::testing::AssertionFailure() << "cudaMalloc failed";
  if (cudaMemcpy(dw.parts.back()->get(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess)
    return ::testing::AssertionFailure() << "cudaMemcpy failed";
  *out = dw.parts.back()->get();
  return ::testing::AssertionSuccess();
}

// Runs gemv() for batch m on device weights `dw` (host view `hv`), checks the kernel name, unwritten outputs, the
// error against cpu::matmul and bit-exact repeatability.
void check_gemv(FormatId id, const QuantView& hv, const QuantView& dv, int m, size_t x_offset,
                const std::string& expected_kernel, uint64_t seed, const std::string& what) {
  SCOPED_TRACE(std::string(format_name(id)) + " " + what + " [" + std::to_string(hv.rows) + ", " +
               std::to_string(hv.cols) + "] batch " + std::to_string(m));
  const std::vector<float> x = test::random_normal(static_cast<size_t>(m * hv.cols), seed);
  std::vector<float> ref(static_cast<size_t>(m * hv.rows));
  ASSERT_TRUE(cpu::matmul(id, hv, x.data(), m, ref.data()).ok());

  DeviceBytes dx(x.size() * 4, x_offset), dy(ref.size() * 4);
  ASSERT_TRUE(dx.ok() && dy.ok());
  const float* x_dev = reinterpret_cast<const float*>(dx.get());
  float* y_dev = reinterpret_cast<float*>(dy.get());
  ASSERT_EQ(cudaMemcpy(dx.get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(kernels::gemv_kernel_name(id, dv, x_dev, m), expected_kernel);

  std::vector<float> first(ref.size()), second(ref.size());
  for (std::vector<float>* out : {&first, &second}) {
    ASSERT_EQ(cudaMemset(dy.get(), 0xFF, ref.size() * 4), cudaSuccess);  // NaN until written
    const Status s = kernels::gemv(id, dv, x_dev, m, y_dev, nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(out->data(), dy.get(), ref.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  for (size_t k = 0; k < first.size(); ++k)
    ASSERT_TRUE(std::isfinite(first[k])) << "y[" << k / hv.rows << ", " << k % hv.rows << "] = " << first[k]
                                         << " (unwritten or wrong)";
  EXPECT_LT(test::relative_l2(first.data(), ref.data(), first.size()), 1e-5);
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 4), 0) << "two runs differ: a race";
}

// The fewest columns (a multiple of 256 for the GGML block formats) whose packed row is a whole number of 16-byte
// copies, as the fast kernels need: 256 for Q4_0 (144 bytes), 2048 for Q6_K (8 super-blocks of 210 bytes), 32 for
// the bit-stream formats.
int64_t fast_row_unit(const FormatInfo& info) {
  if (info.family != Family::kGgml) return 32;
  const int64_t bytes_per_256 = 256 / info.block_elems * info.block_bytes;
  return 256 * (16 / std::gcd<int64_t>(bytes_per_256, 16));
}

// The fewest columns whose packed row is not a whole number of 16-byte copies (0 when every row is).
int64_t misaligned_row_cols(const FormatInfo& info) {
  if (info.family != Family::kGgml) return 0;
  for (int64_t blocks = 1; blocks <= 16; ++blocks)
    if (blocks * info.block_bytes % 16 != 0) return blocks * info.block_elems;
  return 0;
}

struct FastCase {
  FormatId id;
  int64_t rows;
  int64_t cols;
  int group_size;         // AFQ
  ScalarType scale_type;  // AFQ
  bool all_batches;       // 1..8, else 1, 3 and 8
};

void PrintTo(const FastCase& c, std::ostream* os) {
  *os << format_name(c.id) << " [" << c.rows << ", " << c.cols << "]";
  if (format_info(c.id).block_elems == 0) *os << " group " << c.group_size << " " << scalar_type_name(c.scale_type);
}

std::string case_name(const testing::TestParamInfo<FastCase>& info) {
  const FastCase& c = info.param;
  std::string s = std::string(format_name(c.id)) + "_" + std::to_string(c.rows) + "x" + std::to_string(c.cols);
  if (format_info(c.id).block_elems == 0)
    s += "_g" + std::to_string(c.group_size) + "_" + std::string(scalar_type_name(c.scale_type));
  else if (c.scale_type != ScalarType::kF32)
    s += "_" + std::string(scalar_type_name(c.scale_type));
  return s;
}

std::vector<FastCase> fast_cases() {
  std::vector<FastCase> cases;
  for (FormatId id : kAllFormats) {
    if (!has_fast_gemv(id)) continue;
    const FormatInfo info = format_info(id);
    if (info.block_elems == 0) {  // group-scaled (AFQ)
      for (int g : {32, 64, 128})
        for (ScalarType st : {ScalarType::kF16, ScalarType::kBF16, ScalarType::kF32}) {
          cases.push_back({id, 5, g, g, st, true});                 // one group: a row ending inside a tile
          cases.push_back({id, 37, 1024 + 3 * g, g, st, true});     // ends inside a chunk
        }
      cases.push_back({id, 67, 14336, 64, ScalarType::kBF16, false});
      cases.push_back({id, 2200, 512, 64, ScalarType::kF16, false});
      cases.push_back({id, 4229, 256, 32, ScalarType::kBF16, false});
      continue;
    }
    const int64_t unit = fast_row_unit(info);
    if (info.family != Family::kGgml) {  // MXFP4: rows may end inside a 256-column tile
      cases.push_back({id, 5, 32, 0, ScalarType::kF32, true});
      cases.push_back({id, 37, 96, 0, ScalarType::kF32, true});
      cases.push_back({id, 13, 1056, 0, ScalarType::kF32, true});
    }
    if (info.family == Family::kDense)  // 49 items a row: groups of 64 threads, two a block, the last with no row
      cases.push_back({id, 37, 392, 0, ScalarType::kF32, true});
    if (id == FormatId::kFP8_BLOCK)  // two 128-row tiles of scales, the last partial, in each scale dtype
      for (ScalarType st : {ScalarType::kF16, ScalarType::kBF16, ScalarType::kF32})
        cases.push_back({id, 133, 384 + 32, 0, st, true});
    cases.push_back({id, 1, unit, 0, ScalarType::kF32, true});
    cases.push_back({id, 37, unit * 5, 0, ScalarType::kF32, true});   // ends inside a chunk where chunks are longer
    cases.push_back({id, 133, 4096, 0, ScalarType::kF32, true});
    cases.push_back({id, 67, 14336, 0, ScalarType::kF32, false});
    cases.push_back({id, 2200, unit, 0, ScalarType::kF32, false});   // two warps per block on an H100
    cases.push_back({id, 4229, unit, 0, ScalarType::kF32, false});   // four warps per block
  }
  return cases;
}

class GemvFast : public testing::TestWithParam<FastCase> {};

TEST_P(GemvFast, MatchesCpuReference) {
  QRT_REQUIRE_GPU();
  const FastCase& c = GetParam();
  const QuantParams p = test::gemv_test_params(c.id, c.group_size, c.scale_type);
  for (test::WeightKind kind : {test::WeightKind::kQuantized, test::WeightKind::kRandomBytes}) {
    const uint64_t seed = static_cast<uint64_t>(c.rows * 977 + c.cols) * 2 + (kind == test::WeightKind::kQuantized);
    auto q = test::make_test_weights(c.id, c.rows, c.cols, p, kind, seed);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    const QuantView hv = cpu::view_of(*q, c.rows, c.cols, p);
    DeviceWeights dw;
    dw.view = hv;
    ASSERT_TRUE(upload(q->data, 0, dw, &dw.view.data));
    ASSERT_TRUE(upload(q->scales, 0, dw, &dw.view.scales));
    ASSERT_TRUE(upload(q->biases, 0, dw, &dw.view.biases));
    const std::vector<int> batches = c.all_batches ? std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}
                                                   : std::vector<int>{1, 3, 8};
    // Rows that are not whole 16-byte copies (AFQ2/3/5/6 with short groups: 32 columns of 3 bits are 12 bytes) run
    // the generic kernel; every row of 1024 columns or more in these cases is whole copies and must run the fast one.
    const bool whole_copies = (q->data.size() / static_cast<size_t>(c.rows)) % 16 == 0;
    if (c.cols % 1024 == 0) {
      ASSERT_TRUE(whole_copies) << "a case meant for the fast kernel";
    }
    const std::string expected = whole_copies ? fast_gemv_name(c.id) : "gemv_generic";
    for (int m : batches) check_gemv(c.id, hv, dw.view, m, 0, expected, seed + 31 * m, test::weight_kind_name(kind));
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GemvFast, testing::ValuesIn(fast_cases()), case_name);

// Inputs the fast kernels refuse run the generic kernel, correctly. One case per reason.
class GemvFastFallback : public testing::TestWithParam<FormatId> {};

TEST_P(GemvFastFallback, MisalignedInputsRunTheGenericKernel) {
  QRT_REQUIRE_GPU();
  const FormatId id = GetParam();
  const FormatInfo info = format_info(id);
  const QuantParams p = test::gemv_test_params(id, 64, ScalarType::kF16);
  const int64_t rows = 37;
  struct Variant {
    const char* what;
    int64_t cols;
    Offsets offsets;
  };
  std::vector<Variant> variants = {
      {"data pointer 2 bytes off", 1024, {2, 0, 0}},
      {"x 4 bytes off", 1024, {0, 0, 4}},
  };
  // Packed rows that are not whole 16-byte copies (Q4_0 with one block, Q6_K with one super-block, ...).
  if (const int64_t cols = misaligned_row_cols(info); cols != 0) variants.push_back({"row stride", cols, {}});
  if (info.block_elems == 0) variants.push_back({"F16 scales 1 byte off", 1024, {0, 1, 0}});
  if (info.family == Family::kDense) variants.push_back({"cols not a multiple of 8", 1028, {}});
  for (const Variant& v : variants) {
    auto q = test::make_test_weights(id, rows, v.cols, p, test::WeightKind::kQuantized, 5 + v.cols);
    ASSERT_TRUE(q.ok()) << q.status().to_string();
    const QuantView hv = cpu::view_of(*q, rows, v.cols, p);
    DeviceWeights dw;
    dw.view = hv;
    ASSERT_TRUE(upload(q->data, v.offsets.data, dw, &dw.view.data));
    ASSERT_TRUE(upload(q->scales, v.offsets.scales, dw, &dw.view.scales));
    ASSERT_TRUE(upload(q->biases, v.offsets.scales, dw, &dw.view.biases));
    for (int m : {1, 4, 8}) check_gemv(id, hv, dw.view, m, v.offsets.x, "gemv_generic", 77 + m, v.what);
  }
}

std::vector<FormatId> fast_formats() {
  std::vector<FormatId> ids;
  for (FormatId id : kAllFormats)
    if (has_fast_gemv(id)) ids.push_back(id);
  return ids;
}

INSTANTIATE_TEST_SUITE_P(Formats, GemvFastFallback, testing::ValuesIn(fast_formats()), test::format_test_name);

// The per-device facts the launchers size their grids with are the current device's own, for every device.
TEST(GemvDispatch, DeviceFactsComeFromTheCurrentDevice) {
  QRT_REQUIRE_GPU();
  int previous = 0, count = 0;
  ASSERT_EQ(cudaGetDevice(&previous), cudaSuccess);
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  for (int device = count - 1; device >= 0; --device) {
    ASSERT_EQ(cudaSetDevice(device), cudaSuccess);
    int sms = 0, l2 = 0, optin = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), cudaSuccess);
    ASSERT_EQ(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), cudaSuccess);
    auto facts = cuda::current_device_facts();
    ASSERT_TRUE(facts.ok()) << facts.status().to_string();
    EXPECT_EQ(facts->device, device);
    EXPECT_EQ(facts->sm_count, sms);
    EXPECT_EQ(facts->l2_bytes, l2);
    EXPECT_EQ(facts->shared_mem_per_block_optin, optin);
  }
  ASSERT_EQ(cudaSetDevice(previous), cudaSuccess);
}

// Names for reports; no device needed.
TEST(GemvDispatch, KernelNames) {
  for (FormatId id : kAllFormats) {
    const std::string want = has_fast_gemv(id) ? fast_gemv_name(id) : "gemv_generic";
    EXPECT_EQ(kernels::gemv_kernel_name(id, 1), want) << format_name(id);
  }
  EXPECT_EQ(kernels::gemv_kernel_name(FormatId::kQ4_1, 1), "gemv_generic");
  EXPECT_EQ(kernels::gemv_kernel_name(FormatId::kQ4_K, 1), "gemv_q4_k");
  EXPECT_EQ(kernels::gemv_kernel_name(FormatId::kMXFP4, 8), "gemv_mxfp4");
  EXPECT_EQ(kernels::gemv_kernel_name(FormatId::kAFQ4, 4), "gemv_afq4");
}

// Bad arguments are refused before anything reaches the device (so these run without one).
TEST(GemvDispatch, RefusesBadArguments) {
  alignas(16) static uint8_t fake[256];
  const float* x = reinterpret_cast<const float*>(fake);
  float* y = reinterpret_cast<float*>(fake);
  QuantView w;
  w.data = fake;
  w.rows = 4;
  w.cols = 256;
  for (int m : {0, 9, -1})
    EXPECT_EQ(kernels::gemv(FormatId::kQ4_K, w, x, m, y, nullptr).code(), ErrorCode::kInvalidArgument) << m;
  EXPECT_EQ(kernels::gemv(FormatId::kQ4_K, w, nullptr, 1, y, nullptr).code(), ErrorCode::kInvalidArgument);
  QuantView odd = w;
  odd.cols = 100;  // not a multiple of the super-block
  EXPECT_EQ(kernels::gemv(FormatId::kQ4_K, odd, x, 1, y, nullptr).code(), ErrorCode::kInvalidArgument);
  QuantView afq = w;
  afq.params.group_size = 64;
  afq.params.scale_type = ScalarType::kBF16;
  EXPECT_EQ(kernels::gemv(FormatId::kAFQ4, afq, x, 1, y, nullptr).code(), ErrorCode::kInvalidArgument)
      << "AFQ without its scales and biases";
  afq.scales = afq.biases = fake;
  afq.params.group_size = 48;
  EXPECT_EQ(kernels::gemv(FormatId::kAFQ4, afq, x, 1, y, nullptr).code(), ErrorCode::kInvalidArgument)
      << "group size 48";
  QuantView mx = w;
  EXPECT_EQ(kernels::gemv(FormatId::kMXFP4, mx, x, 1, y, nullptr).code(), ErrorCode::kInvalidArgument)
      << "MXFP4 without its scales";
}

}  // namespace
}  // namespace qrt
