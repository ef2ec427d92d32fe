// The bundled default model (models/default/war-and-peace-q8_0, UQFF, and its GGUF twin) through the public API:
// its tokenizer must give the ids of the reference encoder it was trained with, and greedy generation from the
// recorded prompt must reproduce the ids that an independent float64 numpy forward computed on the same
// (Q8_0-dequantized) weights — tests/e2e/default_model/expected_greedy.json, written by
// tools/train-default-model/export.py. The model lives in the repository, so these tests never skip.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qrt/runtime.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

namespace fs = std::filesystem;

const fs::path kModels = fs::path(QRT_SOURCE_DIR) / "models" / "default";

struct Expected {
  std::string prompt;
  std::vector<int32_t> prompt_ids, generated_ids;
  std::string generated_text;
  std::vector<std::pair<std::string, std::vector<int32_t>>> tokenizer_cases;  // text, ids without specials
};

Expected read_expected() {
  const fs::path path = fs::path(QRT_SOURCE_DIR) / "tests" / "e2e" / "default_model" / "expected_greedy.json";
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  Expected e;
  if (j.is_discarded()) {
    ADD_FAILURE() << "cannot parse " << path;
    return e;
  }
  e.prompt = j.at("prompt").get<std::string>();
  e.prompt_ids = j.at("prompt_ids").get<std::vector<int32_t>>();
  e.generated_ids = j.at("generated_ids").get<std::vector<int32_t>>();
  e.generated_text = j.at("generated_text").get<std::string>();
  for (const auto& c : j.at("tokenizer_cases"))
    e.tokenizer_cases.emplace_back(c.at("text").get<std::string>(), c.at("ids").get<std::vector<int32_t>>());
  return e;
}

class DefaultModel : public ::testing::TestWithParam<const char*> {
 protected:
  fs::path model_path() const { return kModels / GetParam(); }
};

TEST_P(DefaultModel, TokenizerMatchesTheReferenceEncoder) {
  const Expected e = read_expected();
  auto model = Model::open(model_path().string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ(model->info().vocab_size, 1024);
  EXPECT_EQ(model->info().architecture, "llama");
  auto prompt = model->tokenize(e.prompt, /*add_special=*/true);
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_EQ(*prompt, e.prompt_ids);  // <s> first: the model was trained with it
  ASSERT_FALSE(e.tokenizer_cases.empty());
  for (const auto& [text, ids] : e.tokenizer_cases) {
    auto got = model->tokenize(text, /*add_special=*/false);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, ids) << "text: " << text;
    auto back = model->detokenize(ids);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(*back, text);
  }
}

TEST_P(DefaultModel, GreedyGenerationReproducesTheReference) {
  const Expected e = read_expected();
  ASSERT_GE(e.generated_ids.size(), 32u);
  auto model = Model::open(model_path().string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto session = model->new_session();
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  ASSERT_TRUE(session->add_prompt(e.prompt).ok());
  ASSERT_EQ(std::vector<int32_t>(session->tokens().begin(), session->tokens().end()), e.prompt_ids);
  GenerateOptions gen;
  gen.max_tokens = static_cast<int>(e.generated_ids.size());
  gen.stop_at_end_of_generation = false;
  auto result = session->generate(gen);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->tokens, e.generated_ids);
  EXPECT_EQ(result->text, e.generated_text);
}

INSTANTIATE_TEST_SUITE_P(Files, DefaultModel,
                         ::testing::Values("war-and-peace-q8_0", "war-and-peace-q8_0.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(fs::path(info.param).extension() == ".gguf" ? "Gguf" : "Uqff");
                         });

}  // namespace
}  // namespace qrt
