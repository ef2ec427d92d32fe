#include "models/kv_blocks.hpp"

#include <algorithm>

namespace qrt {

namespace {

// splitmix64's finalizer: every input bit reaches every output bit.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

KvBlockAllocator::KvBlockAllocator(int64_t blocks, int block_size)
    : block_size_(block_size),
      refs_(static_cast<size_t>(blocks), 0),
      prefix_(static_cast<size_t>(blocks)),
      lru_at_(static_cast<size_t>(blocks)) {
  plain_free_.reserve(static_cast<size_t>(blocks));
  // Handed out from the back: block 0 first.
  for (int64_t b = blocks - 1; b >= 0; --b) plain_free_.push_back(static_cast<int32_t>(b));
}

std::optional<int32_t> KvBlockAllocator::allocate() {
  int32_t block;
  if (!plain_free_.empty()) {
    block = plain_free_.back();
    plain_free_.pop_back();
  } else if (!lru_.empty()) {
    block = lru_.front();
    lru_.pop_front();
    forget(block);
  } else {
    return std::nullopt;
  }
  refs_[static_cast<size_t>(block)] = 1;
  ++held_;
  return block;
}

void KvBlockAllocator::hold(int32_t block) {
  int& refs = refs_[static_cast<size_t>(block)];
  if (refs == 0) {
    lru_.erase(lru_at_[static_cast<size_t>(block)]);  // only prefix blocks are findable, and they wait in the LRU
    ++held_;
  }
  ++refs;
}

void KvBlockAllocator::release(int32_t block) {
  int& refs = refs_[static_cast<size_t>(block)];
  if (--refs > 0) return;
  --held_;
  if (prefix_[static_cast<size_t>(block)].known) {
    lru_at_[static_cast<size_t>(block)] = lru_.insert(lru_.end(), block);
  } else {
    plain_free_.push_back(block);
  }
}

uint64_t KvBlockAllocator::chain_hash(uint64_t parent, std::span<const int32_t> tokens) {
  uint64_t h = mix(parent ^ 0x51ed270b27f3a2c5ull);
  for (int32_t t : tokens) h = mix(h ^ static_cast<uint32_t>(t));
  return h == 0 ? 1 : h;  // 0 is the parent of a sequence's first block
}

std::optional<int32_t> KvBlockAllocator::find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const {
  const auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  const Prefix& p = prefix_[static_cast<size_t>(it->second)];
  if (p.parent != parent || !std::equal(p.tokens.begin(), p.tokens.end(), tokens.begin(), tokens.end()))
    return std::nullopt;  // a hash collision: not the same tokens
  return it->second;
}

void KvBlockAllocator::remember(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) {
  if (by_hash_.count(hash) != 0) return;
  Prefix& p = prefix_[static_cast<size_t>(block)];
  if (p.known) return;  // already cached under another chain (cannot happen for a block written once)
  p.known = true;
  p.hash = hash;
  p.parent = parent;
  p.tokens.assign(tokens.begin(), tokens.end());
  by_hash_.emplace(hash, block);
}

void KvBlockAllocator::forget(int32_t block) {
  Prefix& p = prefix_[static_cast<size_t>(block)];
  if (!p.known) return;
  by_hash_.erase(p.hash);
  p = Prefix{};
}

}  // namespace qrt
