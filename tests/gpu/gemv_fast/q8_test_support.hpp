// Shared by the integer-dot GEMV and tensor-core GEMM tests: device buffers and weights, and x quantized to the two
// int8 limbs on the host (quantize_q8_block, with the values the limbs hold) and on the device
// (quantize_q8_activations).
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/linear/q8_activations.hpp"
#include "kernels/quant/common.hpp"

namespace qrt::test {

using namespace ::qrt::kernels;  // kQ8Block*, q8_activations_at, quantize_q8_*

struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
using DevicePtr = std::unique_ptr<void, CudaFree>;

inline DevicePtr device_copy(const void* host, size_t bytes) {
  void* p = nullptr;
  if (cudaMalloc(&p, bytes == 0 ? 1 : bytes) != cudaSuccess) return DevicePtr();
  if (bytes != 0 && cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice) != cudaSuccess) {
    cudaFree(p);
    return DevicePtr();
  }
  return DevicePtr(p);
}

// A weight's parts on the device, and its view with the device pointers (parts the format lacks stay null).
struct DeviceWeights {
  DevicePtr data, scales, biases;
  quant::QuantView view;
  explicit operator bool() const { return data != nullptr && scales != nullptr && biases != nullptr; }
};
inline DeviceWeights upload_weights(const quant::QuantBuffers& q, const quant::QuantView& host_view) {
  DeviceWeights d{device_copy(q.data.data(), q.data.size()), device_copy(q.scales.data(), q.scales.size()),
                  device_copy(q.biases.data(), q.biases.size()), host_view};
  d.view.data = static_cast<const uint8_t*>(d.data.get());
  d.view.scales = q.scales.empty() ? nullptr : static_cast<const uint8_t*>(d.scales.get());
  d.view.biases = q.biases.empty() ? nullptr : static_cast<const uint8_t*>(d.biases.get());
  return d;
}

struct HostQ8 {
  std::vector<int8_t> codes;
  std::vector<float> scales;
  std::vector<float> values;  // what the limbs hold: d_hi · q_hi + d_lo · q_lo
};

inline HostQ8 quantize_on_host(const std::vector<float>& x) {
  const size_t blocks = x.size() / kQ8BlockCols;
  HostQ8 h{std::vector<int8_t>(blocks * kQ8BlockCodeBytes), std::vector<float>(blocks * kQ8BlockScaleFloats),
           std::vector<float>(x.size())};
  for (size_t b = 0; b < blocks; ++b) {
    quantize_q8_block(x.data() + b * kQ8BlockCols, h.codes.data() + b * kQ8BlockCodeBytes,
                      h.scales.data() + b * kQ8BlockScaleFloats);
    const float* s = h.scales.data() + b * kQ8BlockScaleFloats;
    for (int j = 0; j < kQ8BlockCols; ++j)
      h.values[b * kQ8BlockCols + j] =
          static_cast<float>(static_cast<double>(s[0]) * h.codes[b * kQ8BlockCodeBytes + j] +
                             static_cast<double>(s[1]) * h.codes[b * kQ8BlockCodeBytes + kQ8BlockCols + j]);
  }
  return h;
}

// Runs the device quantizer on x [m, cols]; fills `out` with its codes and scales.
inline ::testing::AssertionResult quantize_on_device(const std::vector<float>& x, int64_t m, int64_t cols, HostQ8* out,
                                              DevicePtr* keep = nullptr) {
  DevicePtr dx = device_copy(x.data(), x.size() * 4);
  void* raw = nullptr;
  const uint64_t bytes = q8_activation_bytes(m, cols);
  if (!dx || cudaMalloc(&raw, bytes) != cudaSuccess) return ::testing::AssertionFailure() << "cudaMalloc";
  DevicePtr dq(raw);
  cudaMemset(raw, 0x5A, bytes);
  const Q8Activations q = q8_activations_at(raw, m, cols);
  const Status s = kernels::quantize_q8_activations(static_cast<const float*>(dx.get()), m, cols, q, nullptr);
  if (!s.ok()) return ::testing::AssertionFailure() << s.to_string();
  const size_t blocks = static_cast<size_t>(m * cols / kQ8BlockCols);
  out->codes.resize(blocks * kQ8BlockCodeBytes);
  out->scales.resize(blocks * kQ8BlockScaleFloats);
  if (cudaMemcpy(out->codes.data(), q.codes, out->codes.size(), cudaMemcpyDeviceToHost) != cudaSuccess ||
      cudaMemcpy(out->scales.data(), q.scales, out->scales.size() * 4, cudaMemcpyDeviceToHost) != cudaSuccess)
    return ::testing::AssertionFailure() << "copy back: " << cudaGetErrorString(cudaGetLastError());
  if (keep != nullptr) *keep = std::move(dq);
  return ::testing::AssertionSuccess();
}

}  // namespace qrt::test
