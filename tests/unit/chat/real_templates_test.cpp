// Every real chat template in the shared data folder parses and renders the sample conversation; for
// well-known ones the text equals what the real Jinja2 renders (data/expected/*.txt, written by
// tests/oracle/chat/chat_template_oracle.py --write-expected).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "chat_test_support.hpp"
#include "test_support.hpp"

namespace qrt::chat {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

struct Samples {
  ordered_json spec;
  std::string error;
};

const Samples& samples() {
  static const Samples* s = [] {
    auto* out = new Samples;
    out->spec = test::read_json(test::case_dir() / "sample_conversations.json", &out->error);
    return out;
  }();
  return *s;
}

// The context the oracle renders conversation `name` with, for template `stem`.
ChatContext context_for(const std::string& name, const std::string& stem) {
  const ordered_json& spec = samples().spec;
  const ordered_json& conv = spec["conversations"][name];
  ChatContext ctx;
  ctx.messages = conv["messages"];
  ctx.add_generation_prompt = conv["add_generation_prompt"].get<bool>();
  ctx.bos_token = "<s>";
  ctx.eos_token = "</s>";
  // use_tools: true passes the tools as {type, function} objects, "functions" the bare function objects.
  const ordered_json use_tools = conv.value("use_tools", ordered_json(false));
  if (use_tools == "functions") {
    ctx.tools = ordered_json::array();
    for (const auto& tool : spec["tools"]) ctx.tools.push_back(tool["function"]);
  } else if (use_tools == true) {
    ctx.tools = spec["tools"];
  }
  for (const auto& [key, value] : conv.items()) {
    if (key != "messages" && key != "add_generation_prompt" && key != "use_tools") ctx.extra[key] = value;
  }
  if (spec.contains("template_variables") && spec["template_variables"].contains(stem)) {
    for (const auto& [key, value] : spec["template_variables"][stem].items()) ctx.extra[key] = value;
  }
  return ctx;
}

std::vector<fs::path> template_paths(const fs::path& data) {
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(data / "chat-templates")) {
    if (entry.path().extension() == ".jinja") paths.push_back(entry.path());
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

TEST(RealChatTemplates, EveryTemplateRendersTheSampleConversation) {
  QRT_REQUIRE_TEST_DATA(data);
  ASSERT_TRUE(samples().error.empty()) << samples().error;
  const auto paths = template_paths(data);
  ASSERT_GE(paths.size(), 30u) << "expected the shared chat templates under " << data;
  const RenderOptions options = test::fixed_time_options();
  for (const auto& path : paths) {
    SCOPED_TRACE(path.filename().string());
    std::string error;
    const std::string source = test::read_file(path, &error);
    ASSERT_TRUE(error.empty()) << error;
    auto tmpl = ChatTemplate::parse(source, path.stem().string());
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
    // The sample conversation, without the system message for templates that refuse one, with tools for
    // templates written only for tool use.
    std::string rendered;
    std::string failures;
    for (const char* name : {"basic", "basic_no_system", "basic_with_tools"}) {
      auto out = tmpl->render(context_for(name, path.stem().string()), options);
      if (out.ok()) {
        rendered = *out;
        break;
      }
      failures += std::string(name) + ": " + out.status().to_string() + "\n";
    }
    ASSERT_FALSE(rendered.empty()) << failures;
    EXPECT_NE(rendered.find("Tell me a joke about compilers."), std::string::npos) << rendered;
  }
}

void expect_golden(const fs::path& data, const std::string& stem, const std::string& conversation,
                   const std::string& golden_name) {
  SCOPED_TRACE(stem + " / " + conversation);
  std::string error;
  const std::string source = test::read_file(data / "chat-templates" / (stem + ".jinja"), &error);
  ASSERT_TRUE(error.empty()) << error;
  const std::string expected = test::read_file(test::case_dir() / "expected" / golden_name, &error);
  ASSERT_TRUE(error.empty()) << error;
  auto tmpl = ChatTemplate::parse(source, stem);
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  auto out = tmpl->render(context_for(conversation, stem), test::fixed_time_options());
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, expected);
}

class GoldenTemplateTest : public testing::TestWithParam<const char*> {};

TEST_P(GoldenTemplateTest, SampleConversationMatchesJinja2) {
  QRT_REQUIRE_TEST_DATA(data);
  const std::string stem = GetParam();
  expect_golden(data, stem, stem == "google-gemma-2-2b-it" ? "basic_no_system" : "basic", stem + ".txt");
}

INSTANTIATE_TEST_SUITE_P(
    WellKnown, GoldenTemplateTest,
    testing::Values("meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct",
                    "meta-llama-Llama-3.3-70B-Instruct", "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B",
                    "mistralai-Mistral-Nemo-Instruct-2407", "Mistral-Small-3.2-24B-Instruct-2506",
                    "google-gemma-2-2b-it", "microsoft-Phi-3.5-mini-instruct",
                    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B",
                    "ibm-granite-granite-3.3-2B-Instruct", "openai-gpt-oss-120b"),
    [](const testing::TestParamInfo<const char*>& info) {
      std::string name = info.param;
      std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
      return name;
    });

class GoldenToolCallTest : public testing::TestWithParam<const char*> {};

TEST_P(GoldenToolCallTest, ToolCallConversationMatchesJinja2) {
  QRT_REQUIRE_TEST_DATA(data);
  const std::string stem = GetParam();
  expect_golden(data, stem, "tool_calls", stem + ".tool_calls.txt");
}

INSTANTIATE_TEST_SUITE_P(
    WellKnown, GoldenToolCallTest,
    testing::Values("meta-llama-Llama-3.1-8B-Instruct", "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B",
                    "mistralai-Mistral-Nemo-Instruct-2407", "ibm-granite-granite-3.3-2B-Instruct",
                    "openai-gpt-oss-120b"),
    [](const testing::TestParamInfo<const char*>& info) {
      std::string name = info.param;
      std::replace_if(name.begin(), name.end(), [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); }, '_');
      return name;
    });

}  // namespace
}  // namespace qrt::chat
