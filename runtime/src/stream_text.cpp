#include "runtime/src/stream_text.hpp"

#include <algorithm>

namespace qrt {

StreamText::StreamText(std::vector<std::string> stops) {
  for (std::string& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

size_t complete_utf8_prefix(std::string_view text) {
  // Look back at most 3 bytes for the lead byte of the last character.
  const size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto byte = static_cast<unsigned char>(text[n - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: keep looking for its lead
    size_t needed = 1;
    if ((byte & 0xE0) == 0xC0) needed = 2;
    else if ((byte & 0xF0) == 0xE0) needed = 3;
    else if ((byte & 0xF8) == 0xF0) needed = 4;
    return needed > back ? n - back : n;
  }
  return n;
}

std::string StreamText::push(std::string_view piece) {
  if (stopped_) return {};
  pending_.append(piece);
  // A whole stop string inside the pending text: hand out what precedes the earliest one and stop.
  size_t match = std::string::npos;
  for (const std::string& stop : stops_) match = std::min(match, pending_.find(stop));
  if (match != std::string::npos) {
    std::string out = pending_.substr(0, match);
    pending_.clear();
    stopped_ = true;
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string: everything before it can never
  // become part of a match (a match starting earlier would have to be found above or be such a prefix).
  size_t keep_from = pending_.size();
  for (const std::string& stop : stops_) {
    const size_t longest = std::min(stop.size() - 1, pending_.size());
    for (size_t len = longest; len > 0; --len) {
      const size_t start = pending_.size() - len;
      if (start >= keep_from) break;
      if (std::string_view(pending_).substr(start) == std::string_view(stop).substr(0, len)) {
        keep_from = start;
        break;
      }
    }
  }
  keep_from = std::min(keep_from, complete_utf8_prefix(pending_));
  std::string out = pending_.substr(0, keep_from);
  pending_.erase(0, keep_from);
  return out;
}

std::string StreamText::flush() {
  std::string out;
  if (!stopped_) out.swap(pending_);
  pending_.clear();
  return out;
}

}  // namespace qrt
