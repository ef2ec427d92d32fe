// The C ABI, driven from a C client: open, session, prompt, generate with a callback, stop strings, a callback
// that stops, errors through qrt_last_error; the tokenizer and chat template; the engine with C callbacks.
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

// The engine through the C ABI, driven from the C client: four prompts on two sequences give what the session
// gives each alone, streamed text joins to the result, on_done reports the id submit returned and the prompt
// length, and a request cancelled at once ends with QRT_STOP_CALLBACK.
TEST(CApi, EngineRequestsEqualSessions) {
  QRT_REQUIRE_TEST_DATA(data);
  const std::string path = test::stories_gguf(data);
  const char* prompts[] = {"Once upon a time", "The little dog", "One day, a girl", "Tom and his mom", "A bird"};
  auto results = std::make_unique<c_engine_result[]>(5);
  ASSERT_EQ(c_client_engine(path.c_str(), prompts, 5, 30, 2, 4, results.get()), QRT_OK) << qrt_last_error();
  for (int i = 0; i < 4; ++i) {
    const c_engine_result& r = results[static_cast<size_t>(i)];
    auto alone = std::make_unique<c_client_result>();
    ASSERT_EQ(c_client_generate(path.c_str(), prompts[i], 30, nullptr, 0, alone.get()), QRT_OK);
    EXPECT_EQ(r.status, QRT_OK) << i;
    EXPECT_EQ(std::vector<int32_t>(r.ids, r.ids + r.n_ids), std::vector<int32_t>(alone->ids, alone->ids + alone->n_ids))
        << prompts[i];
    EXPECT_EQ(std::string(r.text, r.text_length), std::string(alone->text, alone->text_length)) << prompts[i];
    EXPECT_EQ(std::string(r.streamed, r.streamed_length), std::string(r.text, r.text_length)) << prompts[i];
    EXPECT_EQ(r.stop_reason, alone->stop_reason);
    EXPECT_EQ(r.prompt_tokens, static_cast<int64_t>(alone->n_prompt));
    EXPECT_EQ(r.done_id, r.id);
  }
  EXPECT_EQ(results[4].status, QRT_OK);
  EXPECT_EQ(results[4].stop_reason, QRT_STOP_CALLBACK);
  EXPECT_LT(results[4].n_ids, 30u);
}

TEST(CApi, TokenizerChatTemplateAndEngineErrors) {
  QRT_REQUIRE_TEST_DATA(data);
  qrt_model* model = nullptr;
  ASSERT_EQ(qrt_model_open(test::stories_gguf(data).c_str(), nullptr, &model), QRT_OK) << qrt_last_error();
  const auto golden = test::read_stories_golden(data);
  size_t count = 0;
  ASSERT_EQ(qrt_model_tokenize(model, "Once upon a time", 1, 0, nullptr, 0, &count), QRT_OK) << qrt_last_error();
  ASSERT_EQ(count, golden.prompt.size());
  std::vector<int32_t> ids(count);
  ASSERT_EQ(qrt_model_tokenize(model, "Once upon a time", 1, 0, ids.data(), ids.size(), &count), QRT_OK);
  EXPECT_EQ(ids, golden.prompt);
  size_t length = 0;
  char small[4];
  ASSERT_EQ(qrt_model_detokenize(model, golden.generated.data(), golden.generated.size(), 0, small, sizeof small,
                                 &length),
            QRT_OK);
  std::string text(length, '\0');
  ASSERT_EQ(qrt_model_detokenize(model, golden.generated.data(), golden.generated.size(), 0, text.data(), length + 1,
                                 &length),
            QRT_OK);
  EXPECT_EQ("Once upon a time" + text, golden.text);
  EXPECT_EQ(std::string(small, 4), text.substr(0, 4)) << "a short buffer gets the start, unterminated";
  const qrt_chat_message messages[] = {{"user", "Hi"}};
  EXPECT_EQ(qrt_model_render_chat(model, messages, 1, 1, nullptr, 0, &length), QRT_ERR_NOT_FOUND)
      << "stories260K.gguf has no chat template: " << qrt_last_error();
  const qrt_chat_message bad[] = {{"user", nullptr}};
  EXPECT_EQ(qrt_model_render_chat(model, bad, 1, 1, nullptr, 0, &length), QRT_ERR_INVALID_ARGUMENT);

  qrt_engine* engine = nullptr;
  qrt_engine_params params;
  qrt_engine_params_init(&params);
  params.block_size = 12;
  EXPECT_EQ(qrt_engine_start(model, &params, &engine), QRT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(engine, nullptr);
  EXPECT_NE(std::string(qrt_last_error()).find("power of two"), std::string::npos) << qrt_last_error();
  qrt_engine_params_init(&params);
  EXPECT_EQ(params.kv_cache_fraction, 0.0);
  params.kv_cache_fraction = 2.0;  // passed through to the engine, which refuses it
  EXPECT_EQ(qrt_engine_start(model, &params, &engine), QRT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(qrt_last_error()).find("kv_cache_fraction"), std::string::npos) << qrt_last_error();
  ASSERT_EQ(qrt_engine_start(model, nullptr, &engine), QRT_OK) << qrt_last_error();
  qrt_request request;
  qrt_request_init(&request);
  uint64_t id = 0;
  EXPECT_EQ(qrt_engine_submit(engine, &request, &id), QRT_ERR_INVALID_ARGUMENT) << "neither prompt nor messages";
  request.prompt = "Hi";
  request.params.n_stop = 1;
  EXPECT_EQ(qrt_engine_submit(engine, &request, &id), QRT_ERR_INVALID_ARGUMENT) << "n_stop without stop strings";
  qrt_engine_counts counts;
  ASSERT_EQ(qrt_engine_get_counts(engine, &counts), QRT_OK);
  EXPECT_EQ(counts.running, 0);
  EXPECT_GT(counts.kv_blocks, 0);
  EXPECT_EQ(counts.kv_block_size, 16);
  qrt_engine_free(engine);
  qrt_engine_free(nullptr);
  qrt_model_free(model);
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
