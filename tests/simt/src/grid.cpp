// A grid's blocks spread over OS threads: the thread that runs the grid (a device's executor) takes blocks itself,
// and QRT_SIMT_THREADS - 1 shared workers join in. Blocks are independent on a GPU, so running them in parallel is
// faithful; the threads of one block always share one OS thread (block_runner.cpp).
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "internal.hpp"

namespace qrt::simt {
namespace {

// Work the pool can help with: n items, item i done by fn(i).
struct Job {
  int64_t items = 0;
  std::function<void(int64_t)> fn;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::atomic<int> helpers{0};  // pool workers currently inside this job
};

class Pool {
 public:
  Pool() {
    const int extra = settings().worker_threads - 1;
    for (int i = 0; i < extra; ++i) std::thread([this] { worker(); }).detach();
  }

  void run(int64_t items, const std::function<void(int64_t)>& fn) {
    if (items <= 0) return;
    install_fault_handler();
    if (items == 1 || settings().worker_threads <= 1) {
      for (int64_t i = 0; i < items; ++i) fn(i);
      return;
    }
    Job job;
    job.items = items;
    job.fn = fn;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      jobs_.push_back(&job);
    }
    work_.notify_all();
    take(job);
    // Items handed out are all being run; wait for the helpers to finish theirs and leave the job.
    std::unique_lock<std::mutex> lock(mutex_);
    jobs_.remove(&job);
    finished_.wait(lock, [&] { return job.done.load() == items && job.helpers.load() == 0; });
  }

 private:
  static void take(Job& job) {
    for (;;) {
      const int64_t i = job.next.fetch_add(1);
      if (i >= job.items) return;
      job.fn(i);
      job.done.fetch_add(1);
    }
  }

  void worker() {
    install_fault_handler();
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      work_.wait(lock, [&] {
        for (Job* j : jobs_)
          if (j->next.load() < j->items) return true;
        return false;
      });
      Job* job = nullptr;
      for (Job* j : jobs_)
        if (j->next.load() < j->items) job = j;
      if (job == nullptr) continue;
      job->helpers.fetch_add(1);
      lock.unlock();
      take(*job);
      lock.lock();
      job->helpers.fetch_sub(1);
      finished_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_, finished_;
  std::list<Job*> jobs_;
};

Pool& pool() {
  static Pool* p = new Pool();  // never destroyed: its workers are detached
  return *p;
}

}  // namespace

void parallel_for(int64_t n, const std::function<void(int64_t)>& fn) { pool().run(n, fn); }

void run_grid(const KernelLaunch& launch) {
  const uint64_t blocks = uint64_t{launch.grid.x} * launch.grid.y * launch.grid.z;
  pool().run(static_cast<int64_t>(blocks), [&launch](int64_t b) { run_block(launch, static_cast<uint64_t>(b)); });
}

}  // namespace qrt::simt
