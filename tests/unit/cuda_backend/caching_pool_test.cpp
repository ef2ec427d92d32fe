// CachingPool bookkeeping with malloc as the raw allocator: size classes, reuse, view lookups, retry after trim,
// and that every block goes back to the raw allocator.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

#include "backend/caching_pool.hpp"

namespace qrt {
namespace {

struct CountingAllocator {
  std::set<void*> live;
  int allocations = 0;
  int failures_left = 0;  // the next N raw allocations fail
  uint64_t limit = ~uint64_t{0};  // raw allocations above this many live bytes fail
  uint64_t live_bytes = 0;
  std::map<void*, uint64_t> sizes;

  CachingPool make_pool(CachingPool::Reuse reuse = CachingPool::Reuse::kSizeClasses) {
    return CachingPool(
        "test pool",
        [this](uint64_t bytes) -> Result<void*> {
          if (failures_left > 0) {
            --failures_left;
            return out_of_range("raw allocation refused");
          }
          if (live_bytes + bytes > limit) return out_of_range("over the limit");
          void* p = std::malloc(bytes);
          live.insert(p);
          sizes[p] = bytes;
          live_bytes += bytes;
          ++allocations;
          return p;
        },
        [this](void* p) {
          ASSERT_EQ(live.erase(p), 1u) << "released a block twice or a foreign block";
          live_bytes -= sizes[p];
          sizes.erase(p);
          std::free(p);
        },
        reuse);
  }
};

// Without reuse (the raw allocator caches, as cudaMallocAsync's pool does) every release goes straight back, the
// books still answer view lookups, and the peak counts what was held at once.
TEST(CachingPool, WithoutReuseReleasesAtOnceAndTracksThePeak) {
  CountingAllocator raw;
  {
    CachingPool pool = raw.make_pool(CachingPool::Reuse::kNone);
    auto a = pool.allocate(1000);
    auto b = pool.allocate(3000);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(raw.sizes[*a], 1024u) << "rounded to 256 bytes, not to a size class";
    EXPECT_TRUE(pool.find_live(static_cast<char*>(*b) + 2000, 1000, nullptr));
    EXPECT_FALSE(pool.find_live(static_cast<char*>(*b) + 2000, 1001, nullptr));
    EXPECT_TRUE(pool.release(*a));
    EXPECT_EQ(raw.live.size(), 1u) << "released to the raw allocator at once";
    EXPECT_EQ(pool.cached_bytes(), 0u);
    auto c = pool.allocate(100);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(raw.allocations, 3) << "nothing reused by the pool itself";
    EXPECT_EQ(pool.peak_bytes(), 1024u + 3072u);
    EXPECT_EQ(pool.live_bytes(), 3072u + 256u);
  }
  EXPECT_TRUE(raw.live.empty());
}

TEST(CachingPool, PeakCountsCachedBlocksToo) {
  CountingAllocator raw;
  CachingPool pool = raw.make_pool();
  auto a = pool.allocate(600);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pool.release(*a));
  auto b = pool.allocate(2 << 20);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(pool.peak_bytes(), 1024u + (2u << 20)) << "the cached 1024-byte block is still held";
}

TEST(CachingPool, SizeClasses) {
  EXPECT_EQ(CachingPool::size_class(1), 512u);
  EXPECT_EQ(CachingPool::size_class(512), 512u);
  EXPECT_EQ(CachingPool::size_class(513), 1024u);
  EXPECT_EQ(CachingPool::size_class((1u << 20) - 1), 1u << 20);
  EXPECT_EQ(CachingPool::size_class((1u << 20) + 1), 2u << 20);
}

TEST(CachingPool, ReusesReleasedBlocksOfTheSameClass) {
  CountingAllocator raw;
  {
    CachingPool pool = raw.make_pool();
    auto a = pool.allocate(1000);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(pool.live_count(), 1u);
    EXPECT_TRUE(pool.release(*a));
    EXPECT_FALSE(pool.release(*a)) << "a second release of the same block must be refused";
    EXPECT_EQ(pool.cached_bytes(), 1024u);
    auto b = pool.allocate(600);  // same 1024-byte class: the cached block comes back
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(*b, *a);
    EXPECT_EQ(raw.allocations, 1);
    auto c = pool.allocate(5000);  // another class: fresh memory
    ASSERT_TRUE(c.ok());
    EXPECT_NE(*c, *b);
    EXPECT_EQ(raw.allocations, 2);
    int foreign = 0;
    EXPECT_FALSE(pool.release(&foreign));
    auto zero = pool.allocate(0);
    ASSERT_TRUE(zero.ok());
    EXPECT_EQ(*zero, nullptr);
    EXPECT_EQ(pool.live_count(), 2u);
  }
  EXPECT_TRUE(raw.live.empty()) << "the pool's destructor returns live and cached blocks";
}

TEST(CachingPool, FindsViewsInsideTheRequestedBytesOnly) {
  CountingAllocator raw;
  CachingPool pool = raw.make_pool();
  auto a = pool.allocate(100);
  ASSERT_TRUE(a.ok());
  auto* p = static_cast<uint8_t*>(*a);
  CachingPool::Block block;
  EXPECT_TRUE(pool.find_live(p, 100, &block));
  EXPECT_EQ(block.start, reinterpret_cast<uintptr_t>(p));
  EXPECT_EQ(block.requested, 100u);
  EXPECT_TRUE(pool.find_live(p + 60, 40, nullptr));
  EXPECT_FALSE(pool.find_live(p + 60, 41, nullptr)) << "the rounding slack is not part of the allocation";
  EXPECT_FALSE(pool.find_live(p - 1, 1, nullptr));
  EXPECT_FALSE(pool.find_live(nullptr, 1, nullptr));
  ASSERT_TRUE(pool.release(p));
  EXPECT_FALSE(pool.find_live(p, 1, nullptr)) << "a released block is no longer a valid view";
}

TEST(CachingPool, EmptiesTheCacheAndRetriesWhenTheRawAllocatorFails) {
  CountingAllocator raw;
  raw.limit = 3 << 20;
  CachingPool pool = raw.make_pool();
  auto a = pool.allocate(2 << 20);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(pool.release(*a));  // 2 MiB cached
  auto b = pool.allocate(3 << 20);  // needs the cached 2 MiB returned first
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(pool.cached_bytes(), 0u);
  auto c = pool.allocate(1 << 20);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("test pool"), std::string::npos) << c.status().message();
  EXPECT_FALSE(pool.allocate(~uint64_t{0}).ok()) << "a size that would wrap when rounded";
}

}  // namespace
}  // namespace qrt
