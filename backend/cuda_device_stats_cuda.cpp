// CUDA versions of the device figures in cuda_device_stats.hpp.
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"
#include "backend/cuda_context.hpp"
#include "backend/cuda_device_stats.hpp"

namespace qrt {

namespace {

// Checks the index before any call that would leave a sticky error behind for a device that does not exist.
Status check_device(int device) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return cuda_status(err, "cudaGetDeviceCount");
  }
  if (device < 0 || device >= count)
    return not_found("CUDA device " + std::to_string(device) + " does not exist (this machine has " +
                     std::to_string(count) + ")");
  return ok_status();
}

// Frees what it holds on every path out of cuda_copy_bandwidth.
struct CopyResources {
  void* a = nullptr;
  void* b = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~CopyResources() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
    if (a != nullptr) cudaFree(a);
    if (b != nullptr) cudaFree(b);
  }
};

}  // namespace

Result<CudaMemoryUse> cuda_memory_use(int device) {
  QRT_TRY(check_device(device));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::enter(device));
  size_t free_bytes = 0, total_bytes = 0;
  QRT_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  return CudaMemoryUse{static_cast<uint64_t>(total_bytes - free_bytes), static_cast<uint64_t>(total_bytes)};
}

Result<std::string> cuda_device_name(int device) {
  QRT_TRY(check_device(device));
  cudaDeviceProp p{};
  QRT_CUDA_TRY(cudaGetDeviceProperties(&p, device));
  return std::string(p.name);
}

Result<double> cuda_copy_bandwidth(int device, uint64_t bytes, int repetitions) {
  if (bytes == 0 || repetitions < 1)
    return invalid_argument("copy bandwidth: need a positive size and repetition count, found " +
                            std::to_string(bytes) + " bytes, " + std::to_string(repetitions) + " repetitions");
  QRT_TRY(check_device(device));
  QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::enter(device));
  CopyResources r;
  QRT_CUDA_TRY(cudaMalloc(&r.a, bytes));
  QRT_CUDA_TRY(cudaMalloc(&r.b, bytes));
  QRT_CUDA_TRY(cudaMemset(r.a, 0x5A, bytes));  // touch both buffers so no first-use cost is timed
  QRT_CUDA_TRY(cudaMemset(r.b, 0, bytes));
  QRT_CUDA_TRY(cudaEventCreate(&r.start));
  QRT_CUDA_TRY(cudaEventCreate(&r.stop));
  for (int i = 0; i < 2; ++i) QRT_CUDA_TRY(cudaMemcpy(r.b, r.a, bytes, cudaMemcpyDeviceToDevice));
  std::vector<float> ms(static_cast<size_t>(repetitions));
  for (float& t : ms) {
    QRT_CUDA_TRY(cudaEventRecord(r.start));
    QRT_CUDA_TRY(cudaMemcpyAsync(r.b, r.a, bytes, cudaMemcpyDeviceToDevice));
    QRT_CUDA_TRY(cudaEventRecord(r.stop));
    QRT_CUDA_TRY(cudaEventSynchronize(r.stop));
    QRT_CUDA_TRY(cudaEventElapsedTime(&t, r.start, r.stop));
  }
  std::sort(ms.begin(), ms.end());
  const double median_s = static_cast<double>(ms[ms.size() / 2]) * 1e-3;
  if (!(median_s > 0.0)) return internal_error("copy bandwidth: the timed copy took no time");
  return 2.0 * static_cast<double>(bytes) / median_s;  // bytes read + bytes written
}

}  // namespace qrt
