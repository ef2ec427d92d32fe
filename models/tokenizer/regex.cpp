#include "models/tokenizer/regex.hpp"

#include <pcre2.h>

#include "models/tokenizer/unicode.hpp"

namespace qrt::tokenizer_detail {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return n < 0 ? "PCRE2 error " + std::to_string(code) : std::string(reinterpret_cast<const char*>(buffer), n);
}

}  // namespace

struct RegexScratch::Impl {
  pcre2_match_data* match_data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;

  Impl() {
    // Only the whole match is read, so one offset pair is enough (PCRE2 then reports rc 0 for patterns with
    // groups, which still means a match).
    match_data = pcre2_match_data_create(1, nullptr);
    context = pcre2_match_context_create(nullptr);
    // Lookaheads over long whitespace runs need more than the 32 KiB default JIT stack.
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~Impl() {
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(match_data);
  }
};

RegexScratch::RegexScratch() : impl_(std::make_unique<Impl>()) {}
RegexScratch::~RegexScratch() = default;

Result<Regex> Regex::compile(std::string_view pattern) {
  int error = 0;
  PCRE2_SIZE error_offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error,
                                   &error_offset, nullptr);
  if (!code) {
    return invalid_argument("tokenizer regex /" + std::string(pattern) + "/ does not compile at offset " +
                            std::to_string(error_offset) + ": " + pcre2_message(error));
  }
  // JIT is an optimisation: where it is unavailable the interpreter runs the same pattern.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  Regex regex;
  regex.pattern_ = std::string(pattern);
  regex.code_ = code;
  return regex;
}

std::string Regex::escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (static_cast<unsigned char>(c) < 0x80 && !alnum && c != ' ') out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

Regex::Regex(Regex&& other) noexcept : pattern_(std::move(other.pattern_)), code_(other.code_) {
  other.code_ = nullptr;
}

Regex& Regex::operator=(Regex&& other) noexcept {
  if (this != &other) {
    pcre2_code_free(static_cast<pcre2_code*>(code_));
    pattern_ = std::move(other.pattern_);
    code_ = other.code_;
    other.code_ = nullptr;
  }
  return *this;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Status Regex::find_all(std::string_view subject, RegexScratch& scratch,
                       std::vector<std::pair<size_t, size_t>>* matches) const {
  RegexScratch::Impl& s = *scratch.impl_;
  if (!s.match_data || !s.context) return internal_error("tokenizer regex: out of memory for match data");
  const auto* code = static_cast<const pcre2_code*>(code_);
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t start = 0;
  while (start <= subject.size()) {
    const int rc = pcre2_match(code, data, subject.size(), start, 0, s.match_data, s.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      return invalid_argument("tokenizer regex /" + pattern_ + "/ failed on a " + std::to_string(subject.size()) +
                              "-byte piece: " + pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(s.match_data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      matches->emplace_back(begin, end);
      start = end;
    } else {
      // Empty match: step over one character so the search always advances.
      if (begin >= subject.size()) break;
      start = begin + utf8_char_length(subject, begin);
    }
  }
  return ok_status();
}

}  // namespace qrt::tokenizer_detail
