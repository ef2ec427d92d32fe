// Host-to-device copies through a ring of pinned (page-locked) staging buffers. The source (usually a file
// mapping, or caller memory that may be reused at once) is memcpy'd into a staging slot and the slot is copied
// to the device asynchronously; while the DMA of one slot runs, the host fills the next. A slot is reused only
// after the event recorded behind its last copy has completed, so no copy ever reads a slot being refilled.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <span>
#include <vector>

#include "qrt/status.hpp"

namespace qrt {

class PinnedStaging {
 public:
  // `slots` buffers of `slot_bytes` each, allocated on first use (with the owning device current).
  PinnedStaging(int slots, uint64_t slot_bytes);
  ~PinnedStaging();  // waits for copies in flight, then frees the buffers
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // Queues a copy of host[0, bytes) to device[0, bytes). Slot i's chunks go on streams[i % streams.size()].
  // When this returns the host memory is no longer needed; the device memory is written once the queued copies
  // run (ordered after earlier work on those streams).
  Status copy(const void* host, void* device, uint64_t bytes, std::span<const cudaStream_t> streams);
  // Waits until every queued copy has finished.
  Status wait();

  uint64_t slot_bytes() const { return slot_bytes_; }

 private:
  struct Slot {
    void* host = nullptr;
    cudaEvent_t done = nullptr;
    bool pending = false;
  };
  Status ensure_allocated();

  std::vector<Slot> slots_;
  uint64_t slot_bytes_ = 0;
  size_t next_ = 0;
  bool allocated_ = false;
};

}  // namespace qrt
