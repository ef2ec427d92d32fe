// A simple caching allocator for one device: freed blocks are kept per size class and handed out again to a later
// request of the same class, so a forward pass that reallocates its scratch buffers does not pay cudaMalloc /
// cudaFree (which synchronizes the device) every time. The raw allocator is injected, so the bookkeeping is plain
// host code that the unit tests drive with malloc. With Reuse::kNone the pool only keeps the books (live blocks,
// their bytes and the peak) and hands every release straight back: for a raw allocator that caches by itself, such
// as CUDA's stream-ordered cudaMallocAsync with a memory pool.
//
// Reuse is only safe because every op of a backend runs on one stream: a block released while kernels on that
// stream still read it is handed out again to work issued after them on the same stream. A backend that adds
// streams must synchronize before releasing memory those streams use.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "qrt/status.hpp"

namespace qrt {

class CachingPool {
 public:
  // allocate(bytes) returns fresh memory or an error; release(ptr) returns it to the system.
  using RawAllocate = std::function<Result<void*>(uint64_t bytes)>;
  using RawRelease = std::function<void(void* ptr)>;

  enum class Reuse { kSizeClasses, kNone };
  CachingPool(std::string name, RawAllocate allocate, RawRelease release, Reuse reuse = Reuse::kSizeClasses);
  ~CachingPool();  // returns every block, live or cached, to the raw allocator
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // Requests round up to a size class: 512 bytes below 1 MiB, 1 MiB above (so blocks stay 512-byte aligned
  // relative to the raw allocation, and small scratch sizes share classes).
  static uint64_t size_class(uint64_t bytes);

  // A block of at least `bytes` (0 gives nullptr). When the raw allocator fails, the cache is emptied and the
  // request tried once more before the error is returned.
  Result<void*> allocate(uint64_t bytes);
  // Returns a block from allocate() to the cache; false (and nothing done) for a pointer this pool does not own.
  bool release(void* ptr);
  // Returns every cached block to the raw allocator.
  void trim();

  // The live block containing [p, p + bytes): its start and the bytes that were requested for it. Views into
  // allocations are checked against the requested size, not the rounded one, so an overrun is caught.
  struct Block {
    uintptr_t start = 0;
    uint64_t requested = 0;
  };
  bool find_live(const void* p, uint64_t bytes, Block* block) const;

  size_t live_count() const { return live_.size(); }
  uint64_t live_bytes() const { return live_bytes_; }
  uint64_t cached_bytes() const { return cached_bytes_; }
  // The most live plus cached bytes held at once: what the pool took from the device at its peak.
  uint64_t peak_bytes() const { return peak_bytes_; }

 private:
  struct LiveBlock {
    uint64_t requested = 0;
    uint64_t size_class = 0;
  };
  std::string name_;
  RawAllocate raw_allocate_;
  RawRelease raw_release_;
  std::map<uintptr_t, LiveBlock> live_;             // start -> block
  std::multimap<uint64_t, void*> cached_;           // size class -> free block
  Reuse reuse_;
  uint64_t live_bytes_ = 0;    // rounded
  uint64_t cached_bytes_ = 0;  // rounded
  uint64_t peak_bytes_ = 0;
};

}  // namespace qrt
