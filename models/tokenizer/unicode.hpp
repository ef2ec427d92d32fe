// UTF-8 helpers, Unicode normalization forms, and the GPT-2 byte <-> unicode table used by byte-level BPE
// vocabularies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "models/tokenizer/tokenizer_spec.hpp"
#include "qrt/status.hpp"

namespace qrt::tokenizer_detail {

// Length of the UTF-8 character starting at s[pos]: 1..4 for a well-formed sequence, 1 for a byte that does
// not start one (so invalid input still advances byte by byte). pos must be < s.size().
size_t utf8_char_length(std::string_view s, size_t pos);

// The code point at s[pos] (with *length set as utf8_char_length does); an ill-formed byte gives
// 0xDC00 + byte, a value no well-formed sequence yields.
uint32_t utf8_decode(std::string_view s, size_t pos, size_t* length);

void utf8_append(std::string& out, uint32_t code_point);

// Number of UTF-8 characters (ill-formed bytes count one each).
size_t utf8_count(std::string_view s);

// GPT-2's byte-level table: every byte has a printable code point (printable Latin-1 bytes map to themselves,
// the others to U+0100 and up). byte_to_unicode gives its UTF-8 encoding.
std::string_view byte_to_unicode(uint8_t byte);
// The byte a code point stands for, or -1 when it is not in the table.
int unicode_to_byte(uint32_t code_point);
// Maps every byte of `bytes` through the table.
std::string byte_level_encode(std::string_view bytes);
// The bytes a byte-level string stands for; false (out untouched) when some character is not in the table.
bool byte_level_decode(std::string_view text, std::string* out);

// "<0xNN>" -> NN, else -1.
int parse_byte_token(std::string_view text);

// `text` in Unicode normalization form `form` (utf8proc). Ill-formed bytes stay as they are; the well-formed
// runs between them are normalized separately.
Result<std::string> unicode_normalize(std::string_view text, UnicodeForm form);

// NFD with the nonspacing marks (general category Mn) removed: BERT's accent stripping.
Result<std::string> strip_accents(std::string_view text);

// `text` without its combining marks (general categories Mn, Mc, Me), nothing decomposed: HF StripAccents.
std::string remove_combining_marks(std::string_view text);

bool is_ascii_space(uint32_t cp);
// Unicode White_Space.
bool is_whitespace(uint32_t cp);

}  // namespace qrt::tokenizer_detail
