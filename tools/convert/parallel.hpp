// The writers' work split over threads, and their per-tensor type overrides by name pattern.
#pragma once

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/quant/format_list.hpp"
#include "models/tokenizer/regex.hpp"
#include "qrt/status.hpp"

namespace qrt::convert {

// make(i) for every i in [0, n) on `threads` threads (the caller's one of them), the results in order; after a
// failed result no further item starts (the unstarted ones stay errors). after(i) runs once item i is done.
template <class T, class Make, class After>
std::vector<Result<T>> parallel_results(size_t n, int threads, Make make, After after) {
  std::vector<Result<T>> out(n, Result<T>(internal_error("not run: an earlier item failed")));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&] {
    for (size_t i = next++; i < n && !failed; i = next++) {
      out[i] = make(i);
      if (!out[i].ok()) failed = true;
      after(i);
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < std::max(1, threads); ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

// (regex, type) pairs: a tensor name any part of which a regex matches gets that pair's type; the first match wins.
class TypeOverrides {
 public:
  static Result<TypeOverrides> compile(const std::vector<std::pair<std::string, quant::FormatId>>& pairs) {
    TypeOverrides o;
    for (const auto& [pattern, format] : pairs) {
      auto re = tokenizer_detail::Regex::compile(pattern);
      if (!re.ok()) return re.status().with_context("override pattern '" + pattern + "'");
      o.rules_.emplace_back(std::move(*re), format);
    }
    return o;
  }
  Result<std::optional<quant::FormatId>> match(const std::string& name) const {
    for (const auto& [re, format] : rules_) {
      std::vector<std::pair<size_t, size_t>> found;
      QRT_TRY(re.find_all(name, *scratch_, &found));
      if (!found.empty()) return std::optional<quant::FormatId>(format);
    }
    return std::optional<quant::FormatId>();
  }

 private:
  std::vector<std::pair<tokenizer_detail::Regex, quant::FormatId>> rules_;
  // Match state for one thread (the writers match while planning), held apart so that the object moves.
  std::unique_ptr<tokenizer_detail::RegexScratch> scratch_ = std::make_unique<tokenizer_detail::RegexScratch>();
};

}  // namespace qrt::convert
