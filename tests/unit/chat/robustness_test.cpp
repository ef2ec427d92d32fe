// Mangled templates (random cuts, duplications and inserted template syntax applied to real templates and to the
// language cases) must parse or fail with a message, and render or fail with a message, within small limits:
// never crash, hang or throw.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chat_test_support.hpp"
#include "test_support.hpp"

namespace qrt::chat {
namespace {

std::vector<std::string> seed_templates() {
  std::vector<std::string> seeds;
  std::string error;
  auto cases = test::read_json(test::case_dir() / "language_cases.json", &error);
  if (error.empty()) {
    for (const auto& c : cases) seeds.push_back(c.value("template", ""));
  }
  std::string why;
  if (auto data = qrt::test::test_data_dir(&why)) {
    for (const char* name : {"meta-llama-Llama-3.1-8B-Instruct", "Qwen-Qwen3-0.6B", "openai-gpt-oss-120b",
                             "meetkai-functionary-medium-v3.2", "Kimi-K2-Thinking", "google-gemma-2-2b-it"}) {
      std::string e;
      std::string text = test::read_file(*data / "chat-templates" / (std::string(name) + ".jinja"), &e);
      if (e.empty()) seeds.push_back(std::move(text));
    }
  }
  return seeds;
}

std::string mutate(const std::string& s, std::mt19937_64& rng) {
  static const char* kPieces[] = {"{%", "%}", "{{", "}}", "{#", "#}", "(", ")", "[", "]", "{", "}", "'", "\"",
                                  "|", "-", "+", "endif", "endfor", "{% for x in y %}", "{% if x %}", "{% endif %}",
                                  "{% set a = ", "{% macro m(a) %}", "{% endmacro %}", "{{ m(m) }}", "\\", "\n",
                                  " is ", " not ", ".", ",", "*", "**", "%", "~", "{% raw %}", "loop.", "é", "\xff"};
  std::string out = s;
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int k = 0; k < edits; ++k) {
    const size_t pos = out.empty() ? 0 : rng() % (out.size() + 1);
    switch (rng() % 3) {
      case 0: {  // cut
        const size_t len = std::min<size_t>(out.size() - std::min(pos, out.size()), rng() % 24);
        out.erase(std::min(pos, out.size()), len);
        break;
      }
      case 1: {  // duplicate a span
        if (out.empty()) break;
        const size_t from = rng() % out.size();
        const size_t len = std::min<size_t>(out.size() - from, rng() % 40);
        out.insert(pos, out.substr(from, len));
        break;
      }
      default: out.insert(pos, kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))]); break;
    }
  }
  return out;
}

TEST(ChatTemplateRobustness, MangledTemplatesFailCleanly) {
  const auto seeds = seed_templates();
  ASSERT_FALSE(seeds.empty());
  const auto context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                 {"role": "assistant", "content": "a", "tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "x": [1, 2], "y": "yy", "d": {"a": 1}})");
  RenderOptions options;
  options.limits.max_steps = 200000;
  options.limits.max_output_bytes = 1 << 20;
  options.limits.max_total_bytes = 16 << 20;
  std::mt19937_64 rng(0x5eed2025);
  int parsed = 0;
  int rendered = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    const std::string source = mutate(seeds[rng() % seeds.size()], rng);
    auto tmpl = ChatTemplate::parse(source, "fuzz");
    if (!tmpl.ok()) {
      ASSERT_FALSE(tmpl.status().message().empty()) << source;
      continue;
    }
    ++parsed;
    auto out = tmpl->render_variables(context, options);
    if (out.ok()) {
      ++rendered;
    } else {
      ASSERT_FALSE(out.status().message().empty()) << source;
    }
  }
  // The mutations must exercise both the error paths and rendering.
  EXPECT_GT(parsed, 300);
  EXPECT_GT(rendered, 100);
  EXPECT_LT(rendered, 3000);
}

}  // namespace
}  // namespace qrt::chat
