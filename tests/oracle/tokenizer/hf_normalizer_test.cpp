// Real vocabularies with the Unicode normalizers (NFC, NFD, NFKC, NFKD) and BERT's accent stripping, against
// the ids the Hugging Face `tokenizers` library gives for the same tokenizer.json files and texts
// (hf_normalizer_cases.py writes both: composed, decomposed and compatibility spellings, fresh each run).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "models/tokenizer/tokenizer.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

namespace fs = std::filesystem;

const fs::path kCasesDir = QRT_TOKENIZER_HF_CASES_DIR;

std::optional<std::string> read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The text with non-ASCII bytes as \xNN, for failure messages.
std::string escaped(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto byte = static_cast<uint8_t>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      out.push_back(c);
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02X", byte);
      out += hex;
    }
  }
  return out;
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
  return out + "]";
}

TEST(HfNormalizerOracleTest, RealVocabulariesGiveTheIdsOfHfTokenizers) {
  QRT_REQUIRE_TEST_DATA(data);
  const auto cases_text = read_text(kCasesDir / "cases.json");
  if (!cases_text) {
    GTEST_SKIP() << kCasesDir / "cases.json" << " is missing: the tokenizer_hf_normalizer_cases fixture did not "
                 << "make it (see its output)";
  }
  const nlohmann::json cases = nlohmann::json::parse(*cases_text, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(cases.is_object() && cases.contains("cases") && cases["cases"].is_array()) << "malformed cases.json";
  const std::string seed = "QRT_TOKENIZER_ORACLE_SEED=" + cases["seed"].dump();
  ASSERT_GE(cases["cases"].size(), 8u);
  for (const nlohmann::json& c : cases["cases"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE(name + " (" + seed + ")");
    const fs::path path = kCasesDir / c["tokenizer"].get<std::string>();
    const auto json = read_text(path);
    ASSERT_TRUE(json) << "cannot read " << path;
    auto spec = tokenizer_spec_from_hf_json(*json, "", path.string());
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    auto tokenizer = Tokenizer::create(std::move(spec).value());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();

    const auto& texts = c["texts"];
    const auto& expected = c["ids"];
    ASSERT_EQ(texts.size(), expected.size());
    ASSERT_GE(texts.size(), 50u);
    size_t matching = 0;
    std::string report;
    int reported = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string text = texts[i].get<std::string>();
      const std::vector<int32_t> want = expected[i].get<std::vector<int32_t>>();
      auto got = tokenizer->encode(text, /*add_special=*/false);
      if (got.ok() && *got == want) {
        ++matching;
        continue;
      }
      if (reported++ < 5) {
        report += "  \"" + escaped(text) + "\"\n    HF:  " + ids_text(want) + "\n    qrt: " +
                  (got.ok() ? ids_text(*got) : got.status().to_string()) + "\n";
      }
    }
    std::cout << "[ hf ids   ] " << name << ": " << matching << " of " << texts.size()
              << " texts give the ids of HF tokenizers\n";
    EXPECT_EQ(matching, texts.size()) << report;
  }
}

}  // namespace
}  // namespace qrt
