#include "models/chat/text.hpp"

#include <algorithm>

namespace qrt::chat::text {

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

uint32_t decode_at(std::string_view s, size_t pos, size_t* len) {
  const auto c = static_cast<unsigned char>(s[pos]);
  size_t l = 1;
  uint32_t cp = c;
  if (c >= 0xF0) {
    l = 4;
    cp = c & 0x07;
  } else if (c >= 0xE0) {
    l = 3;
    cp = c & 0x0F;
  } else if (c >= 0xC0) {
    l = 2;
    cp = c & 0x1F;
  }
  if (pos + l > s.size()) l = 1;  // cannot happen on valid input; stay in bounds regardless
  for (size_t k = 1; k < l; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[pos + k]) & 0x3F);
  if (len) *len = l;
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_python_space(uint32_t cp) {
  if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

size_t space_length_at(std::string_view s, size_t pos) {
  if (pos >= s.size()) return 0;
  const auto c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) return is_python_space(c) ? 1 : 0;
  size_t len = 0;
  const uint32_t cp = decode_at(s, pos, &len);
  return is_python_space(cp) ? len : 0;
}

size_t codepoint_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<size_t> codepoint_offsets(std::string_view s) {
  std::vector<size_t> offsets;
  offsets.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) offsets.push_back(i);
  }
  offsets.push_back(s.size());
  return offsets;
}

std::vector<std::string> codepoints(std::string_view s) {
  std::vector<std::string> out;
  const auto offsets = codepoint_offsets(s);
  out.reserve(offsets.size() - 1);
  for (size_t k = 0; k + 1 < offsets.size(); ++k) out.emplace_back(s.substr(offsets[k], offsets[k + 1] - offsets[k]));
  return out;
}

namespace {

// Start of the code point that ends just before byte `end`.
size_t previous_start(std::string_view s, size_t end) {
  size_t p = end - 1;
  while (p > 0 && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
  return p;
}

template <class IsMember>
std::string_view strip_if(std::string_view s, StripSide side, IsMember is_member) {
  size_t begin = 0;
  size_t end = s.size();
  if (side != StripSide::kRight) {
    while (begin < end) {
      size_t len = 0;
      const uint32_t cp = decode_at(s, begin, &len);
      if (!is_member(cp)) break;
      begin += len;
    }
  }
  if (side != StripSide::kLeft) {
    while (end > begin) {
      const size_t p = previous_start(s, end);
      if (!is_member(decode_at(s, p, nullptr))) break;
      end = p;
    }
  }
  return s.substr(begin, end - begin);
}

}  // namespace

std::string_view strip_space(std::string_view s, StripSide side) {
  return strip_if(s, side, [](uint32_t cp) { return is_python_space(cp); });
}

std::string_view strip_chars(std::string_view s, std::string_view chars, StripSide side) {
  std::vector<uint32_t> set;
  for (size_t i = 0; i < chars.size();) {
    size_t len = 0;
    set.push_back(decode_at(chars, i, &len));
    i += len;
  }
  return strip_if(s, side, [&](uint32_t cp) { return std::find(set.begin(), set.end(), cp) != set.end(); });
}

std::vector<std::string> split_space(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t i = 0;
  const size_t n = s.size();
  while (true) {
    while (i < n) {
      const size_t sl = space_length_at(s, i);
      if (sl == 0) break;
      i += sl;
    }
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
      // The remainder keeps its trailing whitespace, as in Python.
      parts.emplace_back(s.substr(i));
      break;
    }
    size_t j = i;
    while (j < n && space_length_at(s, j) == 0) {
      size_t len = 0;
      decode_at(s, j, &len);
      j += len;
    }
    parts.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return parts;
}

std::vector<std::string> rsplit_space(std::string_view s, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t end = s.size();
  while (true) {
    while (end > 0) {
      const size_t p = previous_start(s, end);
      if (!is_python_space(decode_at(s, p, nullptr))) break;
      end = p;
    }
    if (end == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) >= maxsplit) {
      parts.emplace_back(s.substr(0, end));
      break;
    }
    size_t begin = end;
    while (begin > 0) {
      const size_t p = previous_start(s, begin);
      if (is_python_space(decode_at(s, p, nullptr))) break;
      begin = p;
    }
    parts.emplace_back(s.substr(begin, end - begin));
    end = begin;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> split_sep(std::string_view s, std::string_view sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t hit = s.find(sep, start);
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(start, hit - start));
    start = hit + sep.size();
  }
  parts.emplace_back(s.substr(start));
  return parts;
}

std::vector<std::string> rsplit_sep(std::string_view s, std::string_view sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t hit = s.rfind(sep, end - sep.size());
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(hit + sep.size(), end - hit - sep.size()));
    end = hit;
  }
  parts.emplace_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> lines;
  size_t start = 0;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    size_t len = 0;
    const uint32_t cp = decode_at(s, i, &len);
    const bool boundary = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
                          cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!boundary) {
      i += len;
      continue;
    }
    size_t eol = i + len;
    if (cp == '\r' && eol < n && s[eol] == '\n') ++eol;
    lines.emplace_back(s.substr(start, (keepends ? eol : i) - start));
    start = i = eol;
  }
  if (start < n) lines.emplace_back(s.substr(start));
  return lines;
}

std::string replace(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count) {
  std::string out;
  int64_t done = 0;
  if (old_text.empty()) {
    // Python inserts the replacement before every code point and at the end.
    const auto offsets = codepoint_offsets(s);
    for (size_t k = 0; k + 1 < offsets.size(); ++k) {
      if (count < 0 || done < count) {
        out += new_text;
        ++done;
      }
      out += s.substr(offsets[k], offsets[k + 1] - offsets[k]);
    }
    if (count < 0 || done < count) out += new_text;
    return out;
  }
  size_t start = 0;
  while (count < 0 || done < count) {
    const size_t hit = s.find(old_text, start);
    if (hit == std::string_view::npos) break;
    out += s.substr(start, hit - start);
    out += new_text;
    start = hit + old_text.size();
    ++done;
  }
  out += s.substr(start);
  return out;
}

size_t replaced_size(std::string_view s, std::string_view old_text, std::string_view new_text, int64_t count_limit) {
  size_t hits = count(s, old_text);
  if (count_limit >= 0) hits = std::min(hits, static_cast<size_t>(count_limit));
  return s.size() - hits * old_text.size() + hits * new_text.size();
}

size_t count(std::string_view s, std::string_view needle) {
  if (needle.empty()) return codepoint_count(s) + 1;
  size_t n = 0;
  for (size_t pos = s.find(needle); pos != std::string_view::npos; pos = s.find(needle, pos + needle.size())) ++n;
  return n;
}

uint32_t upper_codepoint(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 0x20 : cp;
  if (cp >= 0xE0 && cp <= 0xFE && cp != 0xF7) return cp - 0x20;
  if (cp == 0xFF) return 0x178;
  if (cp == 0xB5) return 0x39C;
  if (cp >= 0x100 && cp <= 0x17F) {
    if (cp == 0x131) return 'I';
    if (cp == 0x17F) return 'S';
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return (cp % 2 == 0) ? cp - 1 : cp;
    if (cp == 0x130 || cp == 0x138 || cp == 0x149 || cp == 0x178) return cp;
    return (cp % 2 == 1) ? cp - 1 : cp;
  }
  if (cp >= 0x3B1 && cp <= 0x3CB && cp != 0x3C2) return cp - 0x20;
  if (cp == 0x3C2) return 0x3A3;
  if (cp == 0x3AC) return 0x386;
  if (cp >= 0x3AD && cp <= 0x3AF) return cp - 0x25;
  if (cp == 0x3CC) return 0x38C;
  if (cp == 0x3CD || cp == 0x3CE) return cp - 0x3F;
  if (cp >= 0x430 && cp <= 0x44F) return cp - 0x20;
  if (cp >= 0x450 && cp <= 0x45F) return cp - 0x50;
  return cp;
}

uint32_t lower_codepoint(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 0x20 : cp;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 0x20;
  if (cp == 0x178) return 0xFF;
  if (cp >= 0x100 && cp <= 0x17F) {
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E)) return (cp % 2 == 1) ? cp + 1 : cp;
    if (cp == 0x130 || cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17F) return cp;
    return (cp % 2 == 0) ? cp + 1 : cp;
  }
  if (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2) return cp + 0x20;
  if (cp == 0x386) return 0x3AC;
  if (cp >= 0x388 && cp <= 0x38A) return cp + 0x25;
  if (cp == 0x38C) return 0x3CC;
  if (cp == 0x38E || cp == 0x38F) return cp + 0x3F;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 0x20;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 0x50;
  return cp;
}

bool is_cased(uint32_t cp) {
  return upper_codepoint(cp) != cp || lower_codepoint(cp) != cp || cp == 0xDF || cp == 0x138 || cp == 0x149 ||
         cp == 0x130;
}

namespace {

template <class Map>
std::string map_codepoints(std::string_view s, Map map) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const uint32_t cp = decode_at(s, i, &len);
    map(cp, out);
    i += len;
  }
  return out;
}

void append_upper(uint32_t cp, std::string& out) {
  if (cp == 0xDF) {
    out += "SS";
  } else {
    append_utf8(out, upper_codepoint(cp));
  }
}

}  // namespace

std::string upper(std::string_view s) { return map_codepoints(s, append_upper); }

std::string lower(std::string_view s) {
  return map_codepoints(s, [](uint32_t cp, std::string& out) { append_utf8(out, lower_codepoint(cp)); });
}

std::string title(std::string_view s) {
  bool previous_cased = false;
  return map_codepoints(s, [&](uint32_t cp, std::string& out) {
    const bool cased = is_cased(cp);
    if (!cased) {
      append_utf8(out, cp);
    } else if (previous_cased) {
      append_utf8(out, lower_codepoint(cp));
    } else if (cp == 0xDF) {
      out += "Ss";  // title case of ß
    } else {
      append_utf8(out, upper_codepoint(cp));
    }
    previous_cased = cased;
  });
}

std::string capitalize(std::string_view s) {
  bool first = true;
  return map_codepoints(s, [&](uint32_t cp, std::string& out) {
    if (first && cp == 0xDF) {
      out += "Ss";
    } else {
      append_utf8(out, first ? upper_codepoint(cp) : lower_codepoint(cp));
    }
    first = false;
  });
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace qrt::chat::text
