#include "runtime/src/logprobs.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace qrt::api_detail {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top) {
  const auto value = [&](size_t i) {
    const float v = logits[i];
    return std::isnan(v) ? -std::numeric_limits<double>::infinity() : static_cast<double>(v);
  };
  double max = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) max = std::max(max, value(i));
  double sum = 0.0;
  if (std::isfinite(max))
    for (size_t i = 0; i < logits.size(); ++i) sum += std::exp(value(i) - max);
  const double log_norm = std::isfinite(max) ? max + std::log(sum) : 0.0;
  const auto logprob = [&](size_t i) { return static_cast<float>(value(i) - log_norm); };

  TokenLogprobs out;
  out.token = token;
  out.logprob = token >= 0 && static_cast<size_t>(token) < logits.size() ? logprob(static_cast<size_t>(token))
                                                                          : -std::numeric_limits<float>::infinity();
  const size_t n = std::min(logits.size(), static_cast<size_t>(std::max(top, 0)));
  if (n == 0) return out;
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
    const double va = value(static_cast<size_t>(a)), vb = value(static_cast<size_t>(b));
    return va > vb || (va == vb && a < b);
  });
  out.top.reserve(n);
  for (size_t k = 0; k < n; ++k) out.top.emplace_back(ids[k], logprob(static_cast<size_t>(ids[k])));
  return out;
}

}  // namespace qrt::api_detail
