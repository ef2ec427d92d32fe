// Transformer::decode_batch against one forward per sequence, for any backend: sequences with prompts of different
// lengths (so every row attends to a cache of its own length) step together for several tokens, and each step's
// logits row equals what the same token gives the sequence's twin stepped alone. Shared by the CPU model tests and
// the CUDA backend tests (tests/gpu/backend).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "models/transformer.hpp"

namespace qrt::test {

inline double batch_rel_diff(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return den > 0 ? num / den : num;
}

// `rows` sequences; prompt i has 1 + 3i tokens; `steps` batched steps. Returns the largest relative difference.
// With a pool, the batched sequences are paged in it (their blocks interleaved as they grow together).
inline double check_decode_batch(Transformer& model, int rows, int steps, KvPool* pool = nullptr) {
  const int vocab = model.config().vocab_size;
  std::vector<std::unique_ptr<Sequence>> batched, alone;
  std::vector<float> logits;
  for (int i = 0; i < rows; ++i) {
    std::vector<int32_t> prompt(static_cast<size_t>(1 + 3 * i));
    for (size_t t = 0; t < prompt.size(); ++t) prompt[t] = static_cast<int32_t>((7 * i + 13 * t + 1) % vocab);
    for (auto* set : {&batched, &alone}) {
      auto seq = set == &batched && pool != nullptr ? model.new_sequence(*pool, 64) : model.new_sequence(64);
      EXPECT_TRUE(seq.ok());
      if (!seq.ok()) return 1e9;
      EXPECT_TRUE(model.forward(**seq, prompt, LogitsFor::kLast, &logits).ok());
      set->push_back(std::move(*seq));
    }
  }
  DecodeBatch batch;
  double worst = 0;
  for (int s = 0; s < steps; ++s) {
    std::vector<Sequence*> seqs;
    std::vector<int32_t> tokens;
    for (int i = 0; i < rows; ++i) {
      seqs.push_back(batched[static_cast<size_t>(i)].get());
      tokens.push_back(static_cast<int32_t>((11 * s + 5 * i + 3) % vocab));
    }
    std::vector<float> together;
    const Status st = model.decode_batch(batch, seqs, tokens, &together);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return 1e9;
    EXPECT_EQ(together.size(), static_cast<size_t>(rows) * static_cast<size_t>(vocab));
    for (int i = 0; i < rows; ++i) {
      std::vector<float> one;
      EXPECT_TRUE(model.forward(*alone[static_cast<size_t>(i)], std::span(tokens).subspan(static_cast<size_t>(i), 1),
                                LogitsFor::kLast, &one)
                      .ok());
      worst = std::max(worst, batch_rel_diff(together.data() + static_cast<size_t>(i) * vocab, one.data(), one.size()));
      EXPECT_EQ(batched[static_cast<size_t>(i)]->length(), alone[static_cast<size_t>(i)]->length());
    }
  }
  return worst;
}

// Transformer::step_keep_logits with spans of different lengths in one pass (a decode token, prompt chunks of 7 and
// 3 tokens, another decode token; then a second pass of one token each) against each sequence's twin running the
// same tokens alone: row i of the kept logits (span i's last token) equals the twin's last-token logits. With a
// pool, the stepped sequences are paged. Returns the largest relative difference.
inline double check_mixed_step(Transformer& model, KvPool* pool = nullptr) {
  const int vocab = model.config().vocab_size;
  const int prefix[] = {5, 0, 2, 9};
  const int span[] = {1, 7, 3, 1};
  std::vector<std::unique_ptr<Sequence>> stepped, alone;
  std::vector<float> logits;
  for (int i = 0; i < 4; ++i) {
    for (auto* set : {&stepped, &alone}) {
      auto seq = set == &stepped && pool != nullptr ? model.new_sequence(*pool, 64) : model.new_sequence(64);
      EXPECT_TRUE(seq.ok());
      if (!seq.ok()) return 1e9;
      std::vector<int32_t> p(static_cast<size_t>(prefix[i]));
      for (size_t t = 0; t < p.size(); ++t) p[t] = static_cast<int32_t>((5 * i + 11 * t + 2) % vocab);
      if (!p.empty()) {
        EXPECT_TRUE(model.forward(**seq, p, LogitsFor::kLast, &logits).ok());
      }
      set->push_back(std::move(*seq));
    }
  }
  DecodeBatch batch;
  double worst = 0;
  for (int pass = 0; pass < 2; ++pass) {
    std::vector<std::vector<int32_t>> tokens(4);
    std::vector<Transformer::StepSpan> spans;
    for (int i = 0; i < 4; ++i) {
      const int k = pass == 0 ? span[i] : 1;
      for (int t = 0; t < k; ++t)
        tokens[static_cast<size_t>(i)].push_back(static_cast<int32_t>((7 * i + 3 * t + pass) % vocab));
      spans.push_back({stepped[static_cast<size_t>(i)].get(), tokens[static_cast<size_t>(i)]});
    }
    const Status st = model.step_keep_logits(batch, spans);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return 1e9;
    for (int i = 0; i < 4; ++i) {
      std::vector<float> row, one;
      EXPECT_TRUE(model.download_batch_row(batch, i, &row).ok());
      EXPECT_TRUE(model.forward(*alone[static_cast<size_t>(i)], tokens[static_cast<size_t>(i)], LogitsFor::kLast, &one)
                      .ok());
      worst = std::max(worst, batch_rel_diff(row.data(), one.data(), one.size()));
      EXPECT_EQ(stepped[static_cast<size_t>(i)]->length(), alone[static_cast<size_t>(i)]->length());
    }
  }
  return worst;
}

}  // namespace qrt::test
