// UTF-8 helpers and the GPT-2 byte table, checked against independent definitions.
#include <gtest/gtest.h>

#include <set>

#include "models/tokenizer/unicode.hpp"
#include "test_support.hpp"

namespace qrt::tokenizer_detail {
namespace {

TEST(TokenizerUnicodeTest, DecodesWellFormedUtf8) {
  const std::string text = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99";  // a é € 🦙
  size_t len = 0;
  EXPECT_EQ(utf8_decode(text, 0, &len), 0x61u);
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(utf8_decode(text, 1, &len), 0xE9u);
  EXPECT_EQ(len, 2u);
  EXPECT_EQ(utf8_decode(text, 3, &len), 0x20ACu);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(utf8_decode(text, 6, &len), 0x1F999u);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(utf8_count(text), 4u);
}

TEST(TokenizerUnicodeTest, IllFormedBytesAdvanceOneAtATime) {
  // Overlong '/', a surrogate, a truncated sequence, a lone continuation byte, a value past U+10FFFF.
  for (const std::string bad : {"\xC0\xAF", "\xED\xA0\x80", "\xE2\x82", "\x80", "\xF4\x90\x80\x80"}) {
    size_t len = 0;
    const uint32_t cp = utf8_decode(bad, 0, &len);
    EXPECT_EQ(len, 1u) << testing::PrintToString(bad);
    EXPECT_EQ(cp, 0xDC00u + static_cast<uint8_t>(bad[0]));
    EXPECT_EQ(utf8_count(bad), bad.size());
  }
}

TEST(TokenizerUnicodeTest, AppendInvertsDecodeForEveryScalarValue) {
  for (uint32_t cp = 0; cp <= 0x10FFFF; cp += (cp < 0x3000 ? 1 : 97)) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    utf8_append(s, cp);
    size_t len = 0;
    ASSERT_EQ(utf8_decode(s, 0, &len), cp);
    ASSERT_EQ(len, s.size());
  }
}

TEST(TokenizerUnicodeTest, ByteTableIsGpt2s) {
  // GPT-2's definition: printable Latin-1 bytes keep their code point, the other 68 bytes take 256, 257, ...
  std::set<uint32_t> seen;
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const uint32_t expected = printable ? static_cast<uint32_t>(b) : next++;
    const std::string_view mapped = byte_to_unicode(static_cast<uint8_t>(b));
    size_t len = 0;
    EXPECT_EQ(utf8_decode(mapped, 0, &len), expected) << b;
    EXPECT_EQ(len, mapped.size());
    EXPECT_EQ(unicode_to_byte(expected), b);
    seen.insert(expected);
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");  // 'Ġ'
  EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // 'Ċ'
  EXPECT_EQ(unicode_to_byte('A' + 0x10000), -1);
}

TEST(TokenizerUnicodeTest, ByteLevelRoundTripsRandomBytes) {
  const auto bytes = test::random_bytes(4096, 0x7e57);
  const std::string raw(bytes.begin(), bytes.end());
  std::string back;
  ASSERT_TRUE(byte_level_decode(byte_level_encode(raw), &back));
  EXPECT_EQ(back, raw);
  EXPECT_FALSE(byte_level_decode(" not mapped", &back));  // U+0020 is not in the table
}

TEST(TokenizerUnicodeTest, ParsesByteTokens) {
  EXPECT_EQ(parse_byte_token("<0x0A>"), 10);
  EXPECT_EQ(parse_byte_token("<0xff>"), 255);
  EXPECT_EQ(parse_byte_token("<0xG0>"), -1);
  EXPECT_EQ(parse_byte_token("<0x0A"), -1);
  EXPECT_EQ(parse_byte_token("0x0A"), -1);
}

}  // namespace
}  // namespace qrt::tokenizer_detail
