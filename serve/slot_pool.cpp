#include "serve/slot_pool.hpp"

namespace qrt::serve {

SlotLease::~SlotLease() {
  if (pool_ != nullptr) pool_->release(index_);
}

Session& SlotLease::session() { return pool_->sessions_[static_cast<size_t>(index_)]; }

SlotPool::SlotPool(std::vector<Session> sessions, int max_waiting)
    : sessions_(std::move(sessions)), max_waiting_(max_waiting < 0 ? 0 : max_waiting) {
  for (int i = static_cast<int>(sessions_.size()) - 1; i >= 0; --i) free_.push_back(i);
}

std::optional<SlotLease> SlotPool::acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  // Tickets keep arrival order: a request is served only when every earlier one has been.
  const bool must_wait = free_.empty() || serving_ticket_ != next_ticket_;
  if (must_wait && waiting_ >= max_waiting_) return std::nullopt;
  const uint64_t ticket = next_ticket_++;
  ++waiting_;
  freed_.wait(lock, [&] { return !free_.empty() && serving_ticket_ == ticket; });
  --waiting_;
  ++serving_ticket_;
  const int index = free_.back();
  free_.pop_back();
  lock.unlock();
  freed_.notify_all();  // the next ticket may find another free session
  return SlotLease(this, index);
}

void SlotPool::release(int index) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(index);
  }
  freed_.notify_all();
}

SlotPool::Counts SlotPool::counts() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {static_cast<int>(sessions_.size()), static_cast<int>(sessions_.size() - free_.size()), waiting_};
}

uint64_t SlotPool::kv_cache_bytes() const {
  uint64_t total = 0;
  for (const Session& s : sessions_) total += s.memory().kv_cache;
  return total;
}

}  // namespace qrt::serve
