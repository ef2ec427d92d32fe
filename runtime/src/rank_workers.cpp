#include "runtime/src/rank_workers.hpp"

namespace qrt::api_detail {

RankWorkers::RankWorkers(int ranks) : ranks_(ranks > 0 ? ranks : 1), results_(static_cast<size_t>(ranks_)) {
  for (int r = 1; r < ranks_; ++r) threads_.emplace_back([this, r] { worker(r); });
}

RankWorkers::~RankWorkers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_.notify_all();
  for (auto& t : threads_) t.join();
}

std::vector<Status> RankWorkers::run(const std::function<Status(int)>& job) {
  std::lock_guard turn(run_mutex_);
  {
    std::lock_guard lock(mutex_);
    job_ = &job;
    unfinished_ = ranks_ - 1;
    ++generation_;
  }
  work_.notify_all();
  Status own = job(0);
  std::unique_lock lock(mutex_);
  done_.wait(lock, [&] { return unfinished_ == 0; });
  job_ = nullptr;
  std::vector<Status> results = std::move(results_);
  results_.assign(static_cast<size_t>(ranks_), ok_status());
  results[0] = std::move(own);
  return results;
}

void RankWorkers::worker(int rank) {
  uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stopping_ || generation_ != seen; });
    if (stopping_) return;
    seen = generation_;
    const std::function<Status(int)>* job = job_;
    lock.unlock();
    Status s = (*job)(rank);
    lock.lock();
    results_[static_cast<size_t>(rank)] = std::move(s);
    if (--unfinished_ == 0) done_.notify_all();
  }
}

}  // namespace qrt::api_detail
