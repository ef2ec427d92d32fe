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

}  // namespace
}  // namespace qrt
