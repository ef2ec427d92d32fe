// A CPU backend and a CUDA backend side by side: the same random inputs uploaded to both, GPU outputs poisoned
// with NaN before each op (an element the kernel forgets stays NaN and fails the finiteness check), results
// compared by relative L2 against the CPU reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "decode_only_blocks.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/common.hpp"
#include "kernels/quant/mx.hpp"
#include "kernels/linear/gemm_q8_mma.hpp"
#include "kernels/linear/gemv_dp4a.hpp"
#include "kernels/moe/expert_gemv.hpp"
#include "backend/cpu_backend.hpp"
#include "backend/cuda_backend.hpp"
#include "test_support.hpp"

namespace qrt::test {

template <class T>
struct Dual {
  DeviceView<T> cpu;
  DeviceView<T> gpu;
};

// `values` rounded to a KV cache element type (round to nearest even; fp8 saturating; q8_0 quantized by GGML's
// reference quantizer, 32 values at a time), as the bytes of a cache of `elements` elements of that type (past
// values.size(): zeros).
inline std::vector<uint8_t> kv_type_bits(KvType type, const std::vector<float>& values, size_t elements) {
  std::vector<uint8_t> bits(static_cast<size_t>(kv_row_bytes(type, static_cast<int64_t>(elements))));
  if (type == KvType::kQ8_0) {
    std::vector<float> padded(values);
    padded.resize(elements, 0.0f);
    for (size_t b = 0; b < elements / kKvQ8Block; ++b)
      quant::quantize_q8_0_block(padded.data() + b * kKvQ8Block, bits.data() + b * kKvQ8BlockBytes);
    return bits;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == KvType::kF32) {
      std::memcpy(bits.data() + 4 * i, &values[i], 4);
    } else if (type == KvType::kFp8) {
      bits[i] = quant::f32_to_e4m3(values[i]);
    } else {
      const uint16_t h = type == KvType::kF16 ? quant::f32_to_fp16(values[i]) : quant::f32_to_bf16(values[i]);
      std::memcpy(bits.data() + 2 * i, &h, 2);
    }
  }
  return bits;
}

// A weight on both backends.
struct DualWeight {
  WeightHandle cpu;
  WeightHandle gpu;
};

// A tensor quantized matrix by matrix (one [rows, cols] matrix, or `experts` of them stacked), owning its bytes.
struct OwnedTensor {
  QuantTensor tensor;
  quant::QuantBuffers buffers;
};

// The parameters the format tests use: group size 64 where the format takes one, f16 scales where it has a choice.
inline quant::QuantParams default_params(quant::FormatId format) {
  quant::QuantParams p;
  if (!quant::format_info(format).has_quantizer) return p;  // decode-only GGML blocks: no parameters
  p.group_size = quant::format_info(format).block_elems == 0 ? 64 : 0;
  p.scale_type = quant::ScalarType::kF16;
  return p;
}

// values: [matrices * rows, cols]; shape [rows, cols] or [experts, rows, cols]. Formats without a quantizer (the
// decode-only GGML ones) get random blocks with finite scales instead (decode_only_blocks.hpp); `values` is unused.
inline std::unique_ptr<OwnedTensor> quantized_tensor(quant::FormatId format, std::vector<int64_t> shape,
                                                     const std::vector<float>& values, quant::QuantParams params) {
  auto o = std::make_unique<OwnedTensor>();
  const int64_t cols = shape.back(), rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  const int64_t matrices = shape.size() == 3 ? shape[0] : 1;
  const auto decode_only = decode_only_scale_field(format);
  for (int64_t m = 0; m < matrices; ++m) {
    if (decode_only) {
      const auto blocks = random_blocks(*decode_only, rows, cols, 7000 + static_cast<uint64_t>(m));
      o->buffers.data.insert(o->buffers.data.end(), blocks.begin(), blocks.end());
      continue;
    }
    auto q = cpu::quantize(format, values.data() + m * rows * cols, rows, cols, params);
    EXPECT_TRUE(q.ok()) << q.status().to_string();
    if (!q.ok()) return o;
    o->buffers.data.insert(o->buffers.data.end(), q->data.begin(), q->data.end());
    o->buffers.scales.insert(o->buffers.scales.end(), q->scales.begin(), q->scales.end());
    o->buffers.biases.insert(o->buffers.biases.end(), q->biases.begin(), q->biases.end());
  }
  o->tensor.name = "test." + std::string(quant::format_name(format));
  o->tensor.format = format;
  o->tensor.shape = std::move(shape);
  o->tensor.params = params;
  o->tensor.data = {o->buffers.data.data(), o->buffers.data.size()};
  if (!o->buffers.scales.empty()) o->tensor.scales = {o->buffers.scales.data(), o->buffers.scales.size()};
  if (!o->buffers.biases.empty()) o->tensor.biases = {o->buffers.biases.data(), o->buffers.biases.size()};
  return o;
}

// Every matrix of a model's F32 tensor table (2-D, and stacks of experts one expert at a time) re-encoded in `format`
// with its default parameters; norms and biases stay F32. The table then points into the returned tensors' bytes.
inline std::list<std::unique_ptr<OwnedTensor>> quantize_matrices(TensorTable& tensors, quant::FormatId format) {
  std::list<std::unique_ptr<OwnedTensor>> packed;
  for (auto& [name, t] : tensors) {
    if (t.shape.size() < 2) continue;
    const auto* values = reinterpret_cast<const float*>(t.data.data);
    packed.push_back(quantized_tensor(format, t.shape, std::vector<float>(values, values + t.data.size / 4),
                                      default_params(format)));
    const std::string keep_name = t.name;
    t = packed.back()->tensor;
    t.name = keep_name;
  }
  return packed;
}

class BackendPair : public testing::Test {
 protected:
  // Whether kernel launches are counted (the SIMT layer's stream counters; nothing counts them on a GPU).
  static constexpr bool kCounted =
#if defined(QRT_SIMT)
      true;
#else
      false;
#endif
  void SetUp() override {
    QRT_REQUIRE_GPU();
    auto b = CudaBackend::create(0);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    gpu_ = std::move(*b);
  }
  void TearDown() override {
    if (gpu_ == nullptr) return;
    // Every op issued must have completed without a device fault.
    Status s = gpu_->synchronize();
    EXPECT_TRUE(s.ok()) << s.to_string();
    keep_.clear();
    EXPECT_EQ(gpu_->live_allocations(), 0u) << "a test buffer was not freed";
  }

  template <class T>
  Dual<T> alloc(int64_t rows, int64_t cols) {
    const uint64_t bytes = static_cast<uint64_t>(rows * cols) * sizeof(T);
    auto c = allocate_scoped(cpu_, bytes);
    auto g = allocate_scoped(*gpu_, bytes);
    EXPECT_TRUE(c.ok() && g.ok()) << (c.ok() ? g.status().to_string() : c.status().to_string());
    keep_.push_back(std::move(c).value());
    keep_.push_back(std::move(g).value());
    return {keep_[keep_.size() - 2].view<T>(rows, cols), keep_.back().view<T>(rows, cols)};
  }
  // Random N(0, scale²) floats on both backends.
  Dual<float> input(int64_t rows, int64_t cols, uint64_t seed, float scale = 1.0f) {
    return input_values(random_normal(static_cast<size_t>(rows * cols), seed, scale), rows, cols);
  }
  template <class T>
  Dual<T> input_values(const std::vector<T>& values, int64_t rows, int64_t cols) {
    EXPECT_EQ(values.size(), static_cast<size_t>(rows * cols));
    Dual<T> d = alloc<T>(rows, cols);
    EXPECT_TRUE(cpu_.upload(values.data(), d.cpu.data, values.size() * sizeof(T)).ok());
    Status s = gpu_->upload(values.data(), d.gpu.data, values.size() * sizeof(T));
    EXPECT_TRUE(s.ok()) << s.to_string();
    return d;
  }
  // An output: zeros on the CPU, NaN on the GPU until the op writes it.
  Dual<float> output(int64_t rows, int64_t cols) {
    Dual<float> d = alloc<float>(rows, cols);
    std::fill(d.cpu.data, d.cpu.data + rows * cols, 0.0f);
    poison(d.gpu);
    return d;
  }
  void poison(F32View gpu_view) {
    const std::vector<float> nan(static_cast<size_t>(gpu_view.numel()), std::numeric_limits<float>::quiet_NaN());
    Status s = gpu_->upload(nan.data(), gpu_view.data, nan.size() * sizeof(float));
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
  template <class T>
  std::vector<T> cpu_values(const DeviceView<T>& v) {
    return std::vector<T>(v.data, v.data + v.numel());
  }
  template <class T>
  std::vector<T> gpu_values(const DeviceView<T>& v) {
    std::vector<T> out(static_cast<size_t>(v.numel()));
    Status s = gpu_->download(v.data, out.data(), out.size() * sizeof(T));
    EXPECT_TRUE(s.ok()) << s.to_string();
    return out;
  }
  // Experts' outputs [slots, out] where slot `bad` had an id outside the stack: its rows NaN (the device cannot
  // report the id), every other element within `tol` of the CPU's.
  static void expect_bad_slot_only(const std::vector<float>& got, const std::vector<float>& want, int64_t slots,
                                   int64_t out, int64_t bad, float tol, const std::string& what) {
    for (int64_t slot = 0; slot < slots; ++slot)
      for (int64_t r = 0; r < out; ++r) {
        const float g = got[static_cast<size_t>(slot * out + r)];
        if (slot == bad) {
          EXPECT_TRUE(std::isnan(g)) << what << " row " << r << " of the slot with a bad id";
        } else {
          EXPECT_NEAR(g, want[static_cast<size_t>(slot * out + r)], tol) << what << " slot " << slot << " row " << r;
        }
      }
  }
  // The prefill GEMM (batches above kernels::kGemvMaxBatch) rounds x and W to fp16 for the tensor cores: every
  // value within 2^-11 relative, so on random data the products land about 4e-4 from fp32 in relative L2. This
  // bound leaves room for that; a wrong row, tile or element shows as O(1).
  static constexpr double kGemmTolerance = 2e-3;
  // Decode GEMVs of the GGML integer formats quantize x to two int8 limbs (kernels/linear/q8_activations.hpp): on
  // random data about 2e-5 from fp32 in relative L2. So does the int8 tensor-core GEMM, which launch tuning may pick
  // for batches of 2..8 on a GPU (AFQ2/3/5/6 have no integer-dot GEMV, but a GEMM policy: 2.1e-5 on an H100). Every
  // other decode GEMV accumulates fp32 products (1e-5).
  static constexpr double kIntegerGemvTolerance = 5e-5;
  static double gemv_tolerance(quant::FormatId format, int64_t cols) {
    const quant::QuantView probe = integer_gemv_probe(cols);
    return kernels::gemv_dp4a_applies(format, probe) || kernels::gemm_q8_mma_applies(format, probe)
               ? kIntegerGemvTolerance
               : 1e-5;
  }
  // A well-aligned stand-in for a [1, cols] weight (with AFQ's groups of 64 and F16 scales), for asking
  // gemv_dp4a_applies whether a format's decode GEMV quantizes x.
  static quant::QuantView integer_gemv_probe(int64_t cols) {
    alignas(16) static const uint8_t probe[64] = {};
    quant::QuantView v;
    v.data = probe;
    v.scales = probe + 32;
    v.biases = probe + 48;
    v.rows = 1;
    v.cols = cols;
    v.params.group_size = 64;
    v.params.scale_type = quant::ScalarType::kF16;
    return v;
  }
  // Whether a stack of [out, in] experts in `format` takes the integer-dot expert kernel (its matrix takes the
  // integer-dot GEMV and each expert's parts start as aligned as the first's).
  static bool expert_dp4a_applies(quant::FormatId format, int64_t out, int64_t in) {
    quant::QuantView v = integer_gemv_probe(in);
    v.rows = out;
    const auto sizes = cpu::part_sizes(format, out, in, test::default_params(format));
    return sizes.ok() && kernels::expert_gemv_dp4a_applies(format, v, *sizes);
  }
  // All GPU values finite and within `bound` relative L2 of the CPU's.
  void expect_close(const Dual<float>& d, double bound, const std::string& what) {
    const auto want = cpu_values(d.cpu);
    const auto got = gpu_values(d.gpu);
    size_t bad = 0;
    for (float v : got) bad += !std::isfinite(v);
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " outputs not finite (unwritten?)";
    for (float v : want) ASSERT_TRUE(std::isfinite(v)) << what << ": the reference itself is not finite";
    EXPECT_LE(relative_l2(got.data(), want.data(), got.size()), bound) << what;
  }
  DualWeight weight(const QuantTensor& t) {
    auto c = cpu_.upload_weight(t);
    auto g = gpu_->upload_weight(t);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (!c.ok() || !g.ok()) return {};
    return {*c, *g};
  }
  // An F32 tensor of random values (norm weights, biases, dense matrices); the bytes live in the fixture.
  DualWeight f32_weight(std::vector<int64_t> shape, uint64_t seed, float scale = 1.0f, float offset = 0.0f) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float>& v = storage_.emplace_back(random_normal(static_cast<size_t>(n), seed, scale));
    for (float& x : v) x += offset;
    QuantTensor t;
    t.name = "test.f32";
    t.shape = std::move(shape);
    t.data = {reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(float)};
    return weight(t);
  }

  CpuBackend cpu_;
  std::unique_ptr<CudaBackend> gpu_;
  std::vector<ScopedBuffer> keep_;  // declared after the backends: freed before them
  std::list<std::vector<float>> storage_;
};

}  // namespace qrt::test
