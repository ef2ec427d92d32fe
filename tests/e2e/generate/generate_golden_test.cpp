// From a model path to text through the public API: stories260K from the GGUF file and from the Hugging Face
// checkpoint must generate llama2.c's recorded greedy ids and text for "Once upon a time" (60 tokens).
#include <gtest/gtest.h>

#include "qrt/runtime.hpp"
#include "test_support.hpp"
#include "../../unit/api/stories_fixture.hpp"

namespace qrt {
namespace {

void expect_golden_generation(const std::string& path) {
  QRT_REQUIRE_TEST_DATA(data);
  const auto golden = test::read_stories_golden(data);
  ASSERT_EQ(golden.generated.size(), 60u);
  auto model = Model::open((data / path).string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto session = model->new_session();
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  ASSERT_TRUE(session->add_prompt("Once upon a time").ok());
  EXPECT_EQ(std::vector<int32_t>(session->tokens().begin(), session->tokens().end()), golden.prompt);
  GenerateOptions options;
  options.max_tokens = 60;
  std::string streamed;
  auto result = session->generate(options, [&](int32_t, std::string_view text) {
    streamed += text;
    return true;
  });
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->tokens, golden.generated);
  EXPECT_EQ("Once upon a time" + result->text, golden.text);
  EXPECT_EQ(streamed, result->text);
}

TEST(GenerateGolden, FromGguf) { expect_golden_generation("stories260K/stories260K.gguf"); }
TEST(GenerateGolden, FromHuggingFaceCheckpoint) { expect_golden_generation("stories260K-hf"); }

}  // namespace
}  // namespace qrt
