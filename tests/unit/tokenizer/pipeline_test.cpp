// The text stages before the model: split behaviours, the pre-tokenizer kinds, normalizers and added-token
// matching, each with answers worked out from the HF `tokenizers` definitions.
#include <gtest/gtest.h>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/tokenizer_state.hpp"

namespace qrt::tokenizer_detail {
namespace {

std::vector<std::string> pre_tokenize_with(std::vector<PreTokenizerStep> steps, std::string text,
                                           bool at_input_start = true) {
  TokenizerState state;
  state.spec.pre_tokenizer = std::move(steps);
  const Status compiled = compile_pipeline(state);
  EXPECT_TRUE(compiled.ok()) << compiled.to_string();
  RegexScratch scratch;
  std::vector<Fragment> pieces;
  const Status status = pre_tokenize(state, scratch, Fragment{std::move(text), -1, at_input_start}, &pieces);
  EXPECT_TRUE(status.ok()) << status.to_string();
  std::vector<std::string> out;
  for (const Fragment& piece : pieces) out.push_back(piece.text);
  return out;
}

using Pieces = std::vector<std::string>;

TEST(TokenizerPipelineTest, SplitBehaviours) {
  const auto split = [](SplitBehavior behavior, bool invert = false) {
    return pre_tokenize_with({PreTokenizerStep::split_by("-+", behavior, invert)}, "a-b--c-");
  };
  EXPECT_EQ(split(SplitBehavior::kIsolated), (Pieces{"a", "-", "b", "--", "c", "-"}));
  EXPECT_EQ(split(SplitBehavior::kRemoved), (Pieces{"a", "b", "c"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithPrevious), (Pieces{"a-", "b--", "c-"}));
  EXPECT_EQ(split(SplitBehavior::kMergedWithNext), (Pieces{"a", "-b", "--c", "-"}));
  // Inverted: the pattern marks what is kept; the rest is the delimiter.
  EXPECT_EQ(split(SplitBehavior::kRemoved, true), (Pieces{"-", "--", "-"}));
  // Contiguous glues adjacent matches: with single-character matches of "-", "--" stays one piece.
  EXPECT_EQ(pre_tokenize_with({PreTokenizerStep::split_by("-", SplitBehavior::kContiguous)}, "a--b-"),
            (Pieces{"a", "--", "b", "-"}));
  EXPECT_EQ(pre_tokenize_with({PreTokenizerStep::split_by("-", SplitBehavior::kIsolated)}, "a--b"),
            (Pieces{"a", "-", "-", "b"}));
}

TEST(TokenizerPipelineTest, Gpt2ByteLevelRegex) {
  PreTokenizerStep byte_level = PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kByteLevel);
  byte_level.add_prefix_space = false;
  EXPECT_EQ(pre_tokenize_with({byte_level}, "Hello world's  3.14!!\n\n  x"),
            (Pieces{"Hello", " world", "'s", " ", " 3", ".", "14", "!!", "\n\n ", " x"}));
  byte_level.add_prefix_space = true;
  EXPECT_EQ(pre_tokenize_with({byte_level}, "Hi"), (Pieces{" Hi"}));
}

TEST(TokenizerPipelineTest, ChainedSplitsWorkInsideEarlierPieces) {
  // llama.cpp's starcoder family: digits isolated first, then the GPT-2 regex inside each piece.
  EXPECT_EQ(pre_tokenize_with({PreTokenizerStep::split_by("\\p{N}"), PreTokenizerStep::split_by(gpt2_split_pattern())},
                              "ab 123"),
            (Pieces{"ab", " ", "1", "2", "3"}));
  // `$` means the end of the piece, not the end of a line (deepseek-llm's "\s+$").
  EXPECT_EQ(pre_tokenize_with({PreTokenizerStep::split_by("[\\r\\n]"), PreTokenizerStep::split_by("\\s+$")}, "a  \nb  "),
            (Pieces{"a", "  ", "\n", "b", "  "}));
}

TEST(TokenizerPipelineTest, DigitsAndWhitespace) {
  PreTokenizerStep digits = PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kDigits);
  EXPECT_EQ(pre_tokenize_with({digits}, "a123b4"), (Pieces{"a", "123", "b", "4"}));
  digits.individual_digits = true;
  EXPECT_EQ(pre_tokenize_with({digits}, "a12"), (Pieces{"a", "1", "2"}));
  EXPECT_EQ(pre_tokenize_with({PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kWhitespaceSplit)}, " a\t b\n"),
            (Pieces{"a", "b"}));
  EXPECT_EQ(pre_tokenize_with({PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kBert)}, "Hi, you\xE3\x80\x82ok"),
            (Pieces{"Hi", ",", "you", "\xE3\x80\x82", "ok"}));
}

TEST(TokenizerPipelineTest, MetaspacePrependSchemes) {
  PreTokenizerStep meta = PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kMetaspace);
  const std::string m = "\xE2\x96\x81";
  EXPECT_EQ(pre_tokenize_with({meta}, "Hey friend"), (Pieces{m + "Hey", m + "friend"}));
  // Text already starting with a space gets no second marker.
  EXPECT_EQ(pre_tokenize_with({meta}, " Hey"), (Pieces{m + "Hey"}));
  meta.prepend_scheme = PrependScheme::kFirst;
  EXPECT_EQ(pre_tokenize_with({meta}, "Hey", /*at_input_start=*/false), (Pieces{"Hey"}));
  EXPECT_EQ(pre_tokenize_with({meta}, "Hey", /*at_input_start=*/true), (Pieces{m + "Hey"}));
  meta.prepend_scheme = PrependScheme::kNever;
  meta.split = false;
  EXPECT_EQ(pre_tokenize_with({meta}, "a b"), (Pieces{"a" + m + "b"}));
}

std::string normalize_with(std::vector<NormalizerStep> steps, std::string text) {
  TokenizerState state;
  state.spec.normalizer = std::move(steps);
  EXPECT_TRUE(compile_pipeline(state).ok());
  RegexScratch scratch;
  EXPECT_TRUE(normalize(state, scratch, &text).ok());
  return text;
}

TEST(TokenizerPipelineTest, Normalizers) {
  const std::string m = "\xE2\x96\x81";
  EXPECT_EQ(normalize_with({NormalizerStep::prepend(m), NormalizerStep::replace(" ", m)}, "a b"), m + "a" + m + "b");
  EXPECT_EQ(normalize_with({NormalizerStep::prepend(m)}, ""), "");  // empty text stays empty
  EXPECT_EQ(normalize_with({NormalizerStep::replace(" {2,}", " ")}, "a   b  c"), "a b c");
  EXPECT_EQ(normalize_with({NormalizerStep::of_kind(NormalizerStep::Kind::kLowercase)}, "\xC3\x84pfel \xD0\x91OX"),
            "\xC3\xA4pfel \xD0\xB1ox");  // Äpfel БOX -> äpfel бox
  NormalizerStep strip = NormalizerStep::of_kind(NormalizerStep::Kind::kStrip);
  strip.strip_left = strip.strip_right = true;
  EXPECT_EQ(normalize_with({strip}, " \t a b \n"), "a b");
  // BERT: accents stripped after decomposition, CJK spaced, controls dropped, whitespace made ' '.
  EXPECT_EQ(normalize_with({NormalizerStep::of_kind(NormalizerStep::Kind::kBert)},
                           "C\xE1\xBB\xAD" "a\tVi\xE1\xBB\x87t\x01\xE4\xB8\xAD"),
            "cua viet \xE4\xB8\xAD ");
  // Hangul syllables decompose into their jamo (what NFD does), which BERT keeps.
  EXPECT_EQ(normalize_with({NormalizerStep::of_kind(NormalizerStep::Kind::kBert)}, "\xED\x95\x9C"),
            "\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB");
}

TokenizerState state_with_added(std::vector<AddedToken> added) {
  TokenizerState state;
  state.spec.added_tokens = std::move(added);
  for (uint32_t i = 0; i < state.spec.added_tokens.size(); ++i) {
    state.added_by_first_byte[static_cast<uint8_t>(state.spec.added_tokens[i].content[0])].push_back(i);
  }
  for (auto& list : state.added_by_first_byte) {
    std::sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return state.spec.added_tokens[a].content.size() > state.spec.added_tokens[b].content.size();
    });
  }
  return state;
}

AddedToken added(int32_t id, std::string content, bool special, bool lstrip = false, bool rstrip = false) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  t.special = special;
  t.lstrip = lstrip;
  t.rstrip = rstrip;
  return t;
}

std::string describe(const std::vector<Fragment>& fragments) {
  std::string out;
  for (const Fragment& f : fragments) out += f.token >= 0 ? "[" + std::to_string(f.token) + "]" : "'" + f.text + "'";
  return out;
}

TEST(TokenizerPipelineTest, AddedTokensLongestFirstAndOnlyParsedSpecials) {
  const TokenizerState state =
      state_with_added({added(10, "<|im", false), added(11, "<|im_end|>", true), added(12, "<x>", false)});
  EXPECT_EQ(describe(split_added_tokens(state, "a<|im_end|>b<x>", true)), "'a'[11]'b'[12]");
  // Not parsing specials: the special one is text, but the user-defined prefix inside it still matches.
  EXPECT_EQ(describe(split_added_tokens(state, "a<|im_end|>b<x>", false)), "'a'[10]'_end|>b'[12]");
  EXPECT_EQ(describe(split_added_tokens(state, "", true)), "");
  EXPECT_EQ(describe(split_added_tokens(state, "<x><x>", true)), "[12][12]");
}

TEST(TokenizerPipelineTest, AddedTokensStripAdjacentWhitespace) {
  const TokenizerState state = state_with_added({added(5, "<mask>", true, /*lstrip=*/true, /*rstrip=*/false),
                                                 added(6, "<end>", true, /*lstrip=*/false, /*rstrip=*/true)});
  EXPECT_EQ(describe(split_added_tokens(state, "a  <mask> b <end> \n c", true)), "'a'[5]' b '[6]'c'");
}

}  // namespace
}  // namespace qrt::tokenizer_detail
