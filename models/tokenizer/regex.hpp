// PCRE2 regexes for pre-tokenizer splits and normalizer replacements: UTF mode with Unicode properties (\p{L},
// \s, \w follow Unicode), invalid UTF-8 in the subject tolerated (it simply never matches), `$` only at the
// very end, and JIT compilation where the library has it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "qrt/status.hpp"

namespace qrt::tokenizer_detail {

class Regex;

// Per-call match state (PCRE2 match data and JIT stack). Not shared between threads; one per encode call.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

 private:
  friend class Regex;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Regex {
 public:
  static Result<Regex> compile(std::string_view pattern);
  // A pattern matching `text` literally.
  static std::string escape(std::string_view text);

  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;
  ~Regex();

  const std::string& pattern() const { return pattern_; }

  // Appends the [begin, end) byte ranges of the successive non-overlapping matches in `subject`. An empty
  // match is skipped and the search moves on by one character.
  Status find_all(std::string_view subject, RegexScratch& scratch,
                  std::vector<std::pair<size_t, size_t>>* matches) const;

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace qrt::tokenizer_detail
