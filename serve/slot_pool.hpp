// The sessions a server runs requests on: a fixed set, each with its own KV cache, handed out first come first
// served. A request waits for a free session; when too many already wait it is refused at once (the server answers
// 503), so a burst cannot pile up unbounded. Sessions of one model run on separate threads and the model
// serializes their device work step by step, so requests interleave token by token and one long generation does
// not hold the others back until it ends.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "qrt/runtime.hpp"

namespace qrt::serve {

class SlotPool;

// A session held by one request; given back when the lease is destroyed.
class SlotLease {
 public:
  SlotLease(SlotLease&& other) noexcept : pool_(other.pool_), index_(other.index_) { other.pool_ = nullptr; }
  SlotLease& operator=(SlotLease&&) = delete;
  SlotLease(const SlotLease&) = delete;
  SlotLease& operator=(const SlotLease&) = delete;
  ~SlotLease();
  Session& session();
  int index() const { return index_; }

 private:
  friend class SlotPool;
  SlotLease(SlotPool* pool, int index) : pool_(pool), index_(index) {}
  SlotPool* pool_;
  int index_;
};

class SlotPool {
 public:
  // `max_waiting`: requests allowed to wait for a session beyond those running.
  SlotPool(std::vector<Session> sessions, int max_waiting);

  // A free session, waiting for one in arrival order; nullopt at once when max_waiting requests already wait.
  std::optional<SlotLease> acquire();

  struct Counts {
    int slots = 0;
    int in_use = 0;
    int waiting = 0;
  };
  Counts counts() const;
  // KV cache bytes of all sessions (allocated when the pool is made).
  uint64_t kv_cache_bytes() const;

 private:
  friend class SlotLease;
  void release(int index);

  std::vector<Session> sessions_;
  const int max_waiting_;
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<int> free_;       // indices of free sessions
  uint64_t next_ticket_ = 0;    // handed to each arriving request
  uint64_t serving_ticket_ = 0; // the ticket whose turn it is
  int waiting_ = 0;
};

}  // namespace qrt::serve
