// UTF-8 text helpers with Python's string semantics, for the chat template engine. Jinja templates run on Python
// strings, so lengths, indices and slices count code points, and strip/split use Python's idea of whitespace.
// Every string inside the engine is valid UTF-8 (checked where strings enter), which these helpers rely on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qrt::chat::text {

// Whether `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Decodes the code point starting at s[pos] (s must be valid UTF-8); *len receives its byte length.
uint32_t decode_at(std::string_view s, size_t pos, size_t* len);
void append_utf8(std::string& out, uint32_t cp);

// Python's str.isspace() for one code point.
bool is_python_space(uint32_t cp);
// Byte length of the whitespace code point at s[pos], or 0 when s[pos] does not start one.
size_t space_length_at(std::string_view s, size_t pos);

// Number of code points (Python's len()).
size_t codepoint_count(std::string_view s);
// Byte offset of every code point plus s.size() at the end (size codepoint_count + 1).
std::vector<size_t> codepoint_offsets(std::string_view s);
// The code points of s as separate strings (iterating a Python string).
std::vector<std::string> codepoints(std::string_view s);

enum class StripSide { kBoth, kLeft, kRight };
// str.strip() / lstrip() / rstrip() with no argument: Python whitespace.
std::string_view strip_space(std::string_view s, StripSide side);
// str.strip(chars): any code point in `chars`.
std::string_view strip_chars(std::string_view s, std::string_view chars, StripSide side);

// str.split() with no separator (runs of whitespace, no empty parts); maxsplit < 0 means no limit.
std::vector<std::string> split_space(std::string_view s, int64_t maxsplit);
// str.split(sep) and str.rsplit(sep); sep must not be empty.
std::vector<std::string> split_sep(std::string_view s, std::string_view sep, int64_t maxsplit);
std::vector<std::string> rsplit_sep(std::string_view s, std::string_view sep, int64_t maxsplit);
std::vector<std::string> rsplit_space(std::string_view s, int64_t maxsplit);
// str.splitlines(keepends): every Python line boundary (\n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, U+2028/9).
std::vector<std::string> splitlines(std::string_view s, bool keepends);

// str.replace(old, new, count); count < 0 replaces all. An empty `old` inserts between code points.
std::string replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count);
// The size in bytes str.replace would produce, computed without building it.
size_t replaced_size(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count);
// Number of non-overlapping occurrences (str.count); an empty needle counts code points + 1.
size_t count(std::string_view s, std::string_view needle);

// Case mapping. Python maps all of Unicode; these cover ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic
// (with ß -> SS) and leave other code points unchanged.
uint32_t upper_codepoint(uint32_t cp);
uint32_t lower_codepoint(uint32_t cp);
// Whether cp is a cased letter (has an upper- or lower-case form) in the ranges above.
bool is_cased(uint32_t cp);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
// str.title(): a cased letter that follows an uncased character is upper-cased, others lower-cased.
std::string title(std::string_view s);
// str.capitalize(): first code point upper-cased, the rest lower-cased.
std::string capitalize(std::string_view s);

// markupsafe.escape: & < > " ' become &amp; &lt; &gt; &#34; &#39;.
std::string html_escape(std::string_view s);

}  // namespace qrt::chat::text
