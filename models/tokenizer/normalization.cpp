// Unicode normalization forms (UAX #15) and mark removal through utf8proc: the HF NFC / NFD / NFKC / NFKD and
// StripAccents normalizers, and BERT's accent stripping.
#include <utf8proc.h>

#include <algorithm>
#include <vector>

#include "models/tokenizer/unicode.hpp"

namespace qrt::tokenizer_detail {

namespace {

bool is_compatibility(UnicodeForm form) { return form == UnicodeForm::kNfkc || form == UnicodeForm::kNfkd; }
bool is_composing(UnicodeForm form) { return form == UnicodeForm::kNfc || form == UnicodeForm::kNfkc; }

const char* form_name(UnicodeForm form) {
  switch (form) {
    case UnicodeForm::kNfc: return "NFC";
    case UnicodeForm::kNfd: return "NFD";
    case UnicodeForm::kNfkc: return "NFKC";
    case UnicodeForm::kNfkd: return "NFKD";
  }
  return "?";
}

int combining_class(utf8proc_int32_t cp) { return utf8proc_get_property(cp)->combining_class; }

// Appends the normalization of `run` (well-formed UTF-8) to out. utf8proc_map would do it in one call, but its
// canonical reordering is an exchange sort, quadratic in the length of a run of combining marks (64 KB of
// alternating marks take seconds): here utf8proc decomposes and composes, and the reordering is a stable sort.
Status append_normalized(std::string_view run, UnicodeForm form, std::string& out) {
  if (run.empty()) return ok_status();
  const auto failed = [&](utf8proc_ssize_t code) {
    return internal_error(std::string("Unicode ") + form_name(form) + " normalization of " +
                          std::to_string(run.size()) + " bytes failed: " + utf8proc_errmsg(code));
  };
  // 1. Each code point's full canonical (or compatibility) decomposition. Hangul syllables decompose into jamo.
  const auto decompose = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE |
                                                        (is_compatibility(form) ? UTF8PROC_COMPAT : 0));
  std::vector<utf8proc_int32_t> code_points;
  code_points.reserve(run.size() + 1);
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(run.data());
  for (size_t pos = 0; pos < run.size();) {
    utf8proc_int32_t cp = -1;
    const utf8proc_ssize_t length =
        utf8proc_iterate(bytes + pos, static_cast<utf8proc_ssize_t>(run.size() - pos), &cp);
    if (length <= 0 || cp < 0) return failed(length < 0 ? length : UTF8PROC_ERROR_INVALIDUTF8);
    pos += static_cast<size_t>(length);
    // The longest decomposition in Unicode is 18 code points (U+FDFA, compatibility).
    utf8proc_int32_t parts[32];
    int boundclass = 0;
    const utf8proc_ssize_t n = utf8proc_decompose_char(cp, parts, 32, decompose, &boundclass);
    if (n < 0) return failed(n);
    if (n > 32) return failed(UTF8PROC_ERROR_OVERFLOW);
    code_points.insert(code_points.end(), parts, parts + n);
  }
  // 2. Canonical ordering: each run of non-starters sorted by combining class, equal classes keeping their order.
  for (size_t begin = 0; begin < code_points.size();) {
    if (combining_class(code_points[begin]) == 0) {
      ++begin;
      continue;
    }
    size_t end = begin + 1;
    while (end < code_points.size() && combining_class(code_points[end]) != 0) ++end;
    if (end - begin > 1) {
      std::stable_sort(code_points.begin() + static_cast<std::ptrdiff_t>(begin),
                       code_points.begin() + static_cast<std::ptrdiff_t>(end),
                       [](utf8proc_int32_t a, utf8proc_int32_t b) { return combining_class(a) < combining_class(b); });
    }
    begin = end;
  }
  // 3. Canonical composition (NFC, NFKC), and UTF-8 written over the buffer, which needs one spare element.
  const auto compose = static_cast<utf8proc_option_t>(UTF8PROC_STABLE | (is_composing(form) ? UTF8PROC_COMPOSE : 0));
  const auto count = static_cast<utf8proc_ssize_t>(code_points.size());
  code_points.push_back(0);
  const utf8proc_ssize_t length = utf8proc_reencode(code_points.data(), count, compose);
  if (length < 0) return failed(length);
  out.append(reinterpret_cast<const char*>(code_points.data()), static_cast<size_t>(length));
  return ok_status();
}

// True when every code point of `text` is its own normalization in `form`: ASCII always is, and below U+0300
// (where the combining marks start) nothing composes or decomposes canonically.
bool trivially_normalized(std::string_view text, UnicodeForm form) {
  const bool compatibility = form == UnicodeForm::kNfkc || form == UnicodeForm::kNfkd;
  const bool decomposing = form == UnicodeForm::kNfd || form == UnicodeForm::kNfkd;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    const auto byte = static_cast<uint8_t>(text[pos]);
    if (byte < 0x80) continue;
    // Latin-1 letters with accents decompose, and compatibility forms map some Latin-1 symbols (U+00A0, ½):
    // only the canonical composition of text below U+0300 is the identity.
    if (compatibility || decomposing) return false;
    size_t length = 0;
    if (utf8_decode(text, pos, &length) >= 0x300) return false;
    pos += length - 1;
  }
  return true;
}

}  // namespace

Result<std::string> unicode_normalize(std::string_view text, UnicodeForm form) {
  if (trivially_normalized(text, form)) return std::string(text);
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  // Normalize each maximal well-formed run; ill-formed bytes (decoded as 0xDC00 + byte) are copied through.
  size_t run_begin = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 0;
    const uint32_t cp = utf8_decode(text, pos, &length);
    if (length == 1 && cp >= 0xDC80 && cp <= 0xDCFF) {
      QRT_TRY(append_normalized(text.substr(run_begin, pos - run_begin), form, out));
      out.push_back(text[pos]);
      run_begin = pos + 1;
    }
    pos += length;
  }
  QRT_TRY(append_normalized(text.substr(run_begin), form, out));
  return out;
}

namespace {

// `text` without the code points `drop` selects by general category; ill-formed bytes are kept.
template <class Drop>
std::string without_categories(std::string_view text, Drop drop) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 0;
    const uint32_t cp = utf8_decode(text, pos, &length);
    const bool ill_formed = length == 1 && cp >= 0xDC80 && cp <= 0xDCFF;
    if (ill_formed || !drop(utf8proc_category(static_cast<utf8proc_int32_t>(cp)))) out.append(text, pos, length);
    pos += length;
  }
  return out;
}

}  // namespace

Result<std::string> strip_accents(std::string_view text) {
  QRT_ASSIGN_OR_RETURN(std::string decomposed, unicode_normalize(text, UnicodeForm::kNfd));
  return without_categories(decomposed, [](utf8proc_category_t c) { return c == UTF8PROC_CATEGORY_MN; });
}

std::string remove_combining_marks(std::string_view text) {
  return without_categories(text, [](utf8proc_category_t c) {
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
  });
}

}  // namespace qrt::tokenizer_detail
