// The device figures for builds without CUDA (CMake picks this file or cuda_device_stats_cuda.cpp).
#include "backend/cuda_device_stats.hpp"

namespace qrt {

namespace {
Status no_cuda(int device) {
  return unsupported(
      "device cuda:" + std::to_string(device) +
      ": this build of qrt has no CUDA support (configured without a CUDA toolkit or with QRT_CUDA=OFF)");
}
}  // namespace

Result<CudaMemoryUse> cuda_memory_use(int device) { return no_cuda(device); }
Result<std::string> cuda_device_name(int device) { return no_cuda(device); }
Result<double> cuda_copy_bandwidth(int device, uint64_t, int) { return no_cuda(device); }

}  // namespace qrt
