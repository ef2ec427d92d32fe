// One test per template language feature (data/language_cases.json). The expected text of every case is what
// the real Jinja2 renders, configured as transformers configures it; tests/oracle/chat re-checks that on each run.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat_test_support.hpp"

namespace qrt::chat {
namespace {

struct LanguageCase {
  std::string name;
  std::string template_text;
  nlohmann::ordered_json variables;
  bool has_expected = false;
  std::string expected;
  std::string error;  // a substring of the expected error message
  bool fixed_time = false;
  std::string load_error;
};

std::vector<LanguageCase> load_cases() {
  std::string error;
  auto json = test::read_json(test::case_dir() / "language_cases.json", &error);
  if (!error.empty() || !json.is_array()) {
    LanguageCase broken;
    broken.name = "case_file_unreadable";
    broken.load_error = error.empty() ? "language_cases.json is not an array" : error;
    return {broken};
  }
  std::vector<LanguageCase> cases;
  for (const auto& c : json) {
    LanguageCase lc;
    lc.name = c.value("name", "unnamed");
    lc.template_text = c.value("template", "");
    lc.variables = c.value("variables", nlohmann::ordered_json::object());
    lc.has_expected = c.contains("expected");
    lc.expected = c.value("expected", "");
    lc.error = c.value("error", "");
    lc.fixed_time = c.contains("now");
    cases.push_back(std::move(lc));
  }
  return cases;
}

class LanguageCaseTest : public testing::TestWithParam<LanguageCase> {};

TEST_P(LanguageCaseTest, MatchesJinja2) {
  const LanguageCase& c = GetParam();
  ASSERT_TRUE(c.load_error.empty()) << c.load_error;
  ASSERT_TRUE(c.has_expected || !c.error.empty()) << "case has neither an expected text nor an error";
  RenderOptions options = test::fixed_time_options();
  auto tmpl = ChatTemplate::parse(c.template_text, "case");
  Result<std::string> out = tmpl.ok() ? tmpl->render_variables(c.variables, options)
                                      : Result<std::string>(tmpl.status());
  if (c.has_expected) {
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(*out, c.expected);
  } else {
    ASSERT_FALSE(out.ok()) << "rendered '" << *out << "' but an error was expected";
    EXPECT_NE(out.status().message().find(c.error), std::string::npos)
        << "error '" << out.status().message() << "' lacks '" << c.error << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Jinja, LanguageCaseTest, testing::ValuesIn(load_cases()),
                         [](const testing::TestParamInfo<LanguageCase>& info) { return info.param.name; });

}  // namespace
}  // namespace qrt::chat
