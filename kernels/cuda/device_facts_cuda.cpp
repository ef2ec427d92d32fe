#include "kernels/cuda/device_facts.hpp"

#include <cuda_runtime.h>

#include <mutex>
#include <vector>

#include "kernels/cuda/cuda_check.hpp"

namespace qrt::cuda {
namespace {

// One slot per device index, filled on first use. cudaGetDeviceProperties takes milliseconds, so launchers must not
// call it per launch; a mutex is fine because the cache is read once per launch at most and contention is nil.
struct FactsCache {
  std::mutex mutex;
  std::vector<DeviceFacts> facts;  // facts[d].device == d once filled, -1 before
};

FactsCache& cache() {
  static FactsCache c;
  return c;
}

}  // namespace

Result<DeviceFacts> current_device_facts() {
  int device = 0;
  QRT_CUDA_TRY(cudaGetDevice(&device));
  FactsCache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (device < static_cast<int>(c.facts.size()) && c.facts[static_cast<size_t>(device)].device == device)
      return c.facts[static_cast<size_t>(device)];
  }
  cudaDeviceProp p{};
  QRT_CUDA_TRY(cudaGetDeviceProperties(&p, device));
  DeviceFacts f;
  f.device = device;
  f.sm_count = p.multiProcessorCount;
  f.compute_major = p.major;
  f.compute_minor = p.minor;
  f.shared_mem_per_block = static_cast<int64_t>(p.sharedMemPerBlock);
  f.shared_mem_per_block_optin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  f.shared_mem_per_sm = static_cast<int64_t>(p.sharedMemPerMultiprocessor);
  f.l2_bytes = static_cast<int64_t>(p.l2CacheSize);
  if (f.sm_count <= 0) return internal_error("device " + std::to_string(device) + " reports no multiprocessors");
  std::lock_guard<std::mutex> lock(c.mutex);
  if (device >= static_cast<int>(c.facts.size())) c.facts.resize(static_cast<size_t>(device) + 1);
  c.facts[static_cast<size_t>(device)] = f;
  return f;
}

}  // namespace qrt::cuda
