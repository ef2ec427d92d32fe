// Ranks that are threads of one process (`run-model --tp N`, Model::open with ModelOptions::tensor_parallel):
// collectives meet at a barrier over shared memory. Unlike MPI, a rank that fails cannot be stopped by a launcher,
// so the group can be cancelled: every collective waiting or issued afterwards returns an error instead of
// waiting for a rank that will never come.
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/comm/communicator.hpp"

namespace qrt {
namespace {

// What the ranks of one group share: a reusable barrier (generation counted) with a cancel flag, and one slot per
// rank through which the ranks see each other's buffers during a collective.
class ThreadGroup {
 public:
  explicit ThreadGroup(int world) : world_(world), slots_(static_cast<size_t>(world)) {}

  int world() const { return world_; }
  const void*& slot(int rank) { return slots_[static_cast<size_t>(rank)]; }

  // Waits until every rank has arrived; an error once the group is cancelled.
  Status arrive_and_wait() {
    std::unique_lock lock(mutex_);
    if (cancelled_) return cancelled_status();
    const uint64_t generation = generation_;
    if (++arrived_ == world_) {
      arrived_ = 0;
      ++generation_;
      released_.notify_all();
      return ok_status();
    }
    released_.wait(lock, [&] { return generation_ != generation || cancelled_; });
    return generation_ != generation ? ok_status() : cancelled_status();
  }

  void cancel() {
    std::lock_guard lock(mutex_);
    cancelled_ = true;
    released_.notify_all();
  }

 private:
  static Status cancelled_status() {
    return internal_error("a rank of this process's tensor-parallel group failed; its collectives were cancelled");
  }

  const int world_;
  std::vector<const void*> slots_;
  std::mutex mutex_;
  std::condition_variable released_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool cancelled_ = false;
};

// Sums and copies in rank order, so every rank computes bit-identical results.
class ThreadRankCommunicator final : public Communicator {
 public:
  ThreadRankCommunicator(std::shared_ptr<ThreadGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int world() const override { return group_->world(); }
  int local_rank() const override { return rank_; }
  std::string_view kind() const override { return "threads"; }

  Status all_reduce_sum(float* data, size_t n, void*) override {
    if (data == nullptr && n > 0) return invalid_argument("all_reduce_sum: null data");
    group_->slot(rank_) = data;
    QRT_TRY(group_->arrive_and_wait());
    sum_.assign(n, 0.0f);
    for (int r = 0; r < group_->world(); ++r) {
      const float* other = static_cast<const float*>(group_->slot(r));
      for (size_t i = 0; i < n; ++i) sum_[i] += other[i];
    }
    QRT_TRY(group_->arrive_and_wait());  // every rank has read every buffer before any is overwritten
    std::memcpy(data, sum_.data(), n * sizeof(float));
    return ok_status();
  }

  Status broadcast(void* host_data, size_t bytes, int root) override {
    if (root < 0 || root >= group_->world()) return invalid_argument("broadcast: root rank out of range");
    group_->slot(rank_) = host_data;
    QRT_TRY(group_->arrive_and_wait());
    if (rank_ != root && bytes > 0) std::memcpy(host_data, group_->slot(root), bytes);
    return group_->arrive_and_wait();
  }

  Status agree(const Status& local) override {
    group_->slot(rank_) = &local;
    QRT_TRY(group_->arrive_and_wait());
    Status first = ok_status();
    for (int r = 0; r < group_->world() && first.ok(); ++r) {
      const Status& s = *static_cast<const Status*>(group_->slot(r));
      if (!s.ok()) first = Status(s.code(), "rank " + std::to_string(r) + ": " + s.message());
    }
    QRT_TRY(group_->arrive_and_wait());
    return first;
  }

  void cancel_group() override { group_->cancel(); }

  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }

 private:
  std::shared_ptr<ThreadGroup> group_;
  int rank_;
  std::vector<float> sum_;
};

}  // namespace

Result<std::vector<std::unique_ptr<Communicator>>> make_thread_group_communicators(int world) {
  if (world < 1 || world > 1024) return invalid_argument("tensor-parallel group of " + std::to_string(world) + " ranks");
  auto group = std::make_shared<ThreadGroup>(world);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(std::make_unique<ThreadRankCommunicator>(group, r));
  return ranks;
}

}  // namespace qrt
