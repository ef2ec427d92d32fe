// Unicode normalization forms (the HF NFC / NFD / NFKC / NFKD normalizers) and BERT's accent stripping:
// the forms against the examples of UAX #15 and Python's unicodedata, and a tokenizer.json naming each form,
// where composed and decomposed spellings of the same text must give the same ids.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/tokenizer_state.hpp"
#include "models/tokenizer/unicode.hpp"

namespace qrt::tokenizer_detail {
namespace {

std::string normalized(std::string_view text, UnicodeForm form) {
  auto out = unicode_normalize(text, form);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::string("<error>");
}

TEST(UnicodeNormalizationTest, ComposesAndDecomposesCanonically) {
  EXPECT_EQ(normalized("e\u0301", UnicodeForm::kNfc), "\u00E9");
  EXPECT_EQ(normalized("\u00E9", UnicodeForm::kNfd), "e\u0301");
  EXPECT_EQ(normalized("A\u030A", UnicodeForm::kNfc), "\u00C5");
  // A singleton: ANGSTROM SIGN is canonically A with ring above.
  EXPECT_EQ(normalized("\u212B", UnicodeForm::kNfc), "\u00C5");
  // Marks are put in canonical order (dot below, class 220, before circumflex, 230) before composing.
  EXPECT_EQ(normalized("a\u0323\u0302", UnicodeForm::kNfc), "\u1EAD");
  EXPECT_EQ(normalized("a\u0302\u0323", UnicodeForm::kNfc), "\u1EAD");
  // A composition exclusion: DEVANAGARI QA stays decomposed under NFC.
  EXPECT_EQ(normalized("\u0958", UnicodeForm::kNfc), "\u0915\u093C");
}

TEST(UnicodeNormalizationTest, HangulJamoComposeIntoSyllables) {
  EXPECT_EQ(normalized("\u1100\u1161\u11A8", UnicodeForm::kNfc), "\uAC01");  // L V T -> GAG
  EXPECT_EQ(normalized("\uAC00\u11A8", UnicodeForm::kNfc), "\uAC01");        // LV syllable + T
  EXPECT_EQ(normalized("\uAC01", UnicodeForm::kNfd), "\u1100\u1161\u11A8");
  EXPECT_EQ(normalized("\uD55C\uAD6D\uC5B4", UnicodeForm::kNfd),
            "\u1112\u1161\u11AB\u1100\u116E\u11A8\u110B\u1165");  // 한국어
  EXPECT_EQ(normalized("\u1112\u1161\u11AB\u1100\u116E\u11A8\u110B\u1165", UnicodeForm::kNfc), "\uD55C\uAD6D\uC5B4");
}

TEST(UnicodeNormalizationTest, CompatibilityFormsFoldPresentationVariants) {
  EXPECT_EQ(normalized("\uFB01", UnicodeForm::kNfkc), "fi");  // LATIN SMALL LIGATURE FI
  EXPECT_EQ(normalized("\uFB01", UnicodeForm::kNfc), "\uFB01");
  EXPECT_EQ(normalized("\u2460", UnicodeForm::kNfkc), "1");  // CIRCLED DIGIT ONE
  EXPECT_EQ(normalized("\u00BD", UnicodeForm::kNfkd), "1\u20442");
  EXPECT_EQ(normalized("\uFF76\uFF9E", UnicodeForm::kNfkc), "\u30AC");  // halfwidth KA + voiced mark -> GA
  EXPECT_EQ(normalized("\uFF21\uFF42", UnicodeForm::kNfkc), "Ab");      // fullwidth letters
  // UAX #15's example: LONG S WITH DOT ABOVE + DOT BELOW in each of the four forms.
  EXPECT_EQ(normalized("\u1E9B\u0323", UnicodeForm::kNfc), "\u1E9B\u0323");
  EXPECT_EQ(normalized("\u1E9B\u0323", UnicodeForm::kNfd), "\u017F\u0323\u0307");
  EXPECT_EQ(normalized("\u1E9B\u0323", UnicodeForm::kNfkc), "\u1E69");
  EXPECT_EQ(normalized("\u1E9B\u0323", UnicodeForm::kNfkd), "s\u0323\u0307");
}

TEST(UnicodeNormalizationTest, LongRunsOfCombiningMarksAreReorderedQuickly) {
  // 40000 acute accents (class 230) then 40000 dots below (class 220): every dot moves before every accent. An
  // exchange sort needs 1.6e9 swaps here (about half a minute); a stable sort a few milliseconds.
  constexpr int kMarks = 40000;
  std::string text = "a", accents, dots;
  for (int i = 0; i < kMarks; ++i) accents += "\u0301";
  for (int i = 0; i < kMarks; ++i) dots += "\u0323";
  text += accents + dots;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(normalized(text, UnicodeForm::kNfd), "a" + dots + accents);
  // NFC: only the first dot below composes with the a (into U+1EA1, which has no composition with an acute).
  EXPECT_EQ(normalized(text, UnicodeForm::kNfc), "\u1EA1" + dots.substr(2) + accents);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(UnicodeNormalizationTest, KeepsIllFormedBytesAndAsciiAsTheyAre) {
  for (UnicodeForm form : {UnicodeForm::kNfc, UnicodeForm::kNfd, UnicodeForm::kNfkc, UnicodeForm::kNfkd}) {
    EXPECT_EQ(normalized("plain ASCII text\n\t\x01", form), "plain ASCII text\n\t\x01");
    EXPECT_EQ(normalized("", form), "");
    // An embedded NUL is a character like any other.
    EXPECT_EQ(normalized(std::string("a\0b", 3), form), std::string("a\0b", 3));
  }
  // The well-formed runs around an ill-formed byte are normalized; the byte stays, and a mark after it has
  // nothing to compose with.
  EXPECT_EQ(normalized("e\u0301\xFF" "e\u0301", UnicodeForm::kNfc), "\u00E9\xFF\u00E9");
  EXPECT_EQ(normalized("e\xC3\u0301", UnicodeForm::kNfc), "e\xC3\u0301");
  EXPECT_EQ(normalized("\xE9t\xE9", UnicodeForm::kNfd), "\xE9t\xE9");  // Latin-1 bytes, not UTF-8
}

TEST(UnicodeNormalizationTest, StripAccentsIsNfdWithoutNonspacingMarks) {
  auto stripped = [](std::string_view text) {
    auto out = strip_accents(text);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    return out.ok() ? *out : std::string("<error>");
  };
  EXPECT_EQ(stripped("\u00C4pfel C\u1EEDa Vi\u1EC7t"), "Apfel Cua Viet");
  EXPECT_EQ(stripped("\u1E9B\u0323"), "\u017F");
  // Hangul syllables become their jamo, which are letters and stay.
  EXPECT_EQ(stripped("\uD55C"), "\u1112\u1161\u11AB");
  // Spacing combining marks (Mc) stay, in canonical order: COMBINING STEM (class 216) moves before
  // COMBINING AUGMENTATION DOT (226), which only a whole-text NFD does.
  EXPECT_EQ(stripped("a\U0001D16D\U0001D165"), "a\U0001D165\U0001D16D");
  EXPECT_EQ(stripped("x\xFF\u0301y"), "x\xFFy");
}

TEST(UnicodeNormalizationTest, RemoveCombiningMarksDropsEveryMarkCategoryWithoutDecomposing) {
  // Mn (acute), Mc (Devanagari vowel sign AA), Me (enclosing circle) go; precomposed letters stay as they are.
  EXPECT_EQ(remove_combining_marks("e\u0301\u00E9 \u0915\u093E \u0031\u20DD x\xFF\u0301"), "e\u00E9 \u0915 1 x\xFF");
}

TEST(UnicodeNormalizationTest, BertNormalizerStripsAccentsOnTheWholeText) {
  NormalizerStep bert = NormalizerStep::of_kind(NormalizerStep::Kind::kBert);
  auto out = bert_normalize("\u212B\u00C5ngstr\u00F6m A\u030A", bert);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, "aangstrom a");
  bert.lowercase = false;
  bert.strip_accents = false;
  out = bert_normalize("A\u030A", bert);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "A\u030A");  // no accent stripping asked: nothing is decomposed or composed either
}

// A character-level BPE tokenizer.json with byte fallback: a character outside the vocabulary becomes its
// UTF-8 bytes as <0xNN> tokens, so a decomposed "e\u0301" that is not normalized encodes differently.
nlohmann::json small_tokenizer(const nlohmann::json& normalizer) {
  nlohmann::json vocab = nlohmann::json::object();
  int id = 0;
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    vocab[name] = id++;
  }
  for (const char* piece : {"a", "e", "f", "i", "s", "A", "1", " ", "\u00E9", "\u00C5", "\u1EAD", "\uAC01", "\uD55C",
                            "\u30AC", "fi", "\u1E69"}) {
    vocab[piece] = id++;
  }
  return {{"version", "1.0"},
          {"normalizer", normalizer},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", {{"type", "Sequence"}, {"decoders", {{{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}},
          {"model", {{"type", "BPE"}, {"byte_fallback", true}, {"vocab", vocab}, {"merges", {"f i"}}}}};
}

Tokenizer make_tokenizer(const nlohmann::json& normalizer) {
  auto spec = tokenizer_spec_from_hf_json(small_tokenizer(normalizer).dump());
  EXPECT_TRUE(spec.ok()) << spec.status().to_string();
  auto tok = Tokenizer::create(std::move(spec).value());
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return std::move(tok).value();
}

std::vector<int32_t> ids(const Tokenizer& tok, std::string_view text) {
  auto out = tok.encode(text, false);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? *out : std::vector<int32_t>{};
}

TEST(UnicodeNormalizerTokenizerTest, NfcGivesComposedAndDecomposedTextTheSameIds) {
  const Tokenizer none = make_tokenizer(nullptr);
  const Tokenizer nfc = make_tokenizer({{"type", "NFC"}});
  // Without a normalizer the decomposed spelling falls back to bytes; the test would catch NFC not running.
  EXPECT_NE(ids(none, "e\u0301"), ids(none, "\u00E9"));
  for (const auto& [composed, decomposed] : std::vector<std::pair<std::string, std::string>>{
           {"\u00E9", "e\u0301"},
           {"\u00C5", "A\u030A"},
           {"\u00C5", "\u212B"},
           {"\u1EAD", "a\u0302\u0323"},
           {"\uAC01", "\u1100\u1161\u11A8"},
           {"\uD55C a", "\u1112\u1161\u11AB a"},
           {"\u00E9 \u00C5 \uAC01 fi", "e\u0301 A\u030A \u1100\u1161\u11A8 fi"}}) {
    SCOPED_TRACE(decomposed);
    EXPECT_EQ(ids(nfc, decomposed), ids(nfc, composed));
    EXPECT_EQ(ids(nfc, composed), ids(none, composed));
  }
  EXPECT_EQ(ids(nfc, "e\u0301").size(), 1u);
  // NFC leaves compatibility characters alone: the ligature is not in the vocabulary, so bytes.
  EXPECT_EQ(ids(nfc, "\uFB01").size(), 3u);
}

TEST(UnicodeNormalizerTokenizerTest, NfkcFoldsCompatibilityCharacters) {
  const Tokenizer nfkc = make_tokenizer({{"type", "NFKC"}});
  const Tokenizer none = make_tokenizer(nullptr);
  EXPECT_EQ(ids(nfkc, "\uFB01"), ids(none, "fi"));  // the ligature becomes f i, merged to "fi"
  EXPECT_EQ(ids(nfkc, "\u2460"), ids(none, "1"));
  EXPECT_EQ(ids(nfkc, "\uFF76\uFF9E"), ids(none, "\u30AC"));
  EXPECT_EQ(ids(nfkc, "\u1E9B\u0323"), ids(none, "\u1E69"));
  EXPECT_EQ(ids(nfkc, "e\u0301 \u2460"), ids(none, "\u00E9 1"));
}

TEST(UnicodeNormalizerTokenizerTest, DecomposingFormsSplitComposedCharacters) {
  const Tokenizer none = make_tokenizer(nullptr);
  const Tokenizer nfd = make_tokenizer({{"type", "NFD"}});
  const Tokenizer nfkd = make_tokenizer({{"type", "NFKD"}});
  EXPECT_EQ(ids(nfd, "\u00E9"), ids(none, "e\u0301"));
  EXPECT_EQ(ids(nfd, "\u00E9"), ids(nfd, "e\u0301"));
  EXPECT_EQ(ids(nfd, "\uFB01"), ids(none, "\uFB01"));
  EXPECT_EQ(ids(nfkd, "\uFB01\u00E9"), ids(none, "fie\u0301"));
}

TEST(UnicodeNormalizerTokenizerTest, FormsRunInSequenceWithOtherNormalizers) {
  const Tokenizer none = make_tokenizer(nullptr);
  const Tokenizer seq = make_tokenizer(
      {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, {{"type", "Lowercase"}}}}});
  EXPECT_EQ(ids(seq, "\uFF21\u2460 A\u030A"), ids(none, "a1 \u00E5"));
  // NFD then StripAccents: what BertNormalizer's accent stripping does, as separate steps.
  const Tokenizer strip = make_tokenizer(
      {{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "StripAccents"}}}}});
  EXPECT_EQ(ids(strip, "\u00E9 \u00C5 \u1EAD"), ids(none, "e A a"));
  // An unknown form is still an error naming it.
  auto spec = tokenizer_spec_from_hf_json(small_tokenizer({{"type", "NFX"}}).dump());
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().to_string().find("NFX"), std::string::npos) << spec.status().to_string();
}

}  // namespace
}  // namespace qrt::tokenizer_detail
