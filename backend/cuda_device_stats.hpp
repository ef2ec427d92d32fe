// Device-wide figures for benchmarks: memory in use on a CUDA device and its measured copy bandwidth. Compiles
// without a CUDA toolkit: a build without CUDA returns unsupported (cuda_device_stats.cpp), so callers such as
// bench-model need no #ifdef. The CUDA versions live in cuda_device_stats_cuda.cpp.
#pragma once

#include <cstdint>
#include <string>

#include "qrt/status.hpp"

namespace qrt {

// cudaMemGetInfo on `device`: memory in use by every process on the device, not only this one.
struct CudaMemoryUse {
  uint64_t used_bytes = 0;  // total - free
  uint64_t total_bytes = 0;
};
Result<CudaMemoryUse> cuda_memory_use(int device);

// The device's name from cudaGetDeviceProperties ("NVIDIA H100 80GB HBM3").
Result<std::string> cuda_device_name(int device);

// Device-to-device copy bandwidth in bytes/s, counting the bytes read plus the bytes written: the median of
// `repetitions` timed cudaMemcpyAsync calls of `bytes` bytes (after two untimed ones). This is the roofline a
// memory-bound kernel is judged against. Allocates 2 * bytes on the device for the duration of the call.
Result<double> cuda_copy_bandwidth(int device, uint64_t bytes, int repetitions);

}  // namespace qrt
