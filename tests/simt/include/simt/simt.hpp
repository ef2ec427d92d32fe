// What tests may ask the SIMT layer beyond the CUDA API: host-side costs counted per stream (kernel and graph
// launches, copies, synchronizations), so a test can assert e.g. the launches of one decode step. Only in gpu-sim
// builds (QRT_SIMT is defined there).
#pragma once

#include <cstdint>

#include "simt/types.hpp"

namespace qrt::simt {

struct StreamCounters {
  uint64_t kernel_launches = 0;        // <<<...>>> launches enqueued (not counting kernels inside graphs)
  uint64_t graph_launches = 0;         // cudaGraphLaunch calls
  uint64_t graph_kernel_nodes = 0;     // kernels run as part of a graph launch
  uint64_t memcpy_host_to_device = 0;  // copies enqueued, by direction
  uint64_t memcpy_device_to_host = 0;
  uint64_t memcpy_device_to_device = 0;
  uint64_t memcpy_host_to_device_bytes = 0;
  uint64_t memcpy_device_to_host_bytes = 0;
  uint64_t memcpy_device_to_device_bytes = 0;
  uint64_t memsets = 0;
  uint64_t host_sync_calls = 0;        // calls that wait for this stream (stream/event/device sync, blocking copies)
  uint64_t host_syncs = 0;             // those that found work of the stream still unfinished: real waits
  uint64_t collectives = 0;            // NCCL collectives enqueued
  uint64_t programmatic_launches = 0;  // kernels (launched or graph nodes) with programmatic stream serialization

  StreamCounters& operator+=(const StreamCounters& o);
  StreamCounters& operator-=(const StreamCounters& o);  // counts since an earlier reading `o`
  friend StreamCounters operator-(StreamCounters a, const StreamCounters& b) { return a -= b; }
};

// Counters of one stream (0 or cudaStreamLegacy: the calling thread's current device's default stream).
StreamCounters stream_counters(cudaStream_t stream);
// Every stream of a device, destroyed ones included.
StreamCounters device_counters(int device);
// Zeroes every counter of every device.
void reset_counters();
// Blocks of programmatic launches (launch.hpp) run so far in this process in which some thread exited without
// calling cudaGridDependencySynchronize: on a GPU such a thread may read its inputs before the kernel that writes them
// has finished, or write what that kernel still reads. Counted when the block runs (synchronize first).
uint64_t programmatic_blocks_without_wait();

}  // namespace qrt::simt
