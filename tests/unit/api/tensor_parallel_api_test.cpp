// In-process tensor parallelism through the public API (ModelOptions::tensor_parallel, `run-model --tp N`): the
// model split among 2 and 4 thread ranks must generate exactly what the single rank generates, greedily (the
// recorded stories260K continuation) and sampled; splits the model does not allow are one clear error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "qrt/runtime.hpp"
#include "stories_fixture.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

class StoriesTensorParallel : public test::StoriesTest {
 protected:
  // Ids generated from the golden prompt by a model split among `ranks` (0: not split).
  std::vector<int32_t> generate(int ranks, const GenerateOptions& gen) {
    ModelOptions options;
    options.tensor_parallel = ranks;
    auto model = Model::open(test::stories_gguf(data_), options);
    EXPECT_TRUE(model.ok()) << model.status().to_string();
    if (!model.ok()) return {};
    EXPECT_EQ(model->info().tp_world, ranks > 1 ? ranks : 1);
    auto session = model->new_session();
    EXPECT_TRUE(session.ok()) << session.status().to_string();
    if (!session.ok()) return {};
    EXPECT_TRUE(session->add_tokens(golden_.prompt).ok());
    auto result = session->generate(gen);
    EXPECT_TRUE(result.ok()) << result.status().to_string();
    return result.ok() ? result->tokens : std::vector<int32_t>{};
  }
};

TEST_F(StoriesTensorParallel, SplitModelReproducesGoldenGreedy) {
  GenerateOptions gen;
  gen.max_tokens = 60;
  gen.stop_at_end_of_generation = false;
  for (int ranks : {2, 4}) EXPECT_EQ(generate(ranks, gen), golden_.generated) << ranks << " ranks";
}

TEST_F(StoriesTensorParallel, SplitModelSamplesTheSameTokens) {
  GenerateOptions gen;
  gen.max_tokens = 40;
  gen.sampling.temperature = 0.9f;
  gen.sampling.top_k = 30;
  gen.sampling.seed = 11;
  const std::vector<int32_t> single = generate(0, gen);
  ASSERT_FALSE(single.empty());
  for (int ranks : {2, 4}) EXPECT_EQ(generate(ranks, gen), single) << ranks << " ranks";
}

TEST_F(StoriesTensorParallel, SplitsTheModelDoesNotAllowAreOneClearError) {
  ModelOptions options;
  options.tensor_parallel = 3;  // 8 attention heads
  auto model = Model::open(test::stories_gguf(data_), options);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("do not divide among 3 ranks"), std::string::npos)
      << model.status().message();
  options.tensor_parallel = -2;
  EXPECT_EQ(Model::open(test::stories_gguf(data_), options).status().code(), ErrorCode::kInvalidArgument);
}

// Memory by owner (Session::memory): the KV cache is the session's context times the bytes of one token's K and V
// in every layer (this rank's KV heads) plus its position; scratch appears with the first pass; the peak covers
// weights, cache and scratch together. Split between 2 ranks, rank 0 holds half the KV heads.
TEST_F(StoriesTensorParallel, MemoryByOwner) {
  for (int ranks : {0, 2}) {
    ModelOptions options;
    options.tensor_parallel = ranks;
    auto model = Model::open(test::stories_gguf(data_), options);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const ModelInfo& info = model->info();
    SessionOptions so;
    so.context_length = 100;
    auto session = model->new_session(so);
    ASSERT_TRUE(session.ok());
    MemoryUse m = session->memory();
    const uint64_t head_dim = static_cast<uint64_t>(info.hidden / info.heads);
    const uint64_t kv_heads = static_cast<uint64_t>(ranks > 1 ? info.kv_heads / ranks : info.kv_heads);
    const uint64_t per_token = 2 * static_cast<uint64_t>(info.layers) * kv_heads * head_dim * 4 + 4;
    EXPECT_EQ(m.kv_cache_per_token, per_token) << ranks << " ranks";
    EXPECT_EQ(m.kv_cache, 100 * per_token);
    EXPECT_EQ(m.scratch, 0u) << "no pass has run";
    if (ranks <= 1) {
      EXPECT_GE(m.weights, info.weight_bytes) << "every weight, as stored";
    }
    EXPECT_GT(m.weights, 0u);
    ASSERT_TRUE(session->add_tokens(golden_.prompt).ok());
    m = session->memory();
    EXPECT_GT(m.scratch, 0u);
    EXPECT_GE(m.peak, m.weights + m.kv_cache + m.scratch);
  }
}

}  // namespace
}  // namespace qrt
