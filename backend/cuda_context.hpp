// Everything one CUDA device needs, owned per device (no process-wide state: several contexts, on the same or
// different devices, can live in one process): the device's properties read once, a compute stream on which every
// op runs in order, two copy streams for weight uploads, a cuBLAS handle bound to the compute stream, and a caching
// pool for activation memory. Every entry point of code using a context first makes its device current through
// ScopedDevice, so the caller's current device does not matter and is restored afterwards.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <source_location>
#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "qrt/status.hpp"
#include "backend/caching_pool.hpp"

namespace qrt {

// cuBLAS errors as Status values, naming the call and where it was made.
Status cublas_status(cublasStatus_t status, const char* call,
                     std::source_location where = std::source_location::current());
#define QRT_CUBLAS_TRY(call) QRT_TRY(::qrt::cublas_status((call), #call))

// Facts about the device, from cudaGetDeviceProperties (never hard-coded).
struct CudaDeviceProps {
  int device = 0;
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int sm_count = 0;
  uint64_t shared_mem_per_block = 0;        // without opt-in
  uint64_t shared_mem_per_block_optin = 0;  // the most a kernel may ask for with cudaFuncSetAttribute
  uint64_t l2_bytes = 0;
  uint64_t global_mem_bytes = 0;
  int max_threads_per_block = 0;
  int warp_size = 0;
};

// Makes a device current for a scope and restores the previous one. enter() fails when the device is unusable.
class ScopedDevice {
 public:
  static Result<ScopedDevice> enter(int device, std::source_location where = std::source_location::current());
  ScopedDevice(ScopedDevice&& other) noexcept : previous_(other.previous_), device_(other.device_) {
    other.previous_ = -1;
  }
  ScopedDevice& operator=(ScopedDevice&&) = delete;
  ScopedDevice(const ScopedDevice&) = delete;
  ~ScopedDevice();

 private:
  ScopedDevice(int previous, int device) : previous_(previous), device_(device) {}
  int previous_ = -1;  // -1: nothing to restore
  int device_ = -1;
};

// Where activation memory (allocate(): scratch, KV cache) comes from. Weights are plain cudaMalloc either way.
//   kCachingPool    cudaMalloc'd blocks kept per size class by CachingPool and reused in stream order;
//   kStreamOrdered  cudaMallocAsync / cudaFreeAsync on the compute stream from the device's default memory pool,
//                   its release threshold raised so freed memory stays cached (graph-capturable, safe across
//                   streams). The pool is the default until the GPU benchmark (bench/gpu/allocator_bench.cpp)
//                   says otherwise.
enum class DeviceAllocator { kCachingPool, kStreamOrdered };
const char* device_allocator_name(DeviceAllocator a);

class CudaContext {
 public:
  // Opens `device` (an index below cudaGetDeviceCount()).
  static Result<std::unique_ptr<CudaContext>> create(int device,
                                                     DeviceAllocator allocator = DeviceAllocator::kCachingPool);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  int device() const { return props_.device; }
  const CudaDeviceProps& props() const { return props_; }
  cudaStream_t compute_stream() const { return compute_; }
  // Two streams for host-to-device weight copies, so that one copy runs while the next is staged.
  cudaStream_t copy_stream(int i) const { return copy_[i & 1]; }
  cublasHandle_t cublas() const { return cublas_; }
  CachingPool& pool() { return *pool_; }
  const CachingPool& pool() const { return *pool_; }

  // Makes this context's device current until the returned guard is destroyed.
  Result<ScopedDevice> activate() const { return ScopedDevice::enter(props_.device); }

 private:
  CudaContext() = default;
  Status init(int device, DeviceAllocator allocator);

  CudaDeviceProps props_;
  cudaStream_t compute_ = nullptr;
  cudaStream_t copy_[2] = {nullptr, nullptr};
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<CachingPool> pool_;
};

}  // namespace qrt
