// The OpenAI request parser and reply builders of serve-model (serve/openai_protocol.hpp) on literal bodies: the
// defaults, every checked field with a bad value (400 naming the field), the served-model check (404), and the
// JSON shapes the openai client reads (ids, objects, choices, deltas, usage, SSE framing).
#include <gtest/gtest.h>

#include <limits>

#include "serve/openai_protocol.hpp"

namespace qrt::serve {
namespace {

using nlohmann::json;

CompletionRequest ok_request(const std::string& body, Endpoint e = Endpoint::kCompletion) {
  auto r = parse_completion_request(body, e, "tiny");
  if (const ApiError* err = std::get_if<ApiError>(&r)) {
    ADD_FAILURE() << body << " -> " << err->message;
    return {};
  }
  return std::get<CompletionRequest>(r);
}

ApiError error_of(const std::string& body, Endpoint e = Endpoint::kCompletion) {
  auto r = parse_completion_request(body, e, "tiny");
  if (const ApiError* err = std::get_if<ApiError>(&r)) return *err;
  ADD_FAILURE() << body << " was accepted";
  return {};
}

TEST(OpenAiRequest, CompletionDefaults) {
  const CompletionRequest r = ok_request(R"({"prompt": "Hello"})");
  EXPECT_EQ(r.prompt, "Hello");
  EXPECT_EQ(r.generate.max_tokens, 16);  // OpenAI's default for completions
  EXPECT_FALSE(r.max_tokens_given);
  EXPECT_EQ(r.generate.sampling.temperature, 1.0f);
  EXPECT_EQ(r.generate.sampling.top_p, 1.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_TRUE(r.generate.stop.empty());
  EXPECT_TRUE(r.generate.stop_at_end_of_generation);
}

TEST(OpenAiRequest, EveryParameterReachesTheOptions) {
  const CompletionRequest r = ok_request(
      R"({"model": "tiny", "prompt": ["Hi"], "max_tokens": 7, "temperature": 0, "top_p": 0.5, "top_k": 40,
          "min_p": 0.1, "seed": 1234, "stop": ["a", "b"], "presence_penalty": 0.5, "frequency_penalty": -1.5,
          "repetition_penalty": 1.1, "n": 1, "logprobs": false, "stream": true,
          "stream_options": {"include_usage": true}, "user": "ignored", "ignore_eos": true})");
  EXPECT_EQ(r.prompt, "Hi");
  EXPECT_EQ(r.generate.max_tokens, 7);
  EXPECT_TRUE(r.max_tokens_given);
  EXPECT_EQ(r.generate.sampling.temperature, 0.0f);
  EXPECT_EQ(r.generate.sampling.top_p, 0.5f);
  EXPECT_EQ(r.generate.sampling.top_k, 40);
  EXPECT_FLOAT_EQ(r.generate.sampling.min_p, 0.1f);
  EXPECT_EQ(r.generate.sampling.seed, 1234u);
  EXPECT_EQ(r.generate.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.generate.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.generate.sampling.frequency_penalty, -1.5f);
  EXPECT_FLOAT_EQ(r.generate.sampling.repetition_penalty, 1.1f);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_FALSE(r.generate.stop_at_end_of_generation);
}

TEST(OpenAiRequest, ChatMessagesWithStringAndTextParts) {
  const CompletionRequest r = ok_request(
      R"({"messages": [{"role": "system", "content": "Be brief."},
                       {"role": "user", "content": [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "you"}]},
                       {"role": "assistant", "content": null}],
          "max_completion_tokens": 9, "stop": "END"})",
      Endpoint::kChat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[1].content, "Hello, you");
  EXPECT_EQ(r.messages[2].content, "");
  EXPECT_EQ(r.generate.max_tokens, 9);
  EXPECT_EQ(r.generate.stop, std::vector<std::string>{"END"});
  // Chat without max_tokens runs to the end of generation or of the context (the server fills in the room left).
  EXPECT_FALSE(ok_request(R"({"messages": [{"role": "user", "content": "x"}]})", Endpoint::kChat).max_tokens_given);
}

TEST(OpenAiRequest, BadBodiesAndFieldsAre400NamingTheField) {
  EXPECT_EQ(error_of("{not json").message, "the request body is not valid JSON");
  EXPECT_EQ(error_of("[1, 2]").message, "the request body must be a JSON object");
  struct Case {
    const char* body;
    const char* param;
    Endpoint endpoint = Endpoint::kCompletion;
  };
  const Case cases[] = {
      {R"({})", "prompt"},
      {R"({"prompt": ""})", "prompt"},
      {R"({"prompt": ["a", "b"]})", "prompt"},
      {R"({"prompt": 5})", "prompt"},
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "x", "ignore_eos": 1})", "ignore_eos"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens"},
      {R"({"prompt": "x", "max_completion_tokens": -3})", "max_completion_tokens"},
      {R"({"prompt": "x", "temperature": 2.5})", "temperature"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p"},
      {R"({"prompt": "x", "top_k": -1})", "top_k"},
      {R"({"prompt": "x", "min_p": 1.5})", "min_p"},
      {R"({"prompt": "x", "presence_penalty": 3})", "presence_penalty"},
      {R"({"prompt": "x", "frequency_penalty": -2.1})", "frequency_penalty"},
      {R"({"prompt": "x", "repetition_penalty": 0})", "repetition_penalty"},
      {R"({"prompt": "x", "seed": "abc"})", "seed"},
      {R"({"prompt": "x", "stop": [1]})", "stop"},
      {R"({"prompt": "x", "n": 2})", "n"},
      {R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {R"({"prompt": "x", "logprobs": true})", "logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 1})", "logprobs", Endpoint::kChat},
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", "top_logprobs", Endpoint::kChat},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})", "top_logprobs",
       Endpoint::kChat},
      {R"({"prompt": "x", "stream": "yes"})", "stream"},
      {R"({"prompt": "x", "stream_options": {"include_usage": 1}})", "stream_options"},
      {R"({"prompt": "x", "model": 7})", "model"},
      {R"({})", "messages", Endpoint::kChat},
      {R"({"messages": []})", "messages", Endpoint::kChat},
      {R"({"messages": [{"content": "x"}]})", "messages[0].role", Endpoint::kChat},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", "messages[0].content",
       Endpoint::kChat},
  };
  for (const Case& c : cases) {
    const ApiError e = error_of(c.body, c.endpoint);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

TEST(OpenAiRequest, Logprobs) {
  EXPECT_EQ(ok_request(R"({"prompt": "x"})").logprobs, -1);
  const CompletionRequest text = ok_request(R"({"prompt": "x", "logprobs": 2})");
  EXPECT_EQ(text.logprobs, 2);
  EXPECT_EQ(text.generate.logprobs, 2);
  EXPECT_EQ(ok_request(R"({"prompt": "x", "logprobs": 0})").logprobs, 0);
  const std::string chat = R"({"messages": [{"role": "user", "content": "x"}], )";
  EXPECT_EQ(ok_request(chat + R"("logprobs": true, "top_logprobs": 3})", Endpoint::kChat).generate.logprobs, 3);
  EXPECT_EQ(ok_request(chat + R"("logprobs": true})", Endpoint::kChat).logprobs, 0);
  EXPECT_EQ(ok_request(chat + R"("logprobs": false})", Endpoint::kChat).logprobs, -1);
}

TEST(OpenAiReply, LogprobsShapes) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<TokenLogprobs> tokens = {{7, -0.5f, {{7, -0.5f}, {8, -1.25f}}}, {9, -inf, {}}};
  const TokenText text_of = [](int32_t id) { return id == 9 ? std::string("\xc3") : "t" + std::to_string(id); };
  const json chat = logprobs_json(Endpoint::kChat, tokens, text_of);
  ASSERT_EQ(chat["content"].size(), 2u);
  EXPECT_EQ(chat["content"][0]["token"], "t7");
  EXPECT_EQ(chat["content"][0]["logprob"], -0.5);
  EXPECT_EQ(chat["content"][0]["bytes"], (json{116, 55}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], "t8");
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["logprob"], -1.25);
  EXPECT_EQ(chat["content"][1]["logprob"], -9999.0);  // -inf is not JSON
  EXPECT_EQ(chat["content"][1]["bytes"], (json{195}));  // half a UTF-8 character: the raw byte
  const json text = logprobs_json(Endpoint::kCompletion, tokens, text_of, 10);
  EXPECT_EQ(text["tokens"], (json{"t7", "\xc3"}));
  EXPECT_EQ(text["token_logprobs"], (json{-0.5, -9999.0}));
  EXPECT_EQ(text["top_logprobs"][0], (json{{"t7", -0.5}, {"t8", -1.25}}));
  EXPECT_EQ(text["text_offset"], (json{10, 12}));
  const ResponseHeader h{"cmpl-1", 1, "tiny"};
  EXPECT_EQ(completion_response(Endpoint::kCompletion, h, "x", "stop", {}, text)["choices"][0]["logprobs"], text);
  EXPECT_EQ(stream_chunk(Endpoint::kChat, h, "x", nullptr, false, chat)["choices"][0]["logprobs"], chat);
  EXPECT_TRUE(stream_chunk(Endpoint::kChat, h, "x", nullptr)["choices"][0]["logprobs"].is_null());
}

TEST(OpenAiRequest, AnotherModelIs404) {
  const ApiError e = error_of(R"({"model": "gpt-4", "prompt": "x"})");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_NE(e.message.find("'gpt-4'"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("'tiny'"), std::string::npos) << e.message;
}

TEST(OpenAiReply, ErrorBodyShape) {
  ApiError e;
  e.status = 400;
  e.message = "bad";
  const json j = error_body(e);
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(j["error"]["param"].is_null());
  EXPECT_TRUE(j["error"]["code"].is_null());
}

TEST(OpenAiReply, WholeResponses) {
  const ResponseHeader h{"chatcmpl-3", 1700000000, "tiny"};
  const json chat = completion_response(Endpoint::kChat, h, "Hi there", "stop", {5, 2});
  EXPECT_EQ(chat["object"], "chat.completion");
  EXPECT_EQ(chat["id"], "chatcmpl-3");
  EXPECT_EQ(chat["created"], 1700000000);
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "Hi there");
  EXPECT_EQ(chat["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chat["usage"]["total_tokens"], 7);
  const json text = completion_response(Endpoint::kCompletion, h, "abc", "length", {1, 3});
  EXPECT_EQ(text["object"], "text_completion");
  EXPECT_EQ(text["choices"][0]["text"], "abc");
  EXPECT_FALSE(text["choices"][0].contains("message"));
}

TEST(OpenAiReply, StreamChunksAndFraming) {
  const ResponseHeader h{"chatcmpl-1", 1, "tiny"};
  const json role = stream_chunk(Endpoint::kChat, h, "", nullptr, true);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(role["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(stream_chunk(Endpoint::kChat, h, "lo", nullptr)["choices"][0]["delta"], (json{{"content", "lo"}}));
  const json last = stream_chunk(Endpoint::kChat, h, "", "length");
  EXPECT_EQ(last["choices"][0]["delta"], json::object());
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(stream_chunk(Endpoint::kCompletion, h, "x", nullptr)["choices"][0]["text"], "x");
  const json usage = usage_chunk(Endpoint::kChat, h, {4, 6});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 6);
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  // Bytes that are not UTF-8 are replaced, never a thrown exception in the middle of a stream.
  EXPECT_EQ(sse_event(json{{"t", std::string("\xff")}}), "data: {\"t\":\"\xef\xbf\xbd\"}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(OpenAiReply, FinishReasons) {
  EXPECT_STREQ(finish_reason(StopReason::kMaxTokens), "length");
  EXPECT_STREQ(finish_reason(StopReason::kContextFull), "length");
  EXPECT_STREQ(finish_reason(StopReason::kEndOfGeneration), "stop");
  EXPECT_STREQ(finish_reason(StopReason::kStopString), "stop");
}

TEST(OpenAiReply, ModelsList) {
  const json j = models_response("tiny", 42);
  EXPECT_EQ(j["object"], "list");
  EXPECT_EQ(j["data"][0]["id"], "tiny");
  EXPECT_EQ(j["data"][0]["object"], "model");
}

}  // namespace
}  // namespace qrt::serve
