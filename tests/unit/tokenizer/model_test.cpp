// The models on toy vocabularies whose answers are worked out by hand: BPE merge order and ties, rank-derived
// merges, SentencePiece scores, byte fallback and unknowns, WordPiece, and inputs long enough that a quadratic
// merge loop would not finish.
#include <gtest/gtest.h>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/unicode.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

std::vector<int32_t> encode(const Tokenizer& t, std::string_view text) {
  auto ids = t.encode(text, false);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

Tokenizer make(TokenizerSpec spec) {
  auto t = Tokenizer::create(std::move(spec));
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return std::move(t).value();
}

// Characters a, b, c as tokens 0..2 plus the given longer tokens; merges in priority order.
TokenizerSpec char_bpe(std::vector<std::string> extra, std::vector<std::pair<std::string, std::string>> merges) {
  TokenizerSpec spec;
  spec.model = TokenizerModelKind::kBpe;
  spec.tokens = {"a", "b", "c"};
  spec.tokens.insert(spec.tokens.end(), extra.begin(), extra.end());
  spec.merges = std::move(merges);
  return spec;
}

TEST(TokenizerBpeTest, MergeOrderDecides) {
  // tokens: a0 b1 c2 ab3 bc4 abc5
  const auto first_ab = make(char_bpe({"ab", "bc", "abc"}, {{"a", "b"}, {"b", "c"}, {"ab", "c"}}));
  EXPECT_EQ(encode(first_ab, "abc"), (std::vector<int32_t>{5}));  // a b -> ab, then ab c -> abc
  const auto first_bc = make(char_bpe({"ab", "bc", "abc"}, {{"b", "c"}, {"a", "b"}, {"ab", "c"}}));
  EXPECT_EQ(encode(first_bc, "abc"), (std::vector<int32_t>{0, 4}));  // b c -> bc; a bc has no merge
}

TEST(TokenizerBpeTest, EqualRanksMergeLeftmostFirst) {
  const auto t = make(char_bpe({"aa"}, {{"a", "a"}}));
  EXPECT_EQ(encode(t, "aaa"), (std::vector<int32_t>{3, 0}));
  EXPECT_EQ(encode(t, "aaaa"), (std::vector<int32_t>{3, 3}));
}

TEST(TokenizerBpeTest, RanksActAsMerges) {
  // tiktoken: a pair merges when its concatenation is a token; the lower id (rank) goes first.
  TokenizerSpec bc_first = char_bpe({"bc", "ab"}, {});
  bc_first.merges_from_ranks = true;
  EXPECT_EQ(encode(make(bc_first), "abc"), (std::vector<int32_t>{0, 3}));
  TokenizerSpec ab_first = char_bpe({"ab", "bc"}, {});
  ab_first.merges_from_ranks = true;
  EXPECT_EQ(encode(make(ab_first), "abc"), (std::vector<int32_t>{3, 2}));
  TokenizerSpec whole = char_bpe({"bc", "ab", "abc"}, {});
  whole.merges_from_ranks = true;
  EXPECT_EQ(encode(make(whole), "abc"), (std::vector<int32_t>{5}));  // bc, then a + bc = abc
}

TEST(TokenizerBpeTest, LongUnbrokenInputStaysFast) {
  // a, aa, aaaa, ... up to 2^12: one piece of 256 KiB of 'a' merges down to 64 tokens of 4096 a's. A merge loop
  // that rescans the whole piece after every merge would need ~10^11 steps here.
  TokenizerSpec spec;
  spec.model = TokenizerModelKind::kBpe;
  std::string token = "a";
  spec.tokens.push_back(token);
  for (int i = 0; i < 12; ++i) {
    spec.merges.emplace_back(token, token);
    token += token;
    spec.tokens.push_back(token);
  }
  const auto t = make(spec);
  const auto ids = encode(t, std::string(1 << 18, 'a'));
  EXPECT_EQ(ids, std::vector<int32_t>(64, 12));
}

TEST(TokenizerBpeTest, ByteLevelEncodesAnyBytesAndDecodesThemBack) {
  TokenizerSpec spec;
  spec.model = TokenizerModelKind::kBpe;
  spec.byte_level = true;
  for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(tokenizer_detail::byte_to_unicode(static_cast<uint8_t>(b)));
  spec.tokens.push_back("\xC4\xA0t");  // "Ġt" = " t"
  spec.merges = {{"\xC4\xA0", "t"}};
  spec.pre_tokenizer.push_back(PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kByteLevel));
  spec.pre_tokenizer.back().add_prefix_space = false;
  const auto t = make(spec);
  EXPECT_EQ(encode(t, "a t"), (std::vector<int32_t>{'a', 256}));
  const auto bytes = test::random_bytes(20000, 0xb17e);
  const std::string raw(bytes.begin(), bytes.end());
  const auto decoded = t.decode(encode(t, raw));
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, raw);
}

// SentencePiece: "▁" and letters, merged by score.
TokenizerSpec toy_sentencepiece() {
  TokenizerSpec spec;
  spec.model = TokenizerModelKind::kSentencePiece;
  spec.tokens = {"<unk>", "<s>", "</s>", "<0x41>", "<0xC3>", "<0xA9>", "\xE2\x96\x81", "a", "b",
                 "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab"};
  spec.scores = {0, 0, 0, 0, 0, 0, -1, -2, -3, -5, -4, -6};
  spec.types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl, TokenType::kByte,
                TokenType::kByte,    TokenType::kByte,    TokenType::kNormal,  TokenType::kNormal,
                TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal,  TokenType::kNormal};
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.eos_id = 2;
  spec.byte_fallback = true;
  spec.normalizer = {NormalizerStep::prepend(" "), NormalizerStep::replace(" ", "\xE2\x96\x81")};
  spec.decoder.marker = "\xE2\x96\x81";
  spec.decoder.byte_fallback = true;
  spec.decoder.strip_leading_spaces = 1;
  return spec;
}

TEST(TokenizerSentencePieceTest, HighestScoreMergesFirst) {
  const auto t = make(toy_sentencepiece());
  // "▁ab": candidates ▁a (-5) and ab (-4): ab wins, then ▁ + ab -> ▁ab (-6).
  EXPECT_EQ(encode(t, "ab"), (std::vector<int32_t>{11}));
  TokenizerSpec low_ab = toy_sentencepiece();
  low_ab.scores[10] = -7;   // now ▁a (-5) merges first ...
  low_ab.tokens[11] = "xy";  // ... and with no ▁ab, ▁a + b stays apart
  EXPECT_EQ(encode(make(low_ab), "ab"), (std::vector<int32_t>{9, 8}));
}

TEST(TokenizerSentencePieceTest, UnknownCharactersFallBackToBytesOrUnk) {
  const auto t = make(toy_sentencepiece());
  // 'é' is C3 A9: both byte tokens exist. 'A' has a byte token (0x41). 'z' has none: unk.
  EXPECT_EQ(encode(t, "a\xC3\xA9"), (std::vector<int32_t>{9, 4, 5}));
  EXPECT_EQ(encode(t, "A"), (std::vector<int32_t>{6, 3}));
  EXPECT_EQ(encode(t, "zz"), (std::vector<int32_t>{6, 0, 0}));
  TokenizerSpec fused = toy_sentencepiece();
  fused.fuse_unk = true;
  EXPECT_EQ(encode(make(fused), "zz"), (std::vector<int32_t>{6, 0}));
  const auto decoded = t.decode(std::vector<int32_t>{1, 9, 4, 5, 6, 8});
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, "<s> a\xC3\xA9 b");  // the leading space goes only when it starts the text
  const auto skipped = t.decode(std::vector<int32_t>{1, 9, 4, 5, 6, 8}, /*skip_special=*/true);
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(*skipped, "a\xC3\xA9 b");
}

TEST(TokenizerSentencePieceTest, LongInputStaysFast) {
  const auto t = make(toy_sentencepiece());
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "ab ";
  const auto ids = encode(t, text);
  // One piece of 300001 characters: every "ab" merges, then every ▁ab; the trailing ▁ stays alone.
  std::vector<int32_t> expected(100000, 11);
  expected.push_back(6);
  ASSERT_EQ(ids, expected);
  const auto decoded = t.decode(ids);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, text);
}

TEST(TokenizerWordPieceTest, GreedyLongestPrefixWithContinuations) {
  TokenizerSpec spec;
  spec.model = TokenizerModelKind::kWordPiece;
  spec.tokens = {"[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "!", "unaffa"};
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  spec.types[0] = TokenType::kUnknown;
  spec.types[1] = spec.types[2] = TokenType::kControl;
  spec.unk_id = 0;
  spec.bos_id = 1;
  spec.sep_id = 2;
  spec.add_bos = spec.add_sep = true;
  spec.normalizer.push_back(NormalizerStep::of_kind(NormalizerStep::Kind::kBert));
  spec.pre_tokenizer.push_back(PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kBert));
  spec.decoder.wordpiece = true;
  spec.decoder.wordpiece_cleanup = true;
  const auto t = make(spec);
  EXPECT_EQ(encode(t, "unaff"), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(encode(t, "unx"), (std::vector<int32_t>{0}));  // an unmatched rest makes the whole word unknown
  // Greedy, no backtracking: "unaffa" is the longest start of "unaffable", and "##ble" does not exist.
  EXPECT_EQ(encode(t, "unaffable"), (std::vector<int32_t>{0}));
  // Lowercased and accent-stripped ("Unäble" -> "unable"), punctuation split off.
  const auto with_special = t.encode("Un\xC3\xA4" "ble!", true);
  ASSERT_TRUE(with_special.ok());
  EXPECT_EQ(*with_special, (std::vector<int32_t>{1, 3, 5, 6, 2}));
  const auto decoded = t.decode(std::vector<int32_t>{3, 5, 6}, true);
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(*decoded, "unable!");
}

}  // namespace
}  // namespace qrt
