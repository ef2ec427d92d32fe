// The public C++ API on the real stories260K model: several models and sessions at once, stop strings, max
// tokens, seeded sampling, callbacks that stop, context limits and errors. Expected tokens come from llama2.c's
// recorded greedy continuation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <thread>

#include "qrt/runtime.hpp"
#include "backend/make_cuda_backend.hpp"
#include "stories_fixture.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

using test::first_n;

constexpr const char* kPrompt = "Once upon a time";

// Binds `var` to the opened model, or fails the test.
#define OPEN_MODEL(var, path)                                              \
  auto var##_opened = Model::open(path);                                   \
  ASSERT_TRUE(var##_opened.ok()) << var##_opened.status().to_string();     \
  Model var = std::move(*var##_opened)

// Binds `var` to a new session of `model` fed with `prompt`, or fails the test.
#define SESSION_WITH_PROMPT(var, model, prompt, context)                   \
  auto var##_made = new_session_with_prompt(model, prompt, context);       \
  ASSERT_TRUE(var##_made.ok()) << var##_made.status().to_string();         \
  Session var = std::move(*var##_made)

Result<Session> new_session_with_prompt(const Model& model, const char* prompt, int64_t context = 0) {
  SessionOptions options;
  options.context_length = context;
  QRT_ASSIGN_OR_RETURN(Session session, model.new_session(options));
  QRT_TRY(session.add_prompt(prompt));
  return session;
}

GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.max_tokens = n;
  return o;
}

class StoriesApi : public test::StoriesTest {};

TEST_F(StoriesApi, GgufTokenizerFromMetadataMatchesTheRecordedPromptIds) {
  OPEN_MODEL(gguf, test::stories_gguf(data_));
  OPEN_MODEL(hf, test::stories_hf(data_));
  auto a = gguf.tokenize(kPrompt);
  auto b = hf.tokenize(kPrompt);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(*a, golden_.prompt);
  EXPECT_EQ(*b, golden_.prompt);
  auto text = gguf.detokenize(golden_.generated);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(std::string(kPrompt) + *text, golden_.text);
  EXPECT_EQ(gguf.info().source_kind, "gguf");
  EXPECT_EQ(hf.info().source_kind, "hf");
  EXPECT_EQ(gguf.info().architecture, "llama");
  EXPECT_EQ(gguf.info().vocab_size, 512);
  EXPECT_EQ(gguf.info().layers, 5);
  EXPECT_GT(gguf.info().weight_bytes, 0u);
  EXPECT_GT(gguf.load_seconds(), 0.0);
}

TEST_F(StoriesApi, TwoModelsOpenAtOnceInterleaved) {
  OPEN_MODEL(gguf, test::stories_gguf(data_));
  OPEN_MODEL(hf, test::stories_hf(data_));
  SESSION_WITH_PROMPT(a, gguf, kPrompt, 0);
  SESSION_WITH_PROMPT(b, hf, kPrompt, 0);
  std::vector<int32_t> got_a, got_b;
  for (int round = 0; round < 4; ++round) {  // 4 x 5 tokens each, alternating between the models
    auto ra = a.generate(greedy(5));
    auto rb = b.generate(greedy(5));
    ASSERT_TRUE(ra.ok() && rb.ok());
    got_a.insert(got_a.end(), ra->tokens.begin(), ra->tokens.end());
    got_b.insert(got_b.end(), rb->tokens.begin(), rb->tokens.end());
  }
  EXPECT_EQ(got_a, first_n(golden_.generated, 20));
  EXPECT_EQ(got_b, first_n(golden_.generated, 20));
}

TEST_F(StoriesApi, TwoSessionsOnOneModelAreIndependent) {
  OPEN_MODEL(model, test::stories_gguf(data_));
  // What "Lily went" continues to when alone.
  SESSION_WITH_PROMPT(alone, model, "Lily went", 0);
  auto lily_alone = alone.generate(greedy(24));
  ASSERT_TRUE(lily_alone.ok());

  SESSION_WITH_PROMPT(once, model, kPrompt, 0);
  SESSION_WITH_PROMPT(lily, model, "Lily went", 0);
  std::vector<int32_t> got_once, got_lily;
  for (int round = 0; round < 6; ++round) {
    auto r1 = once.generate(greedy(4));
    auto r2 = lily.generate(greedy(4));
    ASSERT_TRUE(r1.ok() && r2.ok());
    got_once.insert(got_once.end(), r1->tokens.begin(), r1->tokens.end());
    got_lily.insert(got_lily.end(), r2->tokens.begin(), r2->tokens.end());
  }
  EXPECT_EQ(got_once, first_n(golden_.generated, 24));
  EXPECT_EQ(got_lily, lily_alone->tokens);
  EXPECT_NE(got_once, got_lily);
  // Dropping one session leaves the other working.
  { Session gone = std::move(lily); }
  auto more = once.generate(greedy(6));
  ASSERT_TRUE(more.ok());
  EXPECT_EQ(more->tokens, std::vector<int32_t>(golden_.generated.begin() + 24, golden_.generated.begin() + 30));
}

TEST_F(StoriesApi, SessionsOfOneModelOnSeveralThreads) {
  OPEN_MODEL(model, test::stories_hf(data_));
  std::vector<std::vector<int32_t>> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      auto s = new_session_with_prompt(model, kPrompt);
      if (!s.ok()) return;
      for (int round = 0; round < 6; ++round) {
        auto r = s->generate(greedy(5));
        if (!r.ok()) return;
        results[t].insert(results[t].end(), r->tokens.begin(), r->tokens.end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r, first_n(golden_.generated, 30));
}

TEST_F(StoriesApi, GreedyTextStreamsTheRecordedContinuation) {
  OPEN_MODEL(model, test::stories_gguf(data_));
  SESSION_WITH_PROMPT(s, model, kPrompt, 0);
  std::string streamed;
  int calls = 0;
  auto r = s.generate(greedy(60), [&](int32_t id, std::string_view text) {
    EXPECT_EQ(id, golden_.generated[static_cast<size_t>(calls)]);
    ++calls;
    streamed += text;
    return true;
  });
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(calls, 60);
  EXPECT_EQ(r->stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(r->tokens, golden_.generated);
  EXPECT_EQ(streamed, r->text);
  EXPECT_EQ(kPrompt + r->text, golden_.text);
  const Timings& t = s.timings();
  EXPECT_EQ(t.prompt_tokens, 5);
  EXPECT_EQ(t.generated_tokens, 60);
  EXPECT_GT(t.prompt_seconds, 0.0);
  EXPECT_GT(t.generation_seconds, 0.0);
  EXPECT_GT(t.generation_tokens_per_second(), 0.0);
  EXPECT_EQ(s.tokens().size(), 65u);
}

TEST_F(StoriesApi, StopStringEndsGenerationWithoutLeakingIntoTheStream) {
  OPEN_MODEL(model, test::stories_hf(data_));
  const std::string continuation = golden_.text.substr(std::string(kPrompt).size());
  struct Case {
    std::vector<std::string> stop;
    std::string expected;
  };
  // " girl na" ends inside the token " named"; "little boy" shares the prefix "little " and must be released.
  const std::vector<Case> cases = {
      {{"Lily"}, continuation.substr(0, continuation.find("Lily"))},
      {{"little boy", " girl na"}, continuation.substr(0, continuation.find(" girl na"))},
      {{"zzz", "park."}, continuation.substr(0, continuation.find("park."))},
      {{"\n"}, continuation.substr(0, continuation.find('\n'))},
  };
  for (const Case& c : cases) {
    SESSION_WITH_PROMPT(s, model, kPrompt, 0);
    GenerateOptions o = greedy(60);
    o.stop = c.stop;
    std::string streamed;
    auto r = s.generate(o, [&](int32_t, std::string_view text) {
      streamed += text;
      // At no point does the stream run past the text before the stop string.
      EXPECT_EQ(c.expected.compare(0, streamed.size(), streamed), 0) << "stream: " << streamed;
      return true;
    });
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->stop_reason, StopReason::kStopString) << c.stop.back();
    EXPECT_EQ(r->text, c.expected);
    EXPECT_EQ(streamed, c.expected);
    EXPECT_LT(r->tokens.size(), 60u);
    EXPECT_EQ(r->tokens, first_n(golden_.generated, r->tokens.size()));
  }
  // A stop string that never occurs changes nothing.
  SESSION_WITH_PROMPT(s, model, kPrompt, 0);
  GenerateOptions o = greedy(60);
  o.stop = {"dragon", "little boy"};
  auto r = s.generate(o);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(r->text, continuation);
}

TEST_F(StoriesApi, MaxTokensAndContinuingAfterwards) {
  OPEN_MODEL(model, test::stories_gguf(data_));
  SESSION_WITH_PROMPT(s, model, kPrompt, 0);
  auto r = s.generate(greedy(7));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop_reason, StopReason::kMaxTokens);
  EXPECT_EQ(r->tokens, first_n(golden_.generated, 7));
  // The last generated token is not run through the model until the context continues.
  auto r2 = s.generate(greedy(5));
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->tokens, std::vector<int32_t>(golden_.generated.begin() + 7, golden_.generated.begin() + 12));
  auto none = s.generate(greedy(0));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->tokens.empty());
  EXPECT_EQ(s.generate(greedy(-1)).status().code(), ErrorCode::kInvalidArgument);
}

TEST_F(StoriesApi, SeededSamplingIsReproducible) {
  OPEN_MODEL(model, test::stories_gguf(data_));
  auto sample = [&](uint64_t seed) -> std::vector<int32_t> {
    auto s = new_session_with_prompt(model, kPrompt);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (!s.ok()) return {};
    GenerateOptions o = greedy(40);
    o.sampling.temperature = 1.0f;
    o.sampling.top_k = 40;
    o.sampling.top_p = 0.95f;
    o.sampling.seed = seed;
    o.stop_at_end_of_generation = false;  // always 40 tokens
    auto r = s->generate(o);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->tokens : std::vector<int32_t>{};
  };
  const auto a = sample(42), b = sample(42), c = sample(7);
  ASSERT_EQ(a.size(), 40u);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, first_n(golden_.generated, 40));  // temperature 1 does not just repeat the greedy story
  // The same session after reset() repeats itself too.
  SESSION_WITH_PROMPT(s, model, kPrompt, 0);
  GenerateOptions o = greedy(40);
  o.sampling.temperature = 1.0f;
  o.sampling.seed = 3;
  auto first = s.generate(o);
  s.reset();
  EXPECT_EQ(s.timings().generated_tokens, 0);
  ASSERT_TRUE(s.add_prompt(kPrompt).ok());
  auto second = s.generate(o);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->tokens, second->tokens);
}

TEST_F(StoriesApi, CallbackReturningFalseStops) {
  OPEN_MODEL(model, test::stories_gguf(data_));
  SESSION_WITH_PROMPT(s, model, kPrompt, 0);
  int calls = 0;
  auto r = s.generate(greedy(60), [&](int32_t, std::string_view) { return ++calls < 3; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(r->stop_reason, StopReason::kCallback);
  EXPECT_EQ(r->tokens, first_n(golden_.generated, 3));
}

TEST_F(StoriesApi, PromptLongerThanTheContextIsAnErrorAndChangesNothing) {
  OPEN_MODEL(model, test::stories_hf(data_));  // max_position_embeddings 512 (the GGUF says 2048)
  EXPECT_EQ(model.info().trained_context, 512);
  EXPECT_EQ(model.info().default_context, 512);
  auto s = model.new_session();
  ASSERT_TRUE(s.ok());
  std::string long_prompt;
  for (int i = 0; i < 200; ++i) long_prompt += "Once upon a time ";
  Status st = s->add_prompt(long_prompt);
  EXPECT_EQ(st.code(), ErrorCode::kOutOfRange);
  EXPECT_NE(st.message().find("does not fit the context of 512"), std::string::npos) << st.message();
  EXPECT_TRUE(s->tokens().empty());
  EXPECT_EQ(s->generate(greedy(3)).status().code(), ErrorCode::kInvalidArgument);  // nothing to continue
  // The session is still usable.
  ASSERT_TRUE(s->add_prompt(kPrompt).ok());
  auto r = s->generate(greedy(3));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens, first_n(golden_.generated, 3));
  // Out-of-vocabulary ids are refused.
  const int32_t bad[] = {1, 512};
  EXPECT_EQ(s->add_tokens(bad).code(), ErrorCode::kInvalidArgument);
}

TEST_F(StoriesApi, FullContextStopsGeneration) {
  OPEN_MODEL(model, test::stories_gguf(data_));
  SESSION_WITH_PROMPT(s, model, kPrompt, 8);
  EXPECT_EQ(s.context_length(), 8);
  auto r = s.generate(greedy(20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stop_reason, StopReason::kContextFull);
  // 5 prompt tokens and 3 generated ones fill the 8 slots; a 4th is sampled from the last logits.
  EXPECT_EQ(r->tokens, first_n(golden_.generated, 4));
  const int32_t one[] = {5};
  EXPECT_EQ(s.add_tokens(one).code(), ErrorCode::kOutOfRange);
  // Generating again reports the full context and keeps it.
  auto again = s.generate(greedy(5));
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->stop_reason, StopReason::kContextFull);
  EXPECT_TRUE(again->tokens.empty());
  EXPECT_EQ(s.tokens().size(), 9u);
}

TEST_F(StoriesApi, ChatNeedsATemplate) {
  OPEN_MODEL(model, test::stories_hf(data_));
  EXPECT_FALSE(model.info().has_chat_template);
  auto s = model.new_session();
  ASSERT_TRUE(s.ok());
  Status st = s->add_chat({{"user", "Hi"}});
  EXPECT_EQ(st.code(), ErrorCode::kNotFound);
  EXPECT_NE(st.message().find("chat template"), std::string::npos) << st.message();
}

TEST_F(StoriesApi, ModelOutlivesItsHandleThroughSessions) {
  std::optional<Session> s;
  {
    OPEN_MODEL(model, test::stories_gguf(data_));
    auto made = new_session_with_prompt(model, kPrompt);
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    s.emplace(std::move(*made));
  }
  auto r = s->generate(greedy(5));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens, first_n(golden_.generated, 5));
  EXPECT_EQ(s->model().info().vocab_size, 512);
}

// stories260K separates stories with BOS rather than EOS. A copy of the checkpoint whose tokenizer_config.json
// names "<s>" as the EOS token ends its greedy story with an end-of-generation token (after 341 tokens).
TEST_F(StoriesApi, EndOfGenerationTokenStopsAndFlushesHeldText) {
  const auto dir = std::filesystem::temp_directory_path() / ("qrt_api_eos_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::copy(test::stories_hf(data_), dir);
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    std::filesystem::permissions(entry.path(), std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  {
    std::ofstream config(dir / "tokenizer_config.json", std::ios::trunc);
    config << R"({"add_bos_token": true, "add_eos_token": false, "bos_token": "<s>", "eos_token": "<s>",
                 "unk_token": "<unk>", "model_max_length": 512, "tokenizer_class": "LlamaTokenizerFast"})";
  }
  OPEN_MODEL(model, dir.string());
  EXPECT_TRUE(model.is_end_of_generation(1));
  SESSION_WITH_PROMPT(s, model, kPrompt, 0);
  GenerateOptions o = greedy(400);
  o.stop = {"\"X"};  // never matches, but holds back every closing quote until the next token
  std::string streamed;
  std::vector<int32_t> callback_ids;
  std::string last_text;
  auto r = s.generate(o, [&](int32_t id, std::string_view text) {
    callback_ids.push_back(id);
    streamed += text;
    last_text = text;
    return true;
  });
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->stop_reason, StopReason::kEndOfGeneration);
  EXPECT_EQ(r->tokens.size(), 341u);
  EXPECT_EQ(first_n(r->tokens, 60), golden_.generated);
  EXPECT_EQ(std::count(r->tokens.begin(), r->tokens.end(), 1), 0);  // the end token is not returned
  EXPECT_EQ(s.tokens().size(), 5u + 341u);
  // The story ends with a closing quote, held back by the stop string and handed out by a last kNoToken call.
  ASSERT_EQ(callback_ids.size(), 342u);
  EXPECT_EQ(callback_ids.back(), kNoToken);
  EXPECT_EQ(last_text, "\"");
  EXPECT_EQ(streamed, r->text);
  EXPECT_EQ(r->text.substr(r->text.size() - 13), "good friend.\"");
}

// A copy of the checkpoint with a chat_template.jinja: the rendered conversation is tokenized with its special
// tokens parsed, the BOS the template writes is not doubled, and the story continues as recorded.
TEST_F(StoriesApi, ChatTemplateRendersAndFeedsTheConversation) {
  const auto dir = std::filesystem::temp_directory_path() / ("qrt_api_chat_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::copy(test::stories_hf(data_), dir);
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    std::filesystem::permissions(entry.path(), std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  {
    std::ofstream jinja(dir / "chat_template.jinja");
    jinja << "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}[{{ m['content'] | upper }}]"
             "{% else %}{{ m['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}{% endif %}";
  }
  auto opened = Model::open(dir.string());
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(opened.ok()) << opened.status().to_string();
  const Model& model = *opened;
  EXPECT_TRUE(model.info().has_chat_template);
  auto rendered = model.render_chat({{"system", "be kind"}, {"user", kPrompt}});
  ASSERT_TRUE(rendered.ok()) << rendered.status().to_string();
  EXPECT_EQ(*rendered, "<s>[BE KIND]Once upon a time");

  auto s = model.new_session();
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(s->add_chat({{"user", kPrompt}}).ok());
  EXPECT_EQ(std::vector<int32_t>(s->tokens().begin(), s->tokens().end()), golden_.prompt);
  auto r = s->generate(greedy(20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tokens, first_n(golden_.generated, 20));
  // A second conversation needs a fresh context.
  EXPECT_EQ(s->add_chat({{"user", kPrompt}}).code(), ErrorCode::kInvalidArgument);
  s->reset();
  EXPECT_TRUE(s->add_chat({{"user", kPrompt}}).ok());
}

TEST(ModelOpen, ErrorsAreStatuses) {
  auto missing = Model::open("/no/such/dir/model.gguf");
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);

  const auto empty_dir = std::filesystem::temp_directory_path() / ("qrt_api_empty_" + std::to_string(::getpid()));
  std::filesystem::create_directories(empty_dir);
  auto empty = Model::open(empty_dir.string());
  EXPECT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("neither UQFF"), std::string::npos) << empty.status().message();
  std::filesystem::remove_all(empty_dir);

  EXPECT_EQ(device_from_name("tpu").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(*device_from_name("cuda"), Device::kCuda);
}

// Device::kCuda: unsupported in a build without the CUDA backend; a clear error naming CUDA without a usable GPU;
// with one, the model opens on it and greedy decoding reproduces the recorded continuation's start.
TEST_F(StoriesApi, CudaDeviceOpensOrSaysWhyNot) {
  ModelOptions options;
  options.device = Device::kCuda;
  auto model = Model::open(test::stories_gguf(data_), options);
  std::string why;
  if (!cuda_backend_built()) {
    ASSERT_FALSE(model.ok());
    EXPECT_EQ(model.status().code(), ErrorCode::kUnsupported);
    EXPECT_NE(model.status().message().find("cuda"), std::string::npos) << model.status().message();
  } else if (!test::cuda_device_available(&why)) {
    ASSERT_FALSE(model.ok());
    const std::string message = model.status().to_string();
    EXPECT_TRUE(message.find("CUDA") != std::string::npos || message.find("cuda") != std::string::npos) << message;
  } else {
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    EXPECT_EQ(model->info().device, "cuda");
    auto session = model->new_session();
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    ASSERT_TRUE(session->add_tokens(golden_.prompt).ok());
    GenerateOptions gen;
    gen.max_tokens = 20;
    gen.stop_at_end_of_generation = false;
    auto result = session->generate(gen);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->tokens, test::first_n(golden_.generated, 20));
  }
}

}  // namespace
}  // namespace qrt
