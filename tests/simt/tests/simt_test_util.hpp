// Helpers for the SIMT layer's own tests: a typed device array that frees itself.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

namespace qrt::simt::test {

template <class T>
struct DeviceArray {
  explicit DeviceArray(size_t n) : count(n) { EXPECT_EQ(cudaMalloc(&ptr, n * sizeof(T)), cudaSuccess); }
  explicit DeviceArray(const std::vector<T>& values) : DeviceArray(values.size()) { upload(values); }
  ~DeviceArray() { cudaFree(ptr); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void upload(const std::vector<T>& values) {
    EXPECT_EQ(cudaMemcpy(ptr, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  // Waits for the device (a blocking copy on the legacy stream), then copies back.
  std::vector<T> download() const {
    std::vector<T> out(count);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr, count * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

  T* ptr = nullptr;
  size_t count = 0;
};

}  // namespace qrt::simt::test
