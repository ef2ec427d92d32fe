// The public ChatTemplate API, error reporting, and the bounds that keep hostile templates from running away.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "chat_test_support.hpp"
#include "models/chat/value.hpp"

namespace qrt::chat {
namespace {

using nlohmann::ordered_json;

Result<std::string> render_text(const std::string& source, const ordered_json& variables = ordered_json::object(),
                                const RenderOptions& options = {}) {
  QRT_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::parse(source, "t"));
  return tmpl.render_variables(variables, options);
}

TEST(ChatTemplateApi, RendersAChatContext) {
  auto tmpl = ChatTemplate::parse(
      "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
      "{% if add_generation_prompt %}<assistant>{% endif %}|{{ tools is none }}|{{ documents is none }}|"
      "{{ enable_thinking }}|{{ eos_token }}",
      "chat");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  ChatContext ctx;
  ctx.messages = ordered_json::parse(R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}])");
  ctx.add_generation_prompt = true;
  ctx.bos_token = "<s>";
  ctx.eos_token = "</s>";
  ctx.extra["enable_thinking"] = false;
  auto out = tmpl->render(ctx);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "<s><user>Hi<assistant>Yo<assistant>|True|True|False|</s>");

  // The same parsed template renders other contexts (and copies share it).
  ChatTemplate copy = *tmpl;
  ctx.add_generation_prompt = false;
  ctx.tools = ordered_json::parse(R"([{"type": "function"}])");
  auto again = copy.render(ctx);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, "<s><user>Hi<assistant>Yo|False|True|False|</s>");
}

TEST(ChatTemplateApi, AbsentSpecialTokensAreUndefined) {
  auto tmpl = ChatTemplate::parse("{{ bos_token is defined }}/{{ eos_token is defined }}/[{{ bos_token }}]");
  ASSERT_TRUE(tmpl.ok());
  ChatContext ctx;
  ctx.eos_token = "";
  auto out = tmpl->render(ctx);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "False/True/[]");
}

TEST(ChatTemplateApi, RejectsMalformedContexts) {
  auto tmpl = ChatTemplate::parse("x");
  ASSERT_TRUE(tmpl.ok());
  ChatContext ctx;
  ctx.extra["messages"] = ordered_json::array();
  EXPECT_EQ(tmpl->render(ctx).status().code(), ErrorCode::kInvalidArgument);
  ChatContext not_array;
  not_array.messages = "hello";
  EXPECT_EQ(tmpl->render(not_array).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(tmpl->render_variables(ordered_json::array()).status().code(), ErrorCode::kInvalidArgument);
  ordered_json bad_utf8 = {{"s", std::string("\xff\xfe")}};
  EXPECT_EQ(tmpl->render_variables(bad_utf8).status().code(), ErrorCode::kInvalidArgument);
  ordered_json huge = {{"n", UINT64_MAX}};
  EXPECT_EQ(tmpl->render_variables(huge).status().code(), ErrorCode::kOutOfRange);
}

TEST(ChatTemplateApi, KeepsObjectKeyOrder) {
  auto out = render_text("{{ d|tojson }} {% for k in d %}{{ k }}{% endfor %}",
                         ordered_json::parse(R"({"d": {"z": 1, "a": {"y": 2, "b": 3}}})"));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, R"({"z": 1, "a": {"y": 2, "b": 3}} za)");
}

TEST(ChatTemplateApi, ErrorsNameTheirPlaceAndKind) {
  auto syntax = ChatTemplate::parse("line one\n  {{ x + }}", "model.jinja");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().code(), ErrorCode::kFormatError);
  EXPECT_NE(syntax.status().message().find("model.jinja:2:"), std::string::npos) << syntax.status().message();

  EXPECT_EQ(ChatTemplate::parse("\xff").status().code(), ErrorCode::kFormatError);
  EXPECT_EQ(ChatTemplate::parse("{% include 'x' %}").status().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(ChatTemplate::parse("{% for x in y recursive %}{% endfor %}").status().code(), ErrorCode::kUnsupported);

  auto raised = render_text("ok\n{{ raise_exception('no system role') }}");
  ASSERT_FALSE(raised.ok());
  EXPECT_EQ(raised.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(raised.status().message(), "t:2:4: template raised an exception: no system role");

  auto undefined = render_text("{{ message.content.strip() }}");
  ASSERT_FALSE(undefined.ok());
  EXPECT_EQ(undefined.status().message(), "t:1:4: 'message' is undefined");
}

TEST(ChatTemplateLimits, StepBudgetStopsLongLoops) {
  RenderOptions options;
  options.limits.max_steps = 100000;
  auto out = render_text("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", ordered_json::object(),
                         options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::kOutOfRange);
}

TEST(ChatTemplateLimits, OutputAndStringSizesAreBounded) {
  RenderOptions options;
  options.limits.max_output_bytes = 100000;
  auto out = render_text("{% for i in range(1000) %}{{ 'x' * 1000 }}{% endfor %}", ordered_json::object(), options);
  EXPECT_EQ(out.status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(render_text("{{ 'x' * 1000000000000 }}").status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(render_text("{{ [1, 2] * 1000000000000 }}").status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(render_text("{{ 'ab'|replace('', 'x' * 99999999) }}").status().code(), ErrorCode::kOutOfRange);

  RenderOptions total;
  total.limits.max_total_bytes = 10 << 20;
  auto grow = render_text(
      "{% set ns = namespace(s='') %}{% for i in range(100000) %}{% set ns.s = ns.s ~ 'xxxxxxxxxx' %}{% endfor %}",
      ordered_json::object(), total);
  EXPECT_EQ(grow.status().code(), ErrorCode::kOutOfRange);
}

TEST(ChatTemplateLimits, IntegerOverflowIsAnError) {
  EXPECT_EQ(render_text("{{ 9223372036854775807 + 1 }}").status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(render_text("{{ 2 ** 64 }}").status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(render_text("{{ 99999999999999999999 }}").status().code(), ErrorCode::kFormatError);
}

TEST(ChatTemplateLimits, RecursionIsBounded) {
  auto out = render_text("{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), ErrorCode::kOutOfRange);
}

TEST(ChatTemplateLimits, DeepSyntaxIsRefusedNotOverflowed) {
  const std::string parens = "{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}";
  EXPECT_EQ(ChatTemplate::parse(parens).status().code(), ErrorCode::kFormatError);
  std::string sum = "{{ 1";
  for (int i = 0; i < 100000; ++i) sum += " + 1";
  EXPECT_EQ(ChatTemplate::parse(sum + " }}").status().code(), ErrorCode::kFormatError);
  std::string filters = "{{ 'a'";
  for (int i = 0; i < 5000; ++i) filters += "|trim";
  EXPECT_EQ(ChatTemplate::parse(filters + " }}").status().code(), ErrorCode::kFormatError);
  std::string blocks;
  for (int i = 0; i < 5000; ++i) blocks += "{% if true %}";
  EXPECT_EQ(ChatTemplate::parse(blocks).status().code(), ErrorCode::kFormatError);
  std::string nots = "{{ ";
  for (int i = 0; i < 5000; ++i) nots += "not ";
  EXPECT_EQ(ChatTemplate::parse(nots + "1 }}").status().code(), ErrorCode::kFormatError);
}

TEST(ChatTemplateLimits, DeeplyNestedValuesPrintAnErrorAndFreeSafely) {
  const std::string build =
      "{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}";
  auto length = render_text(build + "{{ ns.x|length }}");
  ASSERT_TRUE(length.ok()) << length.status().to_string();
  EXPECT_EQ(*length, "1");
  EXPECT_EQ(render_text(build + "{{ ns.x }}").status().code(), ErrorCode::kOutOfRange);
  EXPECT_EQ(render_text(build + "{{ ns.x|tojson }}").status().code(), ErrorCode::kOutOfRange);
}

TEST(ChatTemplateLimits, ContainersCannotContainThemselves) {
  EXPECT_EQ(render_text("{% set l = [] %}{% set _ = l.append(l) %}").status().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(render_text("{% set l = [[]] %}{% set _ = l[0].append(l) %}").status().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(render_text("{% set ns = namespace() %}{% set ns.me = ns %}").status().code(), ErrorCode::kUnsupported);
  EXPECT_EQ(render_text("{% set d = {} %}{% set _ = d.update({'k': [d]}) %}").status().code(),
            ErrorCode::kUnsupported);
  auto ok = render_text("{% set a = [1] %}{% set b = [] %}{% set _ = b.append(a) %}{% set _ = b.append(a) %}{{ b }}");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(*ok, "[[1], [1]]");
}

TEST(ChatTemplateApi, RendersConcurrently) {
  auto tmpl = ChatTemplate::parse(
      "{% for m in messages %}{{ m.content|upper }}{{ loop.index }}{% endfor %}{{ messages|tojson }}");
  ASSERT_TRUE(tmpl.ok());
  ChatContext ctx;
  ctx.messages = ordered_json::parse(R"([{"role": "user", "content": "abc"}, {"role": "user", "content": "é"}])");
  const std::string expected = R"(ABC1É2[{"role": "user", "content": "abc"}, {"role": "user", "content": "é"}])";
  std::vector<std::thread> threads;
  std::vector<int> good(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        auto out = tmpl->render(ctx);
        good[static_cast<size_t>(t)] += out.ok() && *out == expected;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int g : good) EXPECT_EQ(g, 200);
}

TEST(ChatValues, FloatsPrintLikePythonRepr) {
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"},           {0.1, "0.1"},           {1e22, "1e+22"},
      {1.5e-7, "1.5e-07"},    {123456789.0, "123456789.0"}, {1e16, "1e+16"},
      {9999999999999998.0, "9999999999999998.0"}, {5e-324, "5e-324"}, {-2.5, "-2.5"},
      {0.001, "0.001"},       {1e-4, "0.0001"},       {1e-5, "1e-05"},
      {9007199254740992.0, "9007199254740992.0"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
      {0.30000000000000004, "0.30000000000000004"}, {100.0, "100.0"}, {1234.5678, "1234.5678"},
  };
  for (const auto& [value, expected] : cases) EXPECT_EQ(format_float(value), expected) << value;
}

}  // namespace
}  // namespace qrt::chat
