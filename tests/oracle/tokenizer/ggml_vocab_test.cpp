// Every vocabulary GGUF of the shared data, read by gguf-py (dump_gguf_vocab.py), through the GGUF front end:
// the llama.cpp test strings must give exactly the ids the HF tokenizers recorded, and decode must give the
// strings back.
#include <gtest/gtest.h>

#include <thread>

#include "test_support.hpp"
#include "vocab_test_data.hpp"

namespace qrt {
namespace {

enum class VocabKind { kByteLevelBpe, kSentencePiece, kWordPiece };

struct VocabCase {
  const char* name;
  VocabKind kind;
};

void PrintTo(const VocabCase& c, std::ostream* os) { *os << c.name; }

std::string case_name(const testing::TestParamInfo<VocabCase>& info) {
  std::string name = info.param.name;
  for (char& ch : name) {
    if (ch == '-') ch = '_';
  }
  return name;
}

// Vocabularies with recorded vectors, and all vocabularies.
class GgmlVocabVectorsTest : public testing::TestWithParam<VocabCase> {};
class GgmlVocabTest : public testing::TestWithParam<VocabCase> {};

std::filesystem::path vocab_json(const std::string& name) {
  return test::vocab_json_dir() / ("ggml-vocab-" + name + ".gguf.json");
}

// Skips when the fixture could not dump the vocabulary (no gguf-py here): the fixture test says why.
#define REQUIRE_VOCAB_JSON(name)                                                                   \
  do {                                                                                             \
    if (!std::filesystem::exists(vocab_json(name))) {                                              \
      GTEST_SKIP() << vocab_json(name) << " is missing: the tokenizer_gguf_vocab_dump fixture did " \
                   << "not make it (see its output)";                                              \
    }                                                                                              \
  } while (0)

Result<Tokenizer> load_vocab(const std::string& name, std::string* why) {
  const auto meta = test::read_gguf_tokenizer_json(vocab_json(name), why);
  if (!meta) return not_found(*why);
  QRT_ASSIGN_OR_RETURN(TokenizerSpec spec, tokenizer_spec_from_gguf(*meta));
  return Tokenizer::create(std::move(spec));
}

TEST_P(GgmlVocabVectorsTest, ReproducesRecordedIds) {
  QRT_REQUIRE_TEST_DATA(data);
  const VocabCase& c = GetParam();
  REQUIRE_VOCAB_JSON(c.name);
  std::string why;
  auto tokenizer = load_vocab(c.name, &why);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const auto vectors = test::read_vocab_vectors(data / "ggml-vocab", c.name, &why);
  ASSERT_TRUE(vectors) << why;
  std::string report;
  const size_t matching = test::count_matching(*tokenizer, *vectors, &report);
  std::cout << "[ vectors  ] " << c.name << ": " << matching << " of " << vectors->texts.size()
            << " strings give the recorded ids\n";
  EXPECT_EQ(matching, vectors->texts.size()) << report;
}

TEST_P(GgmlVocabTest, DecodeInvertsEncode) {
  QRT_REQUIRE_TEST_DATA(data);
  const VocabCase& c = GetParam();
  REQUIRE_VOCAB_JSON(c.name);
  std::string why;
  auto tokenizer = load_vocab(c.name, &why);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  // Every vocabulary shares the same .inp strings; the gpt-2 copy serves the ones without their own.
  const auto vectors = test::read_vocab_vectors(data / "ggml-vocab", "gpt-2", &why);
  ASSERT_TRUE(vectors) << why;
  for (const std::string& text : vectors->texts) {
    const auto ids = tokenizer->encode(text, /*add_special=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    const auto decoded = tokenizer->decode(*ids);
    ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
    if (c.kind != VocabKind::kWordPiece) {
      EXPECT_EQ(*decoded, text);
    } else {
      // WordPiece: the same words up to case, accents and unknowns; at least as many tokens as words.
      EXPECT_EQ(ids->empty(), text.find_first_not_of(" \t\n") == std::string::npos) << text;
    }
  }
}

TEST_P(GgmlVocabTest, AddsSpecialTokensAsTheMetadataSays) {
  QRT_REQUIRE_TEST_DATA(data);
  const VocabCase& c = GetParam();
  REQUIRE_VOCAB_JSON(c.name);
  std::string why;
  const auto meta = test::read_gguf_tokenizer_json(vocab_json(c.name), &why);
  ASSERT_TRUE(meta) << why;
  auto tokenizer = load_vocab(c.name, &why);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const auto plain = tokenizer->encode("Hello world", false);
  const auto with_special = tokenizer->encode("Hello world", true);
  ASSERT_TRUE(plain.ok() && with_special.ok());
  std::vector<int32_t> expected = *plain;
  const bool add_bos = meta->add_bos.value_or(meta->model == "llama" || meta->model == "bert");
  if (add_bos) expected.insert(expected.begin(), static_cast<int32_t>(meta->model == "bert" ? *meta->cls_id : *meta->bos_id));
  if (meta->add_eos.value_or(false)) expected.push_back(static_cast<int32_t>(*meta->eos_id));
  if (meta->model == "bert") expected.push_back(static_cast<int32_t>(*meta->sep_id));
  EXPECT_EQ(*with_special, expected);
  if (meta->eos_id) {
    EXPECT_TRUE(tokenizer->is_end_of_generation(static_cast<int32_t>(*meta->eos_id)));
  }
}

TEST_P(GgmlVocabTest, ControlTokensParseOnlyWhenAsked) {
  QRT_REQUIRE_TEST_DATA(data);
  const VocabCase& c = GetParam();
  REQUIRE_VOCAB_JSON(c.name);
  std::string why;
  auto tokenizer = load_vocab(c.name, &why);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  // The first control token of the vocabulary, written inside text.
  int32_t control = -1;
  for (size_t id = 0; id < tokenizer->vocab_size() && control < 0; ++id) {
    if (tokenizer->token_type(static_cast<int32_t>(id)) == TokenType::kControl) control = static_cast<int32_t>(id);
  }
  ASSERT_GE(control, 0);
  const std::string text = "a" + std::string(tokenizer->token_text(control)) + "b";
  const auto parsed = tokenizer->encode(text, false, /*parse_special=*/true);
  const auto literal = tokenizer->encode(text, false, /*parse_special=*/false);
  ASSERT_TRUE(parsed.ok() && literal.ok());
  EXPECT_NE(std::find(parsed->begin(), parsed->end(), control), parsed->end());
  EXPECT_EQ(std::find(literal->begin(), literal->end(), control), literal->end());
  const auto decoded = tokenizer->decode(*parsed);
  ASSERT_TRUE(decoded.ok());
  if (c.kind == VocabKind::kByteLevelBpe) {
    EXPECT_EQ(*decoded, text);
  } else if (c.kind == VocabKind::kSentencePiece) {
    // SentencePiece prefixes every text segment with a space, the one after a special token included
    // (llama.cpp and HF alike), and decode strips only the first.
    EXPECT_EQ(*decoded, "a" + std::string(tokenizer->token_text(control)) + " b");
  }
}

TEST_P(GgmlVocabTest, EncodesFromManyThreadsAtOnce) {
  QRT_REQUIRE_TEST_DATA(data);
  const VocabCase& c = GetParam();
  REQUIRE_VOCAB_JSON(c.name);
  std::string why;
  auto tokenizer = load_vocab(c.name, &why);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const auto vectors = test::read_vocab_vectors(data / "ggml-vocab", "gpt-2", &why);
  ASSERT_TRUE(vectors) << why;
  std::vector<std::vector<int32_t>> serial;
  for (const std::string& text : vectors->texts) serial.push_back(*tokenizer->encode(text, false));
  // As llama.cpp's test does: all strings at once from several threads, compared with the serial result.
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < vectors->texts.size(); ++i) {
        const auto ids = tokenizer->encode(vectors->texts[(i + t * 7) % vectors->texts.size()], false);
        if (!ids.ok() || *ids != serial[(i + t * 7) % vectors->texts.size()]) ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
}

constexpr VocabCase kVectorCases[] = {
    {"bert-bge", VocabKind::kWordPiece},      {"deepseek-coder", VocabKind::kByteLevelBpe},
    {"deepseek-llm", VocabKind::kByteLevelBpe}, {"falcon", VocabKind::kByteLevelBpe},
    {"gpt-2", VocabKind::kByteLevelBpe},       {"llama-spm", VocabKind::kSentencePiece},
    {"mpt", VocabKind::kByteLevelBpe},         {"phi-3", VocabKind::kSentencePiece},
    {"refact", VocabKind::kByteLevelBpe},      {"starcoder", VocabKind::kByteLevelBpe},
};
// The vocabularies without vectors are still loaded and checked for round trips and specials.
constexpr VocabCase kOtherCases[] = {{"baichuan", VocabKind::kSentencePiece}, {"gpt-neox", VocabKind::kByteLevelBpe}};

INSTANTIATE_TEST_SUITE_P(Vocabs, GgmlVocabVectorsTest, testing::ValuesIn(kVectorCases), case_name);
INSTANTIATE_TEST_SUITE_P(Vocabs, GgmlVocabTest,
                         testing::Values(kVectorCases[0], kVectorCases[1], kVectorCases[2], kVectorCases[3],
                                         kVectorCases[4], kVectorCases[5], kVectorCases[6], kVectorCases[7],
                                         kVectorCases[8], kVectorCases[9], kOtherCases[0], kOtherCases[1]),
                         case_name);

}  // namespace
}  // namespace qrt
