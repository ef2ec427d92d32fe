// serve-model's session pool on the bundled default model: sessions are handed out and given back, waiting requests
// are served in arrival order, and a request is refused at once when max_waiting requests already wait.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "serve/slot_pool.hpp"

namespace qrt::serve {
namespace {

std::vector<Session> sessions(int n) {
  auto model = Model::open(std::string(QRT_SOURCE_DIR) + "/models/default/war-and-peace-q8_0.gguf");
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  std::vector<Session> out;
  for (int i = 0; i < n && model.ok(); ++i) {
    auto s = model->new_session();
    EXPECT_TRUE(s.ok());
    out.push_back(std::move(*s));
  }
  return out;
}

// Waits until `pred` holds (the waiting threads have reached the pool), at most 10 s.
template <class Pred>
bool eventually(Pred pred) {
  for (int i = 0; i < 1000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

TEST(SlotPool, LeasesAreGivenBack) {
  SlotPool pool(sessions(2), 4);
  EXPECT_GT(pool.kv_cache_bytes(), 0u);
  {
    auto a = pool.acquire();
    auto b = pool.acquire();
    ASSERT_TRUE(a && b);
    EXPECT_NE(a->index(), b->index());
    EXPECT_EQ(pool.counts().in_use, 2);
    EXPECT_TRUE(a->session().tokens().empty());
  }
  EXPECT_EQ(pool.counts().in_use, 0);
  auto again = pool.acquire();
  EXPECT_TRUE(again.has_value());
}

TEST(SlotPool, WaitersAreServedInArrivalOrder) {
  SlotPool pool(sessions(1), 8);
  auto held = std::make_unique<SlotLease>(std::move(*pool.acquire()));
  std::mutex m;
  std::vector<int> order;
  std::vector<std::thread> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.emplace_back([&, i] {
      auto lease = pool.acquire();
      ASSERT_TRUE(lease.has_value());
      std::lock_guard<std::mutex> lock(m);
      order.push_back(i);
    });
    // The next waiter arrives only once this one waits.
    ASSERT_TRUE(eventually([&] { return pool.counts().waiting == i + 1; })) << "waiter " << i;
  }
  held.reset();  // each waiter in turn takes the session and gives it back
  for (auto& t : waiters) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(pool.counts().waiting, 0);
  EXPECT_EQ(pool.counts().in_use, 0);
}

TEST(SlotPool, RefusesWhenTooManyWait) {
  SlotPool pool(sessions(1), 1);
  auto held = std::make_unique<SlotLease>(std::move(*pool.acquire()));
  std::atomic<bool> served{false};
  std::thread waiter([&] { served = pool.acquire().has_value(); });
  ASSERT_TRUE(eventually([&] { return pool.counts().waiting == 1; }));
  EXPECT_FALSE(pool.acquire().has_value());  // one waits already: refused at once, not queued
  held.reset();
  waiter.join();
  EXPECT_TRUE(served);
  SlotPool no_waiting(sessions(1), 0);
  auto only = no_waiting.acquire();
  ASSERT_TRUE(only.has_value());
  EXPECT_FALSE(no_waiting.acquire().has_value());
}

}  // namespace
}  // namespace qrt::serve
