// The real tokenizer files of the shared data (HF tokenizer.json, tiktoken ranks, GPT-2 vocab/merges,
// SentencePiece models) through their front ends, against the ids the HF tokenizers recorded in the ggml-vocab
// .out files, the stories260K golden generation, and round trips over War and Peace.
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/unicode.hpp"
#include "test_support.hpp"
#include "vocab_test_data.hpp"

namespace qrt {
namespace {

namespace fs = std::filesystem;

// Builds a tokenizer from files under <data>/tokenizers (or elsewhere under <data>).
using Loader = Result<TokenizerSpec> (*)(const fs::path& data);

Result<std::string> read(const fs::path& path) {
  auto text = test::read_file(path);
  if (!text) return not_found("cannot read " + path.string());
  return std::move(*text);
}

Result<TokenizerSpec> hf_json(const fs::path& dir) {
  QRT_ASSIGN_OR_RETURN(std::string json, read(dir / "tokenizer.json"));
  std::string config = fs::exists(dir / "tokenizer_config.json") ? *test::read_file(dir / "tokenizer_config.json") : "";
  return tokenizer_spec_from_hf_json(json, config, (dir / "tokenizer.json").string());
}

Result<TokenizerSpec> llama3_bpe_files(const fs::path& data) {
  const fs::path dir = data / "tokenizers/llama3";
  QRT_ASSIGN_OR_RETURN(std::string vocab, read(dir / "llama3.2-encoder.json"));
  QRT_ASSIGN_OR_RETURN(std::string merges, read(dir / "llama3.2-vocab.bpe"));
  QRT_ASSIGN_OR_RETURN(auto regexes, gguf_pre_tokenizer_regexes("llama-bpe"));
  return tokenizer_spec_from_bpe_files(vocab, merges, regexes, /*ignore_merges=*/true, "llama3.2-encoder.json");
}

Result<TokenizerSpec> llama3_tiktoken(const fs::path& data) {
  QRT_ASSIGN_OR_RETURN(std::string ranks, read(data / "tokenizers/llama3/tokenizer.model"));
  QRT_ASSIGN_OR_RETURN(auto regexes, gguf_pre_tokenizer_regexes("llama-bpe"));
  return tokenizer_spec_from_tiktoken(ranks, regexes, /*ignore_merges=*/true,
                                      {"<|begin_of_text|>", "<|end_of_text|>"}, "llama3/tokenizer.model");
}

Result<TokenizerSpec> qwen_tiktoken(const fs::path& data) {
  QRT_ASSIGN_OR_RETURN(std::string ranks, read(data / "tokenizers/qwen/qwen.tiktoken"));
  QRT_ASSIGN_OR_RETURN(auto regexes, gguf_pre_tokenizer_regexes("qwen2"));
  // Qwen2's tokenizer.json runs plain BPE merges (ignore_merges false), after an NFC normalizer.
  QRT_ASSIGN_OR_RETURN(TokenizerSpec spec,
                       tokenizer_spec_from_tiktoken(ranks, regexes, /*ignore_merges=*/false,
                                                    {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}, "qwen.tiktoken"));
  spec.normalizer.insert(spec.normalizer.begin(), NormalizerStep::unicode(UnicodeForm::kNfc));
  return spec;
}

Result<TokenizerSpec> gpt2_json(const fs::path& data) { return hf_json(data / "tokenizers/gpt2"); }

Result<TokenizerSpec> gpt2_bpe_files(const fs::path& data) {
  const fs::path dir = data / "tokenizers/gpt2";
  QRT_ASSIGN_OR_RETURN(std::string vocab, read(dir / "vocab.json"));
  QRT_ASSIGN_OR_RETURN(std::string merges, read(dir / "merges.txt"));
  return tokenizer_spec_from_bpe_files(vocab, merges, {}, /*ignore_merges=*/false, "gpt2/vocab.json");
}

Result<TokenizerSpec> phi3_json(const fs::path& data) { return hf_json(data / "tokenizers/phi3"); }
Result<TokenizerSpec> phi2_json(const fs::path& data) { return hf_json(data / "tokenizers/phi2"); }
Result<TokenizerSpec> stories_json(const fs::path& data) { return hf_json(data / "stories260K-hf"); }

Result<TokenizerSpec> sentencepiece(const fs::path& path) {
  QRT_ASSIGN_OR_RETURN(std::string model, read(path));
  return tokenizer_spec_from_sentencepiece(model, path.string());
}
Result<TokenizerSpec> llama2_sp(const fs::path& data) { return sentencepiece(data / "tokenizers/llama2/tokenizer.model"); }
Result<TokenizerSpec> mistral_v1_sp(const fs::path& data) {
  return sentencepiece(data / "tokenizers/mistral/tokenizer.model.v1");
}
Result<TokenizerSpec> mistral_v3_sp(const fs::path& data) {
  return sentencepiece(data / "tokenizers/mistral/mistral_instruct_tokenizer_240323.model.v3");
}
Result<TokenizerSpec> mistral_v7_sp(const fs::path& data) {
  return sentencepiece(data / "tokenizers/mistral/mistral_instruct_tokenizer_241114.model.v7");
}
Result<TokenizerSpec> cl100k_tiktoken(const fs::path& data) {
  QRT_ASSIGN_OR_RETURN(std::string ranks, read(data / "tokenizers/cl100k/cl100k_base.tiktoken"));
  // cl100k's split regex is Llama 3's (Llama 3 took it over with its ranks).
  QRT_ASSIGN_OR_RETURN(auto regexes, gguf_pre_tokenizer_regexes("llama-bpe"));
  return tokenizer_spec_from_tiktoken(ranks, regexes, /*ignore_merges=*/true, {"<|endoftext|>"}, "cl100k_base.tiktoken");
}

Result<Tokenizer> build(Loader loader, const fs::path& data) {
  QRT_ASSIGN_OR_RETURN(TokenizerSpec spec, loader(data));
  return Tokenizer::create(std::move(spec));
}

struct FileCase {
  const char* name;
  Loader loader;
  const char* vectors;  // ggml-vocab vector set recorded from the same tokenizer, or nullptr
};

std::string file_case_name(const testing::TestParamInfo<FileCase>& info) { return info.param.name; }
void PrintTo(const FileCase& c, std::ostream* os) { *os << c.name; }

class TokenizerFileVectorsTest : public testing::TestWithParam<FileCase> {};

TEST_P(TokenizerFileVectorsTest, ReproducesRecordedIds) {
  QRT_REQUIRE_TEST_DATA(data);
  const FileCase& c = GetParam();
  auto tokenizer = build(c.loader, data);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  std::string why;
  const auto vectors = test::read_vocab_vectors(data / "ggml-vocab", c.vectors, &why);
  ASSERT_TRUE(vectors) << why;
  std::string report;
  const size_t matching = test::count_matching(*tokenizer, *vectors, &report);
  std::cout << "[ vectors  ] " << c.name << " vs " << c.vectors << ".out: " << matching << " of "
            << vectors->texts.size() << " strings give the recorded ids\n";
  EXPECT_EQ(matching, vectors->texts.size()) << report;
}

INSTANTIATE_TEST_SUITE_P(
    Files, TokenizerFileVectorsTest,
    testing::Values(FileCase{"llama3_encoder_json_vocab_bpe", llama3_bpe_files, "llama-bpe"},
                    FileCase{"llama3_tiktoken", llama3_tiktoken, "llama-bpe"},
                    FileCase{"qwen_tiktoken", qwen_tiktoken, "qwen2"},
                    FileCase{"gpt2_tokenizer_json", gpt2_json, "gpt-2"},
                    FileCase{"gpt2_vocab_json_merges_txt", gpt2_bpe_files, "gpt-2"},
                    FileCase{"phi3_tokenizer_json", phi3_json, "phi-3"},
                    FileCase{"llama2_sentencepiece_model", llama2_sp, "llama-spm"}),
    file_case_name);

// decode(encode(s)) == s on slices of War and Peace at random offsets (a new seed each run, printed), cut
// anywhere (even inside a UTF-8 character), and on the vector strings.
class TokenizerFileRoundTripTest : public testing::TestWithParam<FileCase> {};

TEST_P(TokenizerFileRoundTripTest, DecodeInvertsEncode) {
  QRT_REQUIRE_TEST_DATA(data);
  const FileCase& c = GetParam();
  auto tokenizer = build(c.loader, data);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const auto book = test::read_file(data / "corpus/war-and-peace.txt");
  ASSERT_TRUE(book && book->size() > 100000);
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  std::vector<std::string> texts;
  for (int i = 0; i < 6; ++i) {
    const size_t length = 1 + rng() % 20000;
    texts.push_back(book->substr(rng() % (book->size() - length), length));
  }
  std::string why;
  const auto vectors = test::read_vocab_vectors(data / "ggml-vocab", "gpt-2", &why);
  ASSERT_TRUE(vectors) << why;
  texts.insert(texts.end(), vectors->texts.begin(), vectors->texts.end());
  for (const std::string& text : texts) {
    const auto ids = tokenizer->encode(text, /*add_special=*/true);
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    const auto decoded = tokenizer->decode(*ids, /*skip_special=*/true);
    ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
    ASSERT_EQ(*decoded, text) << "seed " << seed << ", " << text.size() << "-byte text";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, TokenizerFileRoundTripTest,
    testing::Values(FileCase{"llama3_tiktoken", llama3_tiktoken, nullptr},
                    FileCase{"qwen_tiktoken", qwen_tiktoken, nullptr},
                    FileCase{"gpt2_tokenizer_json", gpt2_json, nullptr},
                    FileCase{"phi2_tokenizer_json", phi2_json, nullptr},
                    FileCase{"phi3_tokenizer_json", phi3_json, nullptr},
                    FileCase{"stories260K_tokenizer_json", stories_json, nullptr},
                    FileCase{"llama2_sentencepiece_model", llama2_sp, nullptr},
                    FileCase{"mistral_v1_sentencepiece_model", mistral_v1_sp, nullptr},
                    FileCase{"mistral_v3_sentencepiece_model", mistral_v3_sp, nullptr},
                    FileCase{"mistral_v7_sentencepiece_model", mistral_v7_sp, nullptr},
                    FileCase{"cl100k_tiktoken", cl100k_tiktoken, nullptr}),
    file_case_name);

// Qwen2 normalizes to NFC before its byte-level BPE, so the vector strings spelled decomposed (NFD: "A\u0308pfel",
// "Cu\u031B\u0309a Vie\u0323\u0302t") must give the ids HF recorded for the composed strings; without NFC they
// would fall apart into the bytes of the combining marks.
TEST(TokenizerFilesTest, QwenNfcGivesDecomposedTextsTheRecordedIds) {
  QRT_REQUIRE_TEST_DATA(data);
  auto tokenizer = build(qwen_tiktoken, data);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  std::string why;
  auto vectors = test::read_vocab_vectors(data / "ggml-vocab", "qwen2", &why);
  ASSERT_TRUE(vectors) << why;
  size_t decomposed = 0;
  for (std::string& text : vectors->texts) {
    auto nfd = tokenizer_detail::unicode_normalize(text, UnicodeForm::kNfd);
    ASSERT_TRUE(nfd.ok()) << nfd.status().to_string();
    if (*nfd != text) ++decomposed;
    text = std::move(nfd).value();
  }
  EXPECT_GE(decomposed, 2u) << "the qwen2 vectors should hold composed characters (\"\u00C4pfel\", \"C\u1EEDa\")";
  std::string report;
  EXPECT_EQ(test::count_matching(*tokenizer, *vectors, &report), vectors->texts.size()) << report;
  // The same tokenizer without its NFC step does not reproduce them: the check above depends on it.
  auto spec = qwen_tiktoken(data);
  ASSERT_TRUE(spec.ok());
  spec->normalizer.erase(spec->normalizer.begin());
  auto unnormalized = Tokenizer::create(std::move(spec).value());
  ASSERT_TRUE(unnormalized.ok());
  EXPECT_EQ(test::count_matching(*unnormalized, *vectors, &report), vectors->texts.size() - decomposed);
}

// The two descriptions of Llama 3 (GPT-2 style files and tiktoken ranks) are the same tokenizer.
TEST(TokenizerFilesTest, Llama3FilesAgreeOnWarAndPeace) {
  QRT_REQUIRE_TEST_DATA(data);
  auto from_bpe = build(llama3_bpe_files, data);
  auto from_ranks = build(llama3_tiktoken, data);
  ASSERT_TRUE(from_bpe.ok()) << from_bpe.status().to_string();
  ASSERT_TRUE(from_ranks.ok()) << from_ranks.status().to_string();
  const auto book = test::read_file(data / "corpus/war-and-peace.txt");
  ASSERT_TRUE(book);
  const auto start = std::chrono::steady_clock::now();
  const auto ids = from_ranks->encode(*book, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  std::cout << "[ speed    ] Llama 3: " << book->size() << " bytes -> " << ids->size() << " tokens in " << seconds
            << " s (" << book->size() / seconds / 1e6 << " MB/s)\n";
  const auto other = from_bpe->encode(*book, false);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(*ids, *other);
  const auto decoded = from_ranks->decode(*ids);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, *book);
}

// stories260K's HF tokenizer gives the prompt ids llama2.c recorded, and its golden generation decodes to
// the recorded text.
TEST(TokenizerFilesTest, Stories260KGoldenPromptAndText) {
  QRT_REQUIRE_TEST_DATA(data);
  auto tokenizer = build(stories_json, data);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const auto golden = test::read_file(data / "stories260K/golden_greedy_once_upon_a_time.txt");
  ASSERT_TRUE(golden);
  const auto ids_after = [&](const std::string& label) {
    std::vector<int32_t> ids;
    const size_t at = golden->find(label);
    if (at == std::string::npos) return ids;
    std::istringstream line(golden->substr(at + label.size(), golden->find('\n', at) - at - label.size()));
    for (int32_t id = 0; line >> id;) ids.push_back(id);
    return ids;
  };
  const std::vector<int32_t> prompt = ids_after("prompt_ids:");
  const std::vector<int32_t> generated = ids_after("generated_ids:");
  ASSERT_EQ(prompt, (std::vector<int32_t>{1, 403, 407, 261, 378}));
  ASSERT_EQ(generated.size(), 60u);

  const auto encoded = tokenizer->encode("Once upon a time", /*add_special=*/true);
  ASSERT_TRUE(encoded.ok()) << encoded.status().to_string();
  EXPECT_EQ(*encoded, prompt);
  EXPECT_EQ(tokenizer->bos_id(), 1);
  EXPECT_EQ(tokenizer->eos_id(), 2);

  const size_t text_at = golden->find("text:\n");
  ASSERT_NE(text_at, std::string::npos);
  std::string text = golden->substr(text_at + 6);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  const auto decoded = tokenizer->decode(all, /*skip_special=*/true);
  ASSERT_TRUE(decoded.ok()) << decoded.status().to_string();
  EXPECT_EQ(*decoded, text);
  // Streaming: the pieces of the generated ids, concatenated, are the text after the prompt.
  std::string streamed;
  for (int32_t id : generated) streamed += tokenizer->token_to_piece(id);
  EXPECT_EQ(std::string(" Once upon a time") + streamed, " " + text);
}

// Phi-3's chat markers are special: split out only when asked, and they end generation where they should.
TEST(TokenizerFilesTest, Phi3SpecialTokensAndChatTemplate) {
  QRT_REQUIRE_TEST_DATA(data);
  auto tokenizer = build(phi3_json, data);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().to_string();
  const auto user = tokenizer->token_to_id("<|user|>");
  const auto end = tokenizer->token_to_id("<|end|>");
  ASSERT_TRUE(user && end);
  const auto parsed = tokenizer->encode("<|user|>\nHi<|end|>", /*add_special=*/true, /*parse_special=*/true);
  ASSERT_TRUE(parsed.ok());
  ASSERT_GE(parsed->size(), 4u);
  EXPECT_EQ((*parsed)[0], tokenizer->bos_id());
  EXPECT_EQ((*parsed)[1], *user);
  EXPECT_EQ(parsed->back(), *end);
  const auto literal = tokenizer->encode("<|user|>", false, /*parse_special=*/false);
  ASSERT_TRUE(literal.ok());
  EXPECT_GT(literal->size(), 1u);
  EXPECT_TRUE(tokenizer->is_end_of_generation(*end));
  EXPECT_EQ(tokenizer->eot_id(), *end);
  EXPECT_NE(tokenizer->chat_template().find("<|user|>"), std::string::npos);
}

}  // namespace
}  // namespace qrt
