#include "models/tokenizer/unicode.hpp"

#include <array>

namespace qrt::tokenizer_detail {

size_t utf8_char_length(std::string_view s, size_t pos) {
  size_t len = 0;
  utf8_decode(s, pos, &len);
  return len;
}

uint32_t utf8_decode(std::string_view s, size_t pos, size_t* length) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  const uint8_t b0 = byte(pos);
  const size_t left = s.size() - pos;
  const auto invalid = [&]() {
    *length = 1;
    return 0xDC00u + b0;
  };
  if (b0 < 0x80) {
    *length = 1;
    return b0;
  }
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return invalid();
  }
  if (left < n) return invalid();
  for (size_t i = 1; i < n; ++i) {
    const uint8_t b = byte(pos + i);
    if ((b & 0xC0) != 0x80) return invalid();
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid();
  *length = n;
  return cp;
}

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t utf8_count(std::string_view s) {
  size_t n = 0;
  for (size_t pos = 0; pos < s.size(); pos += utf8_char_length(s, pos)) ++n;
  return n;
}

namespace {

// GPT-2's table: bytes that are printable Latin-1 ('!'..'~', U+00A1..U+00AC, U+00AE..U+00FF) keep their code
// point; the other 68 bytes take U+0100, U+0101, ... in byte order, so every byte has a visible character.
struct ByteTable {
  std::array<uint32_t, 256> code_point{};
  std::array<std::string, 256> utf8;
  std::array<int16_t, 512> byte_of{};  // code points used are all below U+0144

  ByteTable() {
    const auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
    byte_of.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      code_point[b] = printable(b) ? static_cast<uint32_t>(b) : next++;
      utf8_append(utf8[b], code_point[b]);
      byte_of[code_point[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable table;
  return table;
}

}  // namespace

std::string_view byte_to_unicode(uint8_t byte) { return byte_table().utf8[byte]; }

int unicode_to_byte(uint32_t cp) { return cp < 512 ? byte_table().byte_of[cp] : -1; }

std::string byte_level_encode(std::string_view bytes) {
  const ByteTable& table = byte_table();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += table.utf8[static_cast<uint8_t>(c)];
  return out;
}

bool byte_level_decode(std::string_view text, std::string* out) {
  std::string bytes;
  bytes.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    const int b = unicode_to_byte(utf8_decode(text, pos, &len));
    if (b < 0) return false;
    bytes.push_back(static_cast<char>(b));
    pos += len;
  }
  *out = std::move(bytes);
  return true;
}

int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(text[3]), lo = hex(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

bool is_ascii_space(uint32_t cp) { return cp == ' ' || (cp >= 0x09 && cp <= 0x0D); }

bool is_whitespace(uint32_t cp) {
  if (cp < 0x80) return is_ascii_space(cp);
  switch (cp) {
    case 0x85: case 0xA0: case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

}  // namespace qrt::tokenizer_detail
