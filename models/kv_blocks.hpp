// The host bookkeeping of a paged KV cache: which blocks of the pool are free, how many sequences hold each one,
// and which full blocks hold a known token prefix (so that a later sequence starting with the same tokens takes
// them instead of recomputing them). No device memory here: the pool's K/V arrays live in a KvPool
// (models/transformer.hpp), whose sequences address their blocks through a block table.
//
// A full block is identified by a chain hash: hash(parent's hash, the block's tokens), the parent being the block
// before it in its sequence (0 for the first). A block's keys and values depend only on the tokens before and in
// it, so two sequences whose first n blocks have equal chains can share those blocks. Shared blocks are full and
// never written again (a sequence writes only into blocks past its matched prefix), so no copy on write is needed.
// A block nobody holds stays in the prefix cache until its memory is needed: free blocks that hold no prefix are
// handed out first, then cached ones, least recently released first.
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace qrt {

class KvBlockAllocator {
 public:
  KvBlockAllocator(int64_t blocks, int block_size);

  int64_t blocks() const { return static_cast<int64_t>(refs_.size()); }
  int block_size() const { return block_size_; }
  int64_t held_blocks() const { return held_; }                       // held by at least one sequence
  int64_t free_blocks() const { return blocks() - held_; }            // cached ones included
  int64_t cached_blocks() const { return static_cast<int64_t>(lru_.size()); }  // free but holding a prefix
  int holders(int32_t block) const { return refs_[static_cast<size_t>(block)]; }

  // A free block with one holder: one that holds no prefix if any, else the least recently released cached one
  // (its prefix is forgotten). Empty when every block is held.
  std::optional<int32_t> allocate();
  // One more holder of a block found by find() (a cached free block leaves the free list).
  void hold(int32_t block);
  // One holder less; a block nobody holds is free again (and stays findable when it holds a prefix).
  void release(int32_t block);

  static uint64_t chain_hash(uint64_t parent, std::span<const int32_t> tokens);
  // The block holding `tokens` after the chain `parent` (its hash `hash`), checked token by token; it is not held.
  std::optional<int32_t> find(uint64_t hash, uint64_t parent, std::span<const int32_t> tokens) const;
  // Records that a full block holds `tokens` after the chain `parent`. When another block is already known for
  // the hash, that one stays the cached copy.
  void remember(int32_t block, uint64_t hash, uint64_t parent, std::span<const int32_t> tokens);

 private:
  struct Prefix {
    bool known = false;
    uint64_t hash = 0, parent = 0;
    std::vector<int32_t> tokens;
  };
  void forget(int32_t block);

  int block_size_;
  std::vector<int> refs_;
  std::vector<Prefix> prefix_;
  int64_t held_ = 0;
  std::vector<int32_t> plain_free_;  // free, no prefix (a stack: the last released is reused first)
  std::list<int32_t> lru_;           // free with a prefix, least recently released first
  std::vector<std::list<int32_t>::iterator> lru_at_;
  std::unordered_map<uint64_t, int32_t> by_hash_;
};

}  // namespace qrt
