// The front ends on small hand-written inputs, and bad input everywhere: every error is a Status naming what
// is wrong, never a crash.
#include <gtest/gtest.h>

#include <random>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/unicode.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

// A SentencePiece-style BPE tokenizer.json: Prepend/Replace normalizer, byte fallback, BOS by template.
constexpr const char* kSmallHfJson = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true, "lstrip": false, "rstrip": false, "single_word": false},
    {"id": 1, "content": "<s>", "special": true},
    {"id": 2, "content": "</s>", "special": true},
    {"id": 9, "content": "<|user|>", "special": true, "rstrip": true}
  ],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x21>": 3, "\u2581": 4, "h": 5, "i": 6, "hi": 7, "\u2581hi": 8},
    "merges": ["h i", ["\u2581", "hi"]]}
})";

TEST(TokenizerHfJsonTest, TranslatesEveryComponent) {
  auto spec = tokenizer_spec_from_hf_json(kSmallHfJson, R"({"add_bos_token": true, "eos_token": "</s>",
      "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]})");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  EXPECT_EQ(spec->model, TokenizerModelKind::kBpe);
  EXPECT_TRUE(spec->byte_fallback);
  EXPECT_EQ(spec->tokens.size(), 10u);  // ids 0..8 from the vocab, 9 from added_tokens
  EXPECT_EQ(spec->chat_template, "D");
  auto tok = Tokenizer::create(std::move(spec).value());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);
  // "hi hi!": ▁hi ▁hi then '!' through byte fallback, BOS first.
  EXPECT_EQ(*tok->encode("hi hi!", true), (std::vector<int32_t>{1, 8, 8, 3}));
  // An unknown character without a byte token: unk, and consecutive ones fused.
  EXPECT_EQ(*tok->encode("hi??", false), (std::vector<int32_t>{8, 0}));
  // The special token swallows whitespace after it (rstrip); the text after it is a new segment.
  EXPECT_EQ(*tok->encode("<|user|>  hi", false, true), (std::vector<int32_t>{9, 8}));
  EXPECT_EQ(*tok->decode(std::vector<int32_t>{1, 8, 8, 3}, true), "hi hi!");
}

TEST(TokenizerHfJsonTest, RejectsWhatItCannotRun) {
  EXPECT_EQ(tokenizer_spec_from_hf_json("{not json").status().code(), ErrorCode::kFormatError);
  EXPECT_EQ(tokenizer_spec_from_hf_json("[]").status().code(), ErrorCode::kFormatError);
  const auto unigram = tokenizer_spec_from_hf_json(R"({"model": {"type": "Unigram", "vocab": {}}})");
  EXPECT_EQ(unigram.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(unigram.status().message().find("Unigram"), std::string::npos);
  const auto bad_type = tokenizer_spec_from_hf_json(
      R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "byte_fallback": "yes"}})");
  EXPECT_EQ(bad_type.status().code(), ErrorCode::kFormatError);
  EXPECT_NE(bad_type.status().message().find("byte_fallback"), std::string::npos);
  const auto bad_id = tokenizer_spec_from_hf_json(R"({"model": {"type": "BPE", "vocab": {"a": -4}, "merges": []}})");
  EXPECT_FALSE(bad_id.ok());
  // A huge id is refused instead of sizing the vocabulary by it.
  const auto huge_id =
      tokenizer_spec_from_hf_json(R"({"model": {"type": "BPE", "vocab": {"a": 2000000000}, "merges": []}})");
  EXPECT_EQ(huge_id.status().code(), ErrorCode::kFormatError);
  const auto bad_normalizer = tokenizer_spec_from_hf_json(
      R"({"normalizer": {"type": "Precompiled"}, "model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}})");
  EXPECT_EQ(bad_normalizer.status().code(), ErrorCode::kUnsupported);
  // A regex that does not compile is reported when the tokenizer is built, with its pattern.
  auto bad_regex = tokenizer_spec_from_hf_json(
      R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"},
          "model": {"type": "BPE", "vocab": {"a": 0, "aa": 1}, "merges": ["a a"]}})");
  ASSERT_TRUE(bad_regex.ok()) << bad_regex.status().to_string();
  const auto built = Tokenizer::create(std::move(bad_regex).value());
  EXPECT_FALSE(built.ok());
  EXPECT_NE(built.status().message().find("(a"), std::string::npos);
}

GgufTokenizerMetadata gpt2_like_meta() {
  GgufTokenizerMetadata meta;
  meta.source = "toy.gguf";
  meta.model = "gpt2";
  meta.pre = "gpt-2";
  meta.tokens = {"a", "b", "ab", "\xC4\xA0", "\xC4\xA0" "ab", "<|endoftext|>"};
  meta.token_types = {1, 1, 1, 1, 1, 3};
  meta.merges = {"a b", "\xC4\xA0 ab"};
  meta.eos_id = 5;
  meta.bos_id = 5;
  return meta;
}

TEST(TokenizerGgufTest, Gpt2MetadataBuildsAByteLevelBpe) {
  auto spec = tokenizer_spec_from_gguf(gpt2_like_meta());
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto tok = Tokenizer::create(std::move(spec).value());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(*tok->encode("ab ab", false), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ(*tok->encode("ab<|endoftext|>", false, true), (std::vector<int32_t>{2, 5}));
  EXPECT_TRUE(tok->is_end_of_generation(5));
  EXPECT_EQ(*tok->decode(std::vector<int32_t>{2, 4, 5}), "ab ab<|endoftext|>");
  EXPECT_EQ(*tok->decode(std::vector<int32_t>{2, 4, 5}, true), "ab ab");
}

TEST(TokenizerGgufTest, BadMetadataIsAnError) {
  const auto expect_error = [](GgufTokenizerMetadata meta, const std::string& mentions) {
    const auto spec = tokenizer_spec_from_gguf(meta);
    ASSERT_FALSE(spec.ok()) << mentions;
    EXPECT_NE(spec.status().message().find(mentions), std::string::npos) << spec.status().to_string();
  };
  GgufTokenizerMetadata meta = gpt2_like_meta();
  meta.pre = "no-such-pre";
  expect_error(meta, "no-such-pre");
  meta = gpt2_like_meta();
  meta.model = "t5";
  expect_error(meta, "t5");
  meta = gpt2_like_meta();
  meta.tokens.clear();
  expect_error(meta, "tokenizer.ggml.tokens");
  meta = gpt2_like_meta();
  meta.token_types.pop_back();
  expect_error(meta, "token_type");
  meta = gpt2_like_meta();
  meta.merges.push_back("nospace");
  expect_error(meta, "nospace");
  meta = gpt2_like_meta();
  meta.bos_id = 99;
  expect_error(meta, "bos_token_id");
  meta = gpt2_like_meta();
  meta.merges.clear();
  expect_error(meta, "merges");
}

TEST(TokenizerGgufTest, EveryKnownPreCompiles) {
  // Every byte is a token, so any text round-trips.
  GgufTokenizerMetadata complete = gpt2_like_meta();
  complete.tokens.clear();
  for (int b = 0; b < 256; ++b) complete.tokens.emplace_back(tokenizer_detail::byte_to_unicode(static_cast<uint8_t>(b)));
  complete.tokens.push_back("ab");
  complete.tokens.push_back("\xC4\xA0" "ab");
  complete.token_types.assign(complete.tokens.size(), 1);
  complete.bos_id = complete.eos_id = std::nullopt;
  for (const char* pre : {"default", "llama-bpe", "llama3", "qwen2", "deepseek-llm", "deepseek-coder", "deepseek-v3",
                          "falcon", "starcoder", "refact", "command-r", "gpt-2", "mpt", "tekken", "gpt-4o", "dbrx"}) {
    GgufTokenizerMetadata meta = complete;
    meta.pre = pre;
    auto spec = tokenizer_spec_from_gguf(meta);
    ASSERT_TRUE(spec.ok()) << pre << ": " << spec.status().to_string();
    auto tok = Tokenizer::create(std::move(spec).value());
    ASSERT_TRUE(tok.ok()) << pre << ": " << tok.status().to_string();
    EXPECT_TRUE(tok->encode("ab ab 123 \xE4\xB8\xAD\n\n", false).ok()) << pre;
    // 200 KB of mixed whitespace, letters and digits: every regex must get through it (no backtracking or
    // JIT-stack failure) and byte-level BPE must give it back exactly.
    std::string text;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    const char alphabet[] = "   \t\n\r ab1";
    while (text.size() < 200000) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      text.append(1 + (state >> 60), alphabet[(state >> 33) % (sizeof(alphabet) - 1)]);
    }
    const auto ids = tok->encode(text, false);
    ASSERT_TRUE(ids.ok()) << pre << ": " << ids.status().to_string();
    const auto decoded = tok->decode(*ids);
    ASSERT_TRUE(decoded.ok());
    EXPECT_TRUE(*decoded == text) << pre << ": the decoded text differs";
  }
}

TEST(TokenizerTiktokenTest, ParsesRanksAndRejectsBadLines) {
  // "a" "b" "ab" " " as base64.
  auto spec = tokenizer_spec_from_tiktoken("YQ== 0\nYg== 1\nYWI= 2\nIA== 3\n", {}, true, {"<|eot|>"});
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto tok = Tokenizer::create(std::move(spec).value());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(*tok->encode("ab b", false), (std::vector<int32_t>{2, 3, 1}));
  EXPECT_EQ(*tok->encode("<|eot|>", false, true), (std::vector<int32_t>{4}));
  EXPECT_FALSE(tokenizer_spec_from_tiktoken("YQ== 0\n!!! 1\n", {}, true).ok());
  EXPECT_FALSE(tokenizer_spec_from_tiktoken("YQ== 0\nYWJjZ 1\n", {}, true).ok()) << "5 base64 digits";
  // Padding may be left out.
  auto unpadded = tokenizer_spec_from_tiktoken("YQ 0\nYg 1\nYWI 2\nIA 3\n", {}, true);
  ASSERT_TRUE(unpadded.ok()) << unpadded.status().to_string();
  auto tok2 = Tokenizer::create(std::move(unpadded).value());
  ASSERT_TRUE(tok2.ok());
  EXPECT_EQ(*tok2->encode("ab b", false), (std::vector<int32_t>{2, 3, 1}));
  const auto gap = tokenizer_spec_from_tiktoken("YQ== 0\nYg== 2\n", {}, true);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.status().message().find("line 2"), std::string::npos);
  EXPECT_FALSE(tokenizer_spec_from_tiktoken("", {}, true).ok());
}

// Protobuf writing, just enough for a SentencePiece ModelProto.
std::string varint(uint64_t v) {
  std::string out;
  do {
    out.push_back(static_cast<char>((v & 0x7F) | (v >= 0x80 ? 0x80 : 0)));
    v >>= 7;
  } while (v);
  return out;
}
std::string field_bytes(uint32_t field, const std::string& bytes) { return varint(field << 3 | 2) + varint(bytes.size()) + bytes; }
std::string field_varint(uint32_t field, uint64_t v) { return varint(field << 3) + varint(v); }
std::string piece(const std::string& text, float score, int type) {
  std::string score_bytes(4, '\0');
  std::memcpy(score_bytes.data(), &score, 4);
  return field_bytes(1, field_bytes(1, text) + varint(2 << 3 | 5) + score_bytes + field_varint(3, type));
}

TEST(TokenizerSentencePieceModelTest, ReadsAHandWrittenModel) {
  const std::string m = "\xE2\x96\x81";
  std::string model = piece("<unk>", 0, 2) + piece("<s>", 0, 3) + piece("</s>", 0, 3) + piece(m, -1, 1) +
                      piece("a", -2, 1) + piece(m + "a", -3, 1);
  model += field_bytes(2, field_varint(3, 2));                                        // trainer: BPE
  model += field_bytes(3, field_bytes(1, "identity") + field_varint(4, 0));           // no whitespace squeezing
  auto spec = tokenizer_spec_from_sentencepiece(model, "toy.model");
  ASSERT_TRUE(spec.ok()) << spec.status().to_string();
  auto tok = Tokenizer::create(std::move(spec).value());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(*tok->encode("a a", true), (std::vector<int32_t>{1, 5, 5}));
  EXPECT_EQ(*tok->decode(std::vector<int32_t>{1, 5, 5}, true), "a a");

  std::string unigram = piece("<unk>", 0, 2) + field_bytes(2, field_varint(3, 1));
  EXPECT_EQ(tokenizer_spec_from_sentencepiece(unigram).status().code(), ErrorCode::kUnsupported);
  // Every truncation of a valid model is an error or a smaller valid model, never a crash.
  for (size_t cut = 0; cut < model.size(); ++cut) (void)tokenizer_spec_from_sentencepiece(model.substr(0, cut));
}

TEST(TokenizerSentencePieceModelTest, RandomBytesNeverCrash) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    const auto bytes = test::random_bytes(1 + seed * 7 % 300, seed);
    (void)tokenizer_spec_from_sentencepiece(std::string(bytes.begin(), bytes.end()));
  }
}

TEST(TokenizerCreateTest, RejectsInconsistentSpecs) {
  TokenizerSpec empty;
  EXPECT_EQ(Tokenizer::create(empty).status().code(), ErrorCode::kFormatError);
  TokenizerSpec spm;
  spm.model = TokenizerModelKind::kSentencePiece;
  spm.tokens = {"a", "b"};
  spm.scores = {0.0f};
  EXPECT_NE(Tokenizer::create(spm).status().message().find("scores"), std::string::npos);
  TokenizerSpec bpe;
  bpe.tokens = {"a", "aa"};
  bpe.merges = {{"a", "a"}};
  bpe.bos_id = 7;
  EXPECT_NE(Tokenizer::create(bpe).status().message().find("bos"), std::string::npos);
  bpe.bos_id = -1;
  AddedToken bad;
  bad.id = 9;
  bad.content = "<x>";
  bpe.added_tokens.push_back(bad);
  EXPECT_FALSE(Tokenizer::create(bpe).ok());
  bpe.added_tokens.clear();
  bpe.merges.push_back({"a", "zz"});  // names a missing token: dropped with a warning, as llama.cpp does
  auto tok = Tokenizer::create(bpe);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ(*tok->encode("aaa", false), (std::vector<int32_t>{1, 0}));
  const auto decoded = tok->decode(std::vector<int32_t>{0, 2});
  EXPECT_EQ(decoded.status().code(), ErrorCode::kOutOfRange);
  EXPECT_TRUE(tok->token_to_piece(-1).empty());
  EXPECT_TRUE(tok->token_to_piece(2).empty());
}

}  // namespace
}  // namespace qrt
