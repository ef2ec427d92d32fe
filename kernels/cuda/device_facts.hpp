// Per-device facts that kernel launchers size their grids with (SM count, shared-memory limits, L2 size), read from
// cudaGetDeviceProperties once per device and cached. The cache is the only mutable state and is thread-safe; it
// never assumes device 0: the facts are those of whichever device is current on the calling thread.
#pragma once

#include <cstdint>

#include "qrt/status.hpp"

namespace qrt::cuda {

struct DeviceFacts {
  int device = -1;
  int sm_count = 0;
  int compute_major = 0;
  int compute_minor = 0;
  int64_t shared_mem_per_block = 0;        // without the cudaFuncSetAttribute opt-in
  int64_t shared_mem_per_block_optin = 0;  // the most a kernel may request after opting in
  int64_t shared_mem_per_sm = 0;
  int64_t l2_bytes = 0;
};

// Facts of the calling thread's current device. Errors name the failed CUDA call.
Result<DeviceFacts> current_device_facts();

}  // namespace qrt::cuda
