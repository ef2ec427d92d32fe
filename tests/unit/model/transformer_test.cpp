// Transformer: building from canonical tensors (every mismatch is an error naming the tensor), forward-pass
// consistency (batch vs KV-cache steps, last vs all logits, position masking) and device memory hygiene.
// Numerical correctness against an independent reference is tests/oracle/model.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "models/transformer.hpp"
#include "backend/cpu_backend.hpp"
#include "kernels/cpu/sampler.hpp"
#include "test_support.hpp"
#include "decode_batch_check.hpp"
#include "tiny_model.hpp"

namespace qrt {
namespace {

using test::make_tiny_model;
using test::tiny_llama_config;

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / den;
}

std::vector<int32_t> some_tokens(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 17 + 5) % vocab;
  return t;
}

TEST(Transformer, BatchEqualsTokenByTokenAndLastEqualsAll) {
  for (bool moe : {false, true}) {
    ModelConfig c = moe ? test::tiny_moe_config() : tiny_llama_config();
    c.attention_bias = moe;
    auto m = make_tiny_model(c);
    CpuBackend backend;
    auto model = Transformer::create(backend, m.config, m.tensors);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const auto tokens = some_tokens(9, c.vocab_size);

    auto seq = (*model)->new_sequence(16);
    ASSERT_TRUE(seq.ok());
    std::vector<float> all;
    ASSERT_TRUE((*model)->forward(**seq, tokens, LogitsFor::kAll, &all).ok());
    ASSERT_EQ(all.size(), tokens.size() * static_cast<size_t>(c.vocab_size));
    EXPECT_EQ((*seq)->length(), 9);

    auto seq2 = (*model)->new_sequence(9);
    ASSERT_TRUE(seq2.ok());
    std::vector<float> stepwise, logits;
    ASSERT_TRUE((*model)->forward(**seq2, std::span(tokens).first(4), LogitsFor::kAll, &logits).ok());
    stepwise = logits;
    for (size_t i = 4; i < tokens.size(); ++i) {
      ASSERT_TRUE((*model)->forward(**seq2, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &logits).ok());
      ASSERT_EQ(logits.size(), static_cast<size_t>(c.vocab_size));
      stepwise.insert(stepwise.end(), logits.begin(), logits.end());
    }
    EXPECT_LT(max_rel_diff(stepwise, all), 1e-5) << "moe=" << moe;

    // kLast of a batch is the last row of kAll.
    (*seq)->reset();
    ASSERT_TRUE((*model)->forward(**seq, tokens, LogitsFor::kLast, &logits).ok());
    std::vector<float> last_row(all.end() - c.vocab_size, all.end());
    EXPECT_LT(max_rel_diff(logits, last_row), 1e-6);
  }
}

// Several sequences decoding together equal each decoding alone (dense with GQA and biases, and MoE with qk-norm),
// from 1 row to more rows than the GEMV batch limit; bad batches are refused without touching any sequence.
TEST(Transformer, DecodeBatchEqualsEachSequenceAlone) {
  for (bool moe : {false, true}) {
    ModelConfig c = moe ? test::tiny_moe_config() : tiny_llama_config();
    c.attention_bias = true;
    auto m = make_tiny_model(c);
    CpuBackend backend;
    auto model = Transformer::create(backend, m.config, m.tensors);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    for (int rows : {1, 3, 11}) EXPECT_LT(test::check_decode_batch(**model, rows, 3), 1e-6) << "moe=" << moe;
  }

  auto m = make_tiny_model(tiny_llama_config());
  CpuBackend backend;
  auto model = Transformer::create(backend, m.config, m.tensors);
  ASSERT_TRUE(model.ok());
  auto a = (*model)->new_sequence(4), b = (*model)->new_sequence(1);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> logits;
  ASSERT_TRUE((*model)->forward(**b, std::vector<int32_t>{1}, LogitsFor::kLast, &logits).ok());  // b is full
  DecodeBatch batch;
  Sequence* same[] = {a->get(), a->get()};
  Sequence* full[] = {a->get(), b->get()};
  const std::vector<int32_t> two = {1, 2}, bad = {1, 1 << 20};
  EXPECT_EQ((*model)->decode_batch(batch, same, two, &logits).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ((*model)->decode_batch(batch, full, two, &logits).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ((*model)->decode_batch(batch, std::span(full).first(1), two, &logits).code(),
            ErrorCode::kInvalidArgument);
  Sequence* one[] = {a->get()};
  EXPECT_EQ((*model)->decode_batch(batch, one, std::span(bad).subspan(1), &logits).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ((*a)->length(), 0);
  EXPECT_EQ((*b)->length(), 1);
}

// Decoding without copying logits back: forward_keep_logits leaves the last token's logits on the device, equal
// to forward's; sample_last gives the id the host sampler gives on them with the same draw.
TEST(Transformer, KeptLogitsAndDeviceSamplingMatchTheHost) {
  ModelConfig c = tiny_llama_config();
  auto m = make_tiny_model(c);
  CpuBackend backend;
  auto model = Transformer::create(backend, m.config, m.tensors);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const auto tokens = some_tokens(6, c.vocab_size);
  auto a = (*model)->new_sequence(8), b = (*model)->new_sequence(8);
  ASSERT_TRUE(a.ok() && b.ok());
  int32_t id = -1;
  EXPECT_FALSE((*model)->sample_last(**b, SampleStep{}, &id).ok()) << "no kept logits yet";
  std::vector<float> want, kept;
  ASSERT_TRUE((*model)->forward(**a, tokens, LogitsFor::kLast, &want).ok());
  ASSERT_TRUE((*model)->forward_keep_logits(**b, tokens).ok());
  EXPECT_EQ((*b)->length(), 6);
  ASSERT_TRUE((*model)->download_last_logits(**b, &kept).ok());
  EXPECT_EQ(kept, want);
  for (float temperature : {0.0f, 0.8f}) {
    SampleStep step;
    step.params.temperature = temperature;
    step.params.top_k = 10;
    step.u01 = {0.37};
    ASSERT_TRUE((*model)->sample_last(**b, step, &id).ok());
    SampleScratch scratch;
    EXPECT_EQ(id, sample_with_uniform(kept, step.params, 0.37, scratch)) << "temperature " << temperature;
  }
}

TEST(Transformer, PositionsDriveRopeAndMask) {
  ModelConfig c = tiny_llama_config();
  auto m = make_tiny_model(c);
  CpuBackend backend;
  auto model = Transformer::create(backend, m.config, m.tensors);
  ASSERT_TRUE(model.ok());
  const auto tokens = some_tokens(5, c.vocab_size);
  std::vector<int32_t> pos0(5), pos9(5);
  std::iota(pos0.begin(), pos0.end(), 0);
  std::iota(pos9.begin(), pos9.end(), 9);
  auto run = [&](const std::vector<int32_t>& pos) {
    auto seq = (*model)->new_sequence(5);
    std::vector<float> out;
    EXPECT_TRUE((*model)->forward(**seq, tokens, pos, LogitsFor::kAll, &out).ok());
    return out;
  };
  const auto a = run(pos0), b = run(pos9);
  // RoPE is relative: shifting every position leaves attention scores unchanged.
  EXPECT_LT(max_rel_diff(a, b), 1e-4);
  // A non-uniform change of positions changes them.
  std::vector<int32_t> spread = {0, 3, 4, 10, 11};
  EXPECT_GT(max_rel_diff(run(spread), a), 1e-3);
  // The first token sees only itself whatever follows it: its logits equal a one-token run.
  auto seq = (*model)->new_sequence(1);
  std::vector<float> one;
  ASSERT_TRUE((*model)->forward(**seq, std::span(tokens).first(1), LogitsFor::kAll, &one).ok());
  EXPECT_LT(max_rel_diff(one, std::vector<float>(a.begin(), a.begin() + c.vocab_size)), 1e-6);
}

TEST(Transformer, SlidingWindowLimitsAttention) {
  ModelConfig c = tiny_llama_config();
  c.sliding_window = 3;
  auto m = make_tiny_model(c);
  ModelConfig full = c;
  full.sliding_window = 0;
  CpuBackend backend;
  auto windowed = Transformer::create(backend, c, m.tensors);
  auto unlimited = Transformer::create(backend, full, m.tensors);
  ASSERT_TRUE(windowed.ok() && unlimited.ok());
  const auto tokens = some_tokens(8, c.vocab_size);
  std::vector<float> a, b;
  auto s1 = (*windowed)->new_sequence(8);
  auto s2 = (*unlimited)->new_sequence(8);
  ASSERT_TRUE((*windowed)->forward(**s1, tokens, LogitsFor::kAll, &a).ok());
  ASSERT_TRUE((*unlimited)->forward(**s2, tokens, LogitsFor::kAll, &b).ok());
  const size_t v = static_cast<size_t>(c.vocab_size);
  // Positions 0..2 see at most 3 keys either way; position 7 does not.
  EXPECT_LT(max_rel_diff(std::vector<float>(a.begin(), a.begin() + 3 * v), std::vector<float>(b.begin(), b.begin() + 3 * v)),
            1e-6);
  EXPECT_GT(max_rel_diff(std::vector<float>(a.end() - v, a.end()), std::vector<float>(b.end() - v, b.end())), 1e-3);
}

TEST(Transformer, TiedEmbeddingsWhenOutputIsAbsent) {
  ModelConfig c = tiny_llama_config();
  c.tied_embeddings = true;
  auto m = make_tiny_model(c);
  ASSERT_EQ(m.tensors.count("output"), 0u);
  c.tied_embeddings = false;  // absent "output" ties even when the flag says otherwise
  CpuBackend backend;
  auto model = Transformer::create(backend, c, m.tensors);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  // Tied and absent output: token_embd is uploaded once.
  EXPECT_EQ(backend.live_weights(), 2 + c.layers * 9u);  // token_embd, output_norm, 9 per layer
}

TEST(Transformer, BuildErrorsNameTheTensor) {
  CpuBackend backend;
  {
    auto m = make_tiny_model(tiny_llama_config());
    m.tensors.erase("blk.1.attn_k");
    auto r = Transformer::create(backend, m.config, m.tensors);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
    EXPECT_NE(r.status().message().find("blk.1.attn_k"), std::string::npos) << r.status().message();
  }
  {
    auto m = make_tiny_model(tiny_llama_config());
    m.tensors["blk.0.ffn_up"].shape = {32, 64};  // transposed
    auto r = Transformer::create(backend, m.config, m.tensors);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("expected shape [64, 32], found [32, 64]"), std::string::npos)
        << r.status().message();
  }
  {
    // A bias the config does not ask for must not be dropped silently.
    ModelConfig with_bias = tiny_llama_config();
    with_bias.attention_bias = true;
    auto m = make_tiny_model(with_bias);
    auto r = Transformer::create(backend, tiny_llama_config(), m.tensors);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("blk.0.attn_k.bias"), std::string::npos) << r.status().message();
  }
  {
    auto m = make_tiny_model(tiny_llama_config());
    ModelConfig bad = m.config;
    bad.kv_heads = 3;
    EXPECT_EQ(Transformer::create(backend, bad, m.tensors).status().code(), ErrorCode::kInvalidArgument);
    TransformerOptions tp;
    tp.tp.world = 2;
    // A split the backend's communicator does not share (a single-rank CPU backend) is refused.
    auto mismatched = Transformer::create(backend, m.config, m.tensors, tp);
    EXPECT_EQ(mismatched.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(mismatched.status().message().find("rank 0 of 2"), std::string::npos) << mismatched.status().message();
  }
  {
    auto m = make_tiny_model(tiny_llama_config());
    m.tensors["blk.0.attn_q"].data.size -= 4;  // truncated bytes
    auto r = Transformer::create(backend, m.config, m.tensors);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kFormatError) << r.status().to_string();
  }
  {
    auto m = make_tiny_model(tiny_llama_config());
    m.add("rope_freqs", {3}, 0.1f, 1.0f);  // head_dim 8 needs 4 factors
    EXPECT_FALSE(Transformer::create(backend, m.config, m.tensors).ok());
  }
  // Nothing leaks from the failed builds.
  EXPECT_EQ(backend.live_weights(), 0u);
  EXPECT_EQ(backend.live_allocations(), 0u);
}

TEST(Transformer, ForwardErrorsLeaveTheSequenceUnchanged) {
  auto m = make_tiny_model(tiny_llama_config());
  CpuBackend backend;
  auto model = Transformer::create(backend, m.config, m.tensors);
  ASSERT_TRUE(model.ok());
  auto seq = (*model)->new_sequence(4);
  ASSERT_TRUE(seq.ok());
  std::vector<float> logits;
  std::vector<int32_t> ok_tokens = {1, 2};
  ASSERT_TRUE((*model)->forward(**seq, ok_tokens, LogitsFor::kLast, &logits).ok());
  std::vector<int32_t> bad_id = {1, 50};
  EXPECT_EQ((*model)->forward(**seq, bad_id, LogitsFor::kLast, &logits).code(), ErrorCode::kOutOfRange);
  std::vector<int32_t> too_many = {1, 2, 3};
  EXPECT_EQ((*model)->forward(**seq, too_many, LogitsFor::kLast, &logits).code(), ErrorCode::kOutOfRange);
  std::vector<int32_t> one_pos = {0};
  EXPECT_EQ((*model)->forward(**seq, ok_tokens, one_pos, LogitsFor::kLast, &logits).code(),
            ErrorCode::kInvalidArgument);
  std::vector<int32_t> negative = {-1, 3};
  EXPECT_EQ((*model)->forward(**seq, ok_tokens, negative, LogitsFor::kLast, &logits).code(), ErrorCode::kOutOfRange);
  EXPECT_EQ((*model)->forward(**seq, std::span<const int32_t>(), LogitsFor::kLast, &logits).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ((*seq)->length(), 2);
  EXPECT_FALSE((*model)->new_sequence(0).ok());
  EXPECT_FALSE((*model)->new_sequence(int64_t{1} << 50).ok());
}

// A 16-bit, fp8 or q8_0 KV cache (TransformerOptions::kv_type): half (a quarter of; 34/128 of) the bytes of f32
// per element, positions still int32; a batch still equals token-by-token steps (both attend to the rounded rows of
// the cache), and the logits stay within the type's rounding of the f32 cache's without being equal to them (the
// rounding happens).
TEST(Transformer, NarrowKvCachesShrinkTheMemoryAndStayCloseToF32) {
  ModelConfig c = tiny_llama_config();
  c.head_dim = 16;  // cache rows of 2 x 16 elements: one Q8_0 block
  auto m = make_tiny_model(c);
  CpuBackend backend;
  const auto tokens = some_tokens(9, c.vocab_size);
  auto run = [&](KvType type, std::vector<float>* batch, std::vector<float>* stepwise, uint64_t* kv_bytes) {
    TransformerOptions options;
    options.kv_type = type;
    auto model = Transformer::create(backend, m.config, m.tensors, options);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    EXPECT_EQ((*model)->kv_type(), type);
    auto seq = (*model)->new_sequence(16);
    ASSERT_TRUE(seq.ok());
    *kv_bytes = (*seq)->kv_cache_bytes();
    ASSERT_TRUE((*model)->forward(**seq, tokens, LogitsFor::kAll, batch).ok());
    (*seq)->reset();
    std::vector<float> logits;
    ASSERT_TRUE((*model)->forward(**seq, std::span(tokens).first(4), LogitsFor::kAll, stepwise).ok());
    for (size_t i = 4; i < tokens.size(); ++i) {
      ASSERT_TRUE((*model)->forward(**seq, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &logits).ok());
      stepwise->insert(stepwise->end(), logits.begin(), logits.end());
    }
  };
  std::vector<float> f32_batch, f32_steps;
  uint64_t f32_bytes = 0;
  run(KvType::kF32, &f32_batch, &f32_steps, &f32_bytes);
  EXPECT_EQ(f32_bytes, 16 * kv_cache_bytes_per_token(c));
  const uint64_t f32_rows = f32_bytes - 16 * sizeof(int32_t);
  struct Narrow {
    KvType type;
    uint64_t row_bytes;  // of f32's 2 x 4 x 32 per token and layer
    double bound;        // f16 keeps 11 significant bits, bf16 8, fp8 4, q8_0 about 8 of the block's largest
  };
  for (const Narrow& n : {Narrow{KvType::kF16, 128, 2e-3}, Narrow{KvType::kBF16, 128, 2e-2},
                          Narrow{KvType::kFp8, 64, 2e-1}, Narrow{KvType::kQ8_0, 68, 2e-2}}) {
    SCOPED_TRACE(std::string(kv_type_name(n.type)));
    std::vector<float> batch, steps;
    uint64_t bytes = 0;
    run(n.type, &batch, &steps, &bytes);
    ASSERT_FALSE(testing::Test::HasFatalFailure());
    EXPECT_EQ(bytes, 16 * kv_cache_bytes_per_token(c, 1, n.type));
    EXPECT_EQ(bytes - 16 * sizeof(int32_t), f32_rows / 256 * n.row_bytes);
    EXPECT_LT(max_rel_diff(steps, batch), 1e-5);
    const double diff = max_rel_diff(batch, f32_batch);
    EXPECT_GT(diff, 0.0);
    EXPECT_LT(diff, n.bound);
  }
}

// A q8_0 cache stores rows in blocks of 32 elements: a model whose cache row is not whole blocks is refused, and
// the error names the type and the row.
TEST(Transformer, Q8KvCacheNeedsRowsOfWholeBlocks) {
  ModelConfig c = tiny_llama_config();  // 2 KV heads of 8: rows of 16
  auto m = make_tiny_model(c);
  CpuBackend backend;
  TransformerOptions options;
  options.kv_type = KvType::kQ8_0;
  auto model = Transformer::create(backend, m.config, m.tensors, options);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("KV cache type q8_0"), std::string::npos) << model.status().to_string();
  EXPECT_NE(model.status().message().find("2 KV head(s) of 8 = 16 elements"), std::string::npos)
      << model.status().to_string();
}

TEST(Transformer, FreesEveryDeviceBuffer) {
  CpuBackend backend;
  {
    auto m = make_tiny_model(tiny_llama_config());
    auto model = Transformer::create(backend, m.config, m.tensors);
    ASSERT_TRUE(model.ok());
    auto seq = (*model)->new_sequence(8);
    std::vector<float> logits;
    ASSERT_TRUE((*model)->forward(**seq, some_tokens(3, 50), LogitsFor::kAll, &logits).ok());
    ASSERT_TRUE((*model)->forward(**seq, some_tokens(5, 50), LogitsFor::kAll, &logits).ok());  // scratch grows
    EXPECT_GT(backend.live_allocations(), 0u);
  }
  EXPECT_EQ(backend.live_allocations(), 0u);
  EXPECT_EQ(backend.live_weights(), 0u);
}

}  // namespace
}  // namespace qrt
