// The C ABI, driven from a C client: open, session, prompt, generate with a callback, stop strings, a callback
// that stops, errors through qrt_last_error.
#include <gtest/gtest.h>

#include <memory>

#include "c_api_client.h"
#include "qrt/c_api.h"
#include "stories_fixture.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

TEST(CApi, GeneratesTheRecordedGreedyContinuation) {
  QRT_REQUIRE_TEST_DATA(data);
  const auto golden = test::read_stories_golden(data);
  auto out = std::make_unique<c_client_result>();
  ASSERT_EQ(c_client_generate(test::stories_gguf(data).c_str(), "Once upon a time", 60, nullptr, 0, out.get()),
            QRT_OK)
      << qrt_last_error();
  EXPECT_EQ(out->vocab_size, 512);
  EXPECT_EQ(std::vector<int32_t>(out->prompt, out->prompt + out->n_prompt), golden.prompt);
  EXPECT_EQ(std::vector<int32_t>(out->ids, out->ids + out->n_ids), golden.generated);
  EXPECT_EQ("Once upon a time" + std::string(out->text, out->text_length), golden.text);
  EXPECT_EQ(out->stop_reason, QRT_STOP_MAX_TOKENS);
}

TEST(CApi, StopStringAndStoppingCallback) {
  QRT_REQUIRE_TEST_DATA(data);
  const auto golden = test::read_stories_golden(data);
  auto out = std::make_unique<c_client_result>();
  ASSERT_EQ(c_client_generate(test::stories_hf(data).c_str(), "Once upon a time", 60, "Lily", 0, out.get()), QRT_OK)
      << qrt_last_error();
  EXPECT_EQ(std::string(out->text, out->text_length), ", there was a little girl named ");
  EXPECT_EQ(out->stop_reason, QRT_STOP_STRING);

  ASSERT_EQ(c_client_generate(test::stories_hf(data).c_str(), "Once upon a time", 60, nullptr, 4, out.get()), QRT_OK);
  EXPECT_EQ(out->n_ids, 4u);
  EXPECT_EQ(out->stop_reason, QRT_STOP_CALLBACK);
}

TEST(CApi, ErrorsSetLastError) {
  qrt_model* model = reinterpret_cast<qrt_model*>(0x1);
  EXPECT_EQ(qrt_model_open("/no/such/model.gguf", "cpu", &model), QRT_ERR_NOT_FOUND);
  EXPECT_EQ(model, nullptr);
  EXPECT_NE(std::string(qrt_last_error()).find("/no/such/model.gguf"), std::string::npos) << qrt_last_error();
  EXPECT_EQ(qrt_model_open("x", "tpu", &model), QRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qrt_last_error()).find("tpu"), std::string::npos);
  EXPECT_EQ(qrt_model_open(nullptr, "cpu", &model), QRT_ERR_INVALID_ARGUMENT);
  qrt_session* session = nullptr;
  EXPECT_EQ(qrt_session_create(nullptr, 0, &session), QRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(qrt_session_add_prompt(nullptr, "x"), QRT_ERR_INVALID_ARGUMENT);
  qrt_generate_params params;
  qrt_generate_params_init(&params);
  EXPECT_EQ(params.max_tokens, 128);
  EXPECT_EQ(params.temperature, 0.0f);
  EXPECT_EQ(params.stop_at_end_of_generation, 1);
  EXPECT_EQ(qrt_session_generate(nullptr, &params, nullptr, nullptr, nullptr), QRT_ERR_INVALID_ARGUMENT);
  qrt_model_free(nullptr);
  qrt_session_free(nullptr);
}

TEST(CApi, PromptLongerThanContext) {
  QRT_REQUIRE_TEST_DATA(data);
  qrt_model* model = nullptr;
  ASSERT_EQ(qrt_model_open(test::stories_gguf(data).c_str(), nullptr, &model), QRT_OK) << qrt_last_error();
  qrt_session* session = nullptr;
  ASSERT_EQ(qrt_session_create(model, 4, &session), QRT_OK) << qrt_last_error();
  EXPECT_EQ(qrt_session_add_prompt(session, "Once upon a time"), QRT_ERR_OUT_OF_RANGE);
  EXPECT_NE(std::string(qrt_last_error()).find("does not fit the context of 4"), std::string::npos)
      << qrt_last_error();
  EXPECT_EQ(qrt_session_tokens(session, nullptr, 0), 0u);
  qrt_session_free(session);
  qrt_model_free(model);
}

}  // namespace
}  // namespace qrt
