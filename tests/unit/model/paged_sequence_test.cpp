// The paged KV cache on the CPU backend: the block allocator's bookkeeping (holders, free blocks that keep a
// prefix, eviction order, chain hashes checked token by token), paged sequences against sequences with their own
// cache (chunked prompts, decode steps, decode_batch, reused prefixes), and a full pool refused before anything
// changes.
#include <gtest/gtest.h>

#include <vector>

#include "backend/cpu_backend.hpp"
#include "models/kv_blocks.hpp"
#include "models/transformer.hpp"
#include "paged_sequence_check.hpp"
#include "tiny_model.hpp"

namespace qrt {
namespace {

using test::make_tiny_model;
using test::tiny_llama_config;

TEST(KvBlockAllocator, HoldersFreeBlocksAndPrefixCache) {
  KvBlockAllocator a(3, 4);
  EXPECT_EQ(a.free_blocks(), 3);
  const auto b0 = a.allocate(), b1 = a.allocate(), b2 = a.allocate();
  ASSERT_TRUE(b0 && b1 && b2);
  EXPECT_EQ(*b0, 0);
  EXPECT_EQ(*b1, 1);
  EXPECT_FALSE(a.allocate().has_value()) << "every block is held";
  EXPECT_EQ(a.held_blocks(), 3);

  const std::vector<int32_t> t1 = {5, 6, 7, 8}, t2 = {9, 10, 11, 12};
  const uint64_t h1 = KvBlockAllocator::chain_hash(0, t1), h2 = KvBlockAllocator::chain_hash(h1, t2);
  EXPECT_NE(h1, KvBlockAllocator::chain_hash(0, t2));
  EXPECT_NE(h2, KvBlockAllocator::chain_hash(0, t2)) << "the hash depends on the chain before the block";
  a.remember(*b0, h1, 0, t1);
  a.remember(*b1, h2, h1, t2);
  EXPECT_EQ(a.find(h1, 0, t1), b0);
  EXPECT_EQ(a.find(h2, h1, t2), b1);
  EXPECT_FALSE(a.find(h2, 0, t2).has_value()) << "same hash asked with another parent: not the same prefix";
  EXPECT_FALSE(a.find(h1, 0, t2).has_value()) << "same hash asked with other tokens: a collision, refused";

  a.hold(*b0);  // a second sequence shares block 0
  a.release(*b0);
  EXPECT_EQ(a.holders(*b0), 1);
  a.release(*b0);
  a.release(*b1);
  a.release(*b2);
  EXPECT_EQ(a.held_blocks(), 0);
  EXPECT_EQ(a.cached_blocks(), 2) << "blocks 0 and 1 keep their prefixes";
  EXPECT_EQ(a.find(h1, 0, t1), b0) << "a free block stays findable";
  a.hold(*b0);  // taken back from the cache
  EXPECT_EQ(a.cached_blocks(), 1);
  EXPECT_EQ(a.held_blocks(), 1);
  // Allocation takes the block without a prefix first, then the least recently released cached one.
  EXPECT_EQ(a.allocate(), b2);
  EXPECT_EQ(a.allocate(), b1);
  EXPECT_FALSE(a.find(h2, h1, t2).has_value()) << "a reallocated block's prefix is forgotten";
  EXPECT_EQ(a.cached_blocks(), 0);
}

class PagedSequences : public testing::TestWithParam<bool> {};

TEST_P(PagedSequences, EqualOwnCacheSequencesAndReusePrefixes) {
  auto m = make_tiny_model(GetParam() ? test::tiny_moe_config() : tiny_llama_config());
  CpuBackend backend;
  auto model = Transformer::create(backend, m.config, m.tensors);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  for (int block_size : {1, 8, 16}) EXPECT_LT(test::check_paged_sequences(**model, block_size), 1e-6) << block_size;
  auto pool = (*model)->new_kv_pool(80, 4);
  ASSERT_TRUE(pool.ok());
  for (int rows : {1, 3, 11}) EXPECT_LT(test::check_decode_batch(**model, rows, 3, pool->get()), 1e-6) << rows;
  EXPECT_LT(test::check_mixed_step(**model), 1e-6);
  EXPECT_LT(test::check_mixed_step(**model, pool->get()), 1e-6);
}

INSTANTIATE_TEST_SUITE_P(DenseAndMoe, PagedSequences, testing::Bool());

TEST(PagedSequences, FullPoolIsRefusedBeforeAnythingChanges) {
  auto m = make_tiny_model(tiny_llama_config());
  CpuBackend backend;
  auto model = Transformer::create(backend, m.config, m.tensors);
  ASSERT_TRUE(model.ok());
  auto pool = (*model)->new_kv_pool(2, 8);
  ASSERT_TRUE(pool.ok());
  auto a = (*model)->new_sequence(**pool, 64), b = (*model)->new_sequence(**pool, 64);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<int32_t> tokens(17, 3);
  std::vector<float> logits;
  EXPECT_EQ((*model)->blocks_needed(**a, 17), 3);
  Status st = (*model)->forward(**a, tokens, LogitsFor::kLast, &logits);
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
  EXPECT_NE(st.message().find("KV cache pool full"), std::string::npos) << st.to_string();
  EXPECT_EQ((*a)->length(), 0);
  EXPECT_EQ((*pool)->held_blocks(), 0);

  ASSERT_TRUE((*model)->forward(**a, std::span(tokens).first(8), LogitsFor::kLast, &logits).ok());
  ASSERT_TRUE((*model)->forward(**b, std::span(tokens).first(8), LogitsFor::kLast, &logits).ok());
  EXPECT_EQ((*pool)->free_blocks(), 0);
  DecodeBatch batch;
  Sequence* both[] = {a->get(), b->get()};
  const int32_t next[] = {4, 5};
  st = (*model)->decode_batch(batch, both, next, &logits);
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange) << st.to_string();
  EXPECT_EQ((*a)->length(), 8);
  EXPECT_EQ((*b)->length(), 8);
  (*b)->reset();
  EXPECT_EQ((*pool)->free_blocks(), 1);
  EXPECT_TRUE((*model)->forward(**a, std::span(next).first(1), LogitsFor::kLast, &logits).ok());
  EXPECT_EQ((*a)->held_blocks(), 2);

  EXPECT_EQ((*model)->new_kv_pool(4, 12).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ((*model)->new_kv_pool(0, 16).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ((*model)->new_sequence(**pool, 0).status().code(), ErrorCode::kInvalidArgument);
}

// Blocks written at positions other than their slots hold keys that another sequence's same tokens would not
// have: they are never offered for reuse. And a cached block whose memory is taken for new tokens is forgotten.
TEST(PagedSequences, OnlyBlocksAtTheirOwnPositionsAreReusedAndEvictedOnesAreForgotten) {
  auto m = make_tiny_model(tiny_llama_config());
  CpuBackend backend;
  auto model = Transformer::create(backend, m.config, m.tensors);
  ASSERT_TRUE(model.ok());
  auto pool = (*model)->new_kv_pool(4, 4);
  ASSERT_TRUE(pool.ok());
  std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9}, shifted(9);
  for (size_t i = 0; i < shifted.size(); ++i) shifted[i] = static_cast<int32_t>(i + 100);
  std::vector<float> logits;
  {
    auto s = (*model)->new_sequence(**pool, 16);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*model)->forward(**s, tokens, shifted, LogitsFor::kLast, &logits).ok());
  }
  auto probe = (*model)->new_sequence(**pool, 16);
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ((*model)->reuse_prefix(**probe, tokens), 0);
  {
    auto s = (*model)->new_sequence(**pool, 16);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*model)->forward(**s, tokens, LogitsFor::kLast, &logits).ok());
  }
  EXPECT_EQ((*pool)->cached_blocks(), 2);
  EXPECT_EQ((*model)->reuse_prefix(**probe, tokens), 8);
  (*probe)->reset();
  {
    // 13 other tokens take all four blocks: the two free ones first, then the cached ones.
    auto s = (*model)->new_sequence(**pool, 16);
    ASSERT_TRUE(s.ok());
    std::vector<int32_t> other(13, 42);
    ASSERT_TRUE((*model)->forward(**s, other, LogitsFor::kLast, &logits).ok());
  }
  EXPECT_EQ((*model)->reuse_prefix(**probe, tokens), 0);
}

}  // namespace
}  // namespace qrt
