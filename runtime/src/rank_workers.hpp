// The threads of an in-process tensor-parallel group (ModelOptions::tensor_parallel): ranks 1.. each get one
// thread, started with the model and kept until it is destroyed, and are fed one job at a time. A forward pass
// then costs a wake-up per rank instead of a thread start, and every rank keeps its OS thread (and with it its
// CUDA device and thread-local state) from step to step, which the scheduler and CUDA graphs rely on.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "qrt/status.hpp"

namespace qrt::api_detail {

class RankWorkers {
 public:
  // Starts ranks - 1 threads (none for a single rank).
  explicit RankWorkers(int ranks);
  ~RankWorkers();
  RankWorkers(const RankWorkers&) = delete;
  RankWorkers& operator=(const RankWorkers&) = delete;

  int ranks() const { return ranks_; }
  // Runs job(r) for every rank r at once, rank 0 on the calling thread, and returns when all have returned; the
  // statuses by rank. One job at a time: concurrent callers take turns.
  std::vector<Status> run(const std::function<Status(int)>& job);

 private:
  void worker(int rank);

  const int ranks_;
  std::mutex run_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable work_, done_;
  const std::function<Status(int)>* job_ = nullptr;
  uint64_t generation_ = 0;  // bumped for every job; a worker runs each generation once
  int unfinished_ = 0;       // workers still in the current job
  bool stopping_ = false;
  std::vector<Status> results_;
  std::vector<std::thread> threads_;
};

}  // namespace qrt::api_detail
