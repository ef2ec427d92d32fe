// Paged sequences (Transformer::new_kv_pool) against sequences with their own cache, for any backend: a prompt run
// in chunks that end inside and at block boundaries, then decode steps, must give the same logits; a second
// sequence that starts with part of the first one's tokens takes the first one's full blocks (reuse_prefix) and
// must give the logits of a sequence that computed everything itself. Shared by the CPU model tests and the CUDA
// backend tests (tests/gpu/backend).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "decode_batch_check.hpp"
#include "models/transformer.hpp"

namespace qrt::test {

// The largest relative difference seen; failures of the calls themselves are reported through gtest.
inline double check_paged_sequences(Transformer& model, int block_size) {
  const int vocab = model.config().vocab_size;
  auto pool = model.new_kv_pool(64 / block_size * 4, block_size);
  EXPECT_TRUE(pool.ok()) << pool.status().to_string();
  if (!pool.ok()) return 1e9;
  auto paged = model.new_sequence(**pool, 64), own = model.new_sequence(64);
  EXPECT_TRUE(paged.ok() && own.ok());
  if (!paged.ok() || !own.ok()) return 1e9;
  std::vector<int32_t> tokens;
  for (int i = 0; i < 47; ++i) tokens.push_back(static_cast<int32_t>((i * 29 + 3) % vocab));
  double worst = 0;
  std::vector<float> a, b;
  size_t at = 0;
  for (size_t chunk : {10, 22, 5}) {  // a prompt of 37 in three passes, then ten one-token steps
    const std::span<const int32_t> part = std::span(tokens).subspan(at, chunk);
    EXPECT_TRUE(model.forward(**paged, part, LogitsFor::kAll, &a).ok());
    EXPECT_TRUE(model.forward(**own, part, LogitsFor::kAll, &b).ok());
    worst = std::max(worst, batch_rel_diff(a.data(), b.data(), b.size()));
    at += chunk;
  }
  for (; at < tokens.size(); ++at) {
    EXPECT_TRUE(model.forward(**paged, std::span(tokens).subspan(at, 1), LogitsFor::kLast, &a).ok());
    EXPECT_TRUE(model.forward(**own, std::span(tokens).subspan(at, 1), LogitsFor::kLast, &b).ok());
    worst = std::max(worst, batch_rel_diff(a.data(), b.data(), b.size()));
  }
  EXPECT_EQ((*paged)->length(), 47);
  EXPECT_EQ((*paged)->held_blocks(), (47 + block_size - 1) / block_size);

  // The first 30 tokens again, then five others: the full blocks inside the shared 30 are taken, not recomputed.
  std::vector<int32_t> second(tokens.begin(), tokens.begin() + 30);
  for (int i = 0; i < 5; ++i) second.push_back(static_cast<int32_t>((i * 7 + 1) % vocab));
  auto reusing = model.new_sequence(**pool, 64), fresh = model.new_sequence(64);
  EXPECT_TRUE(reusing.ok() && fresh.ok());
  if (!reusing.ok() || !fresh.ok()) return 1e9;
  const int64_t held_before = (*pool)->held_blocks();
  const int64_t reused = model.reuse_prefix(**reusing, second);
  EXPECT_EQ(reused, 30 / block_size * block_size);
  EXPECT_EQ((*pool)->held_blocks(), held_before) << "the reused blocks are the first sequence's";
  EXPECT_TRUE(model.forward(**reusing, std::span(second).subspan(static_cast<size_t>(reused)), LogitsFor::kLast, &a)
                  .ok());
  EXPECT_TRUE(model.forward(**fresh, second, LogitsFor::kLast, &b).ok());
  worst = std::max(worst, batch_rel_diff(a.data(), b.data(), b.size()));
  EXPECT_EQ((*reusing)->length(), 35);

  // Released blocks stay cached: a third sequence with the first one's 47 tokens finds all 5 full blocks of 8
  // (the last token is always computed), also after both holders let go.
  (*paged)->reset();
  (*reusing)->reset();
  EXPECT_EQ((*pool)->held_blocks(), 0);
  EXPECT_GT((*pool)->cached_blocks(), 0);
  auto third = model.new_sequence(**pool, 64);
  EXPECT_TRUE(third.ok());
  if (!third.ok()) return 1e9;
  EXPECT_EQ(model.reuse_prefix(**third, tokens), 46 / block_size * block_size);
  EXPECT_TRUE(model.forward(**third, std::span(tokens).subspan(static_cast<size_t>((*third)->length())),
                            LogitsFor::kLast, &a)
                  .ok());
  (*own)->reset();
  EXPECT_TRUE(model.forward(**own, tokens, LogitsFor::kLast, &b).ok());
  worst = std::max(worst, batch_rel_diff(a.data(), b.data(), b.size()));
  (*own)->reset();
  return worst;
}

}  // namespace qrt::test
