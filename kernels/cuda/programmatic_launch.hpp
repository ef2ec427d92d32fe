// The process-wide switch for programmatic dependent launch (kernels/cuda/programmatic_launch.cuh has the device
// side and the launcher). Host-only, so that the backends' C++ files can set it.
#pragma once

#include <atomic>

namespace qrt::kernels {

// One switch per process: the backends of one process share a GPU generation.
inline std::atomic<bool>& programmatic_launch_switch() {
  static std::atomic<bool> on{false};
  return on;
}
inline bool programmatic_launch() { return programmatic_launch_switch().load(std::memory_order_relaxed); }
inline void set_programmatic_launch(bool on) { programmatic_launch_switch().store(on, std::memory_order_relaxed); }

}  // namespace qrt::kernels
