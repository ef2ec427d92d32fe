#include "backend/caching_pool.hpp"

#include <limits>

namespace qrt {
namespace {

constexpr uint64_t kSmallGranule = 512;
constexpr uint64_t kLargeGranule = uint64_t{1} << 20;

uint64_t round_up(uint64_t bytes, uint64_t granule) { return (bytes + granule - 1) / granule * granule; }

}  // namespace

CachingPool::CachingPool(std::string name, RawAllocate allocate, RawRelease release, Reuse reuse)
    : name_(std::move(name)), raw_allocate_(std::move(allocate)), raw_release_(std::move(release)), reuse_(reuse) {}

CachingPool::~CachingPool() {
  trim();
  for (auto& [start, block] : live_) raw_release_(reinterpret_cast<void*>(start));
  live_.clear();
}

uint64_t CachingPool::size_class(uint64_t bytes) {
  return bytes < kLargeGranule ? round_up(bytes, kSmallGranule) : round_up(bytes, kLargeGranule);
}

Result<void*> CachingPool::allocate(uint64_t bytes) {
  if (bytes == 0) return static_cast<void*>(nullptr);
  // Rounding must not wrap around: anything this large cannot be allocated anyway.
  if (bytes > std::numeric_limits<uint64_t>::max() - kLargeGranule)
    return out_of_range(name_ + ": cannot allocate " + std::to_string(bytes) + " bytes");
  // Without reuse the raw allocator sees the request itself (rounded to 256 bytes, CUDA's alignment).
  const uint64_t cls = reuse_ == Reuse::kSizeClasses ? size_class(bytes) : round_up(bytes, 256);
  void* p = nullptr;
  if (auto it = cached_.find(cls); it != cached_.end()) {
    p = it->second;
    cached_.erase(it);
    cached_bytes_ -= cls;
  } else {
    Result<void*> fresh = raw_allocate_(cls);
    if (!fresh.ok() && !cached_.empty()) {
      trim();  // memory held for other size classes may be what is missing
      fresh = raw_allocate_(cls);
    }
    if (!fresh.ok()) return fresh.status().with_context(name_ + ": allocating " + std::to_string(bytes) + " bytes");
    p = *fresh;
    if (p == nullptr) return internal_error(name_ + ": the raw allocator returned null for " + std::to_string(cls));
  }
  live_[reinterpret_cast<uintptr_t>(p)] = LiveBlock{bytes, cls};
  live_bytes_ += cls;
  if (live_bytes_ + cached_bytes_ > peak_bytes_) peak_bytes_ = live_bytes_ + cached_bytes_;
  return p;
}

bool CachingPool::release(void* ptr) {
  if (ptr == nullptr) return false;
  auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == live_.end()) return false;
  const uint64_t cls = it->second.size_class;
  live_bytes_ -= cls;
  live_.erase(it);
  if (reuse_ == Reuse::kNone) {
    raw_release_(ptr);
    return true;
  }
  cached_.emplace(cls, ptr);
  cached_bytes_ += cls;
  return true;
}

void CachingPool::trim() {
  for (auto& [cls, p] : cached_) raw_release_(p);
  cached_.clear();
  cached_bytes_ = 0;
}

bool CachingPool::find_live(const void* p, uint64_t bytes, Block* block) const {
  if (p == nullptr) return false;
  const auto start = reinterpret_cast<uintptr_t>(p);
  auto it = live_.upper_bound(start);
  if (it == live_.begin()) return false;
  --it;
  const uint64_t offset = start - it->first;
  if (offset > it->second.requested || bytes > it->second.requested - offset) return false;
  if (block != nullptr) *block = Block{it->first, it->second.requested};
  return true;
}

}  // namespace qrt
