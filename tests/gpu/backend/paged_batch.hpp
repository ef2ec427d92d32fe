// The setup the batched decode tests share: a model without CUDA graphs (so that every kernel is a host launch the
// SIMT layer's counters see) and `sequences` paged sequences of one pool, after prompts of 2, 5, 8, ... tokens, each
// with its next token.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "models/transformer.hpp"
#include "tiny_model.hpp"

namespace qrt::test {

struct PagedBatch {
  // Destroyed in reverse: the sequences before their pool, the pool before the model.
  std::unique_ptr<Transformer> model;
  std::unique_ptr<KvPool> pool;
  std::vector<std::unique_ptr<Sequence>> owned;
  std::vector<Sequence*> seqs;
  std::vector<int32_t> tokens;
};

// m's tensors must outlive the batch. False (with the failure recorded) if a step of the setup fails.
inline bool start_paged_batch(Backend& gpu, const TinyModel& m, int sequences, PagedBatch* b) {
  TransformerOptions options;
  options.graphs = false;
  auto model = Transformer::create(gpu, m.config, m.tensors, options);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return false;
  b->model = std::move(*model);
  auto pool = b->model->new_kv_pool(64, 4);
  EXPECT_TRUE(pool.ok());
  if (!pool.ok()) return false;
  b->pool = std::move(*pool);
  for (int s = 0; s < sequences; ++s) {
    auto seq = b->model->new_sequence(*b->pool, 32);
    EXPECT_TRUE(seq.ok());
    if (!seq.ok()) return false;
    const std::vector<int32_t> prompt(static_cast<size_t>(2 + 3 * s), 5 + s);
    const Status prompted = b->model->forward_keep_logits(**seq, prompt);
    EXPECT_TRUE(prompted.ok()) << prompted.to_string();
    if (!prompted.ok()) return false;
    b->seqs.push_back(seq->get());
    b->owned.push_back(std::move(*seq));
    b->tokens.push_back(3 + s);
  }
  return true;
}

}  // namespace qrt::test
