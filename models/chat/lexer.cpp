#include "models/chat/lexer.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "models/chat/text.hpp"

namespace qrt::chat {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

constexpr size_t kNoMatch = std::string::npos;

class Lexer {
 public:
  Lexer(std::string source, const LexerOptions& options, const std::string& name)
      : src_(std::move(source)), options_(options), name_(name) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      const Tag tag = find_tag(pos);
      if (tag.start == kNoMatch) {
        emit_data(pos, src_.substr(pos));
        break;
      }
      std::string text = src_.substr(pos, tag.start - pos);
      apply_left_strip(text, tag.sign, tag.kind != TagKind::kVariable, line_starting);
      emit_data(pos, std::move(text));
      line_starting = false;
      pos = tag.start + 2 + (tag.sign ? 1 : 0);
      switch (tag.kind) {
        case TagKind::kComment: {
          QRT_ASSIGN_OR_RETURN(pos, skip_comment(tag.start, pos));
          line_starting = src_[pos - 1] == '\n';
          break;
        }
        case TagKind::kRaw: {
          pos = tag.raw_end;
          line_starting = src_[pos - 1] == '\n';
          QRT_ASSIGN_OR_RETURN(pos, lex_raw_body(tag.start, pos, line_starting));
          line_starting = src_[pos - 1] == '\n';
          break;
        }
        case TagKind::kBlock:
        case TagKind::kVariable: {
          const bool block = tag.kind == TagKind::kBlock;
          push(block ? TokenKind::kBlockBegin : TokenKind::kVariableBegin, tag.start, src_.substr(tag.start, 2));
          QRT_ASSIGN_OR_RETURN(pos, lex_tag(pos, block));
          line_starting = pos > 0 && src_[pos - 1] == '\n';
          break;
        }
      }
    }
    Token eof;
    eof.kind = TokenKind::kEof;
    locate(src_.size(), &eof.line, &eof.column);
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  enum class TagKind { kComment, kBlock, kVariable, kRaw };
  struct Tag {
    size_t start = kNoMatch;
    TagKind kind = TagKind::kBlock;
    char sign = 0;          // '-', '+' or 0
    size_t raw_end = 0;     // for kRaw: just past the {% raw %} tag
  };

  void locate(size_t offset, int* line, int* column) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t index = static_cast<size_t>(it - line_starts_.begin()) - 1;
    *line = static_cast<int>(index + 1);
    *column = static_cast<int>(offset - line_starts_[index] + 1);
  }

  Status error_at(size_t offset, const std::string& message) const {
    int line = 0;
    int column = 0;
    locate(offset, &line, &column);
    return format_error(name_ + ":" + std::to_string(line) + ":" + std::to_string(column) +
                        ": template syntax error: " + message);
  }

  Token& push(TokenKind kind, size_t offset, std::string text) {
    Token t;
    t.kind = kind;
    t.text = std::move(text);
    locate(offset, &t.line, &t.column);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  void emit_data(size_t offset, std::string text) {
    if (!text.empty()) push(TokenKind::kData, offset, std::move(text));
  }

  size_t skip_space(size_t pos) const {
    while (size_t len = text::space_length_at(src_, pos)) pos += len;
    return pos;
  }

  // `{%` at p followed by an optional sign, whitespace, `word`, whitespace: the position after that, or npos.
  size_t match_tag_word(size_t p, std::string_view word, char* sign) const {
    size_t q = p + 2;
    *sign = 0;
    if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) *sign = src_[q++];
    q = skip_space(q);
    if (src_.compare(q, word.size(), word) != 0) return kNoMatch;
    return skip_space(q + word.size());
  }

  Tag find_tag(size_t pos) const {
    Tag tag;
    for (size_t p = src_.find('{', pos); p != std::string::npos && p + 1 < src_.size(); p = src_.find('{', p + 1)) {
      const char c = src_[p + 1];
      if (c != '{' && c != '%' && c != '#') continue;
      tag.start = p;
      tag.sign = (p + 2 < src_.size() && (src_[p + 2] == '-' || src_[p + 2] == '+')) ? src_[p + 2] : 0;
      if (c == '%') {
        char raw_sign = 0;
        const size_t q = match_tag_word(p, "raw", &raw_sign);
        if (q != kNoMatch) {
          if (src_.compare(q, 3, "-%}") == 0) {
            tag.kind = TagKind::kRaw;
            tag.raw_end = skip_space(q + 3);
            return tag;
          }
          if (src_.compare(q, 2, "%}") == 0) {
            tag.kind = TagKind::kRaw;
            tag.raw_end = q + 2;
            return tag;
          }
        }
        tag.kind = TagKind::kBlock;
      } else {
        tag.kind = c == '#' ? TagKind::kComment : TagKind::kVariable;
      }
      return tag;
    }
    return tag;
  }

  // Jinja's OptionalLStrip: `-` strips all whitespace before the tag; otherwise lstrip_blocks removes the spaces
  // between the last newline (or the start of a line) and a block or comment tag.
  void apply_left_strip(std::string& text, char sign, bool lstrip_applies, bool line_starting) const {
    if (sign == '-') {
      text.resize(text::strip_space(text, text::StripSide::kRight).size());
      return;
    }
    if (sign == '+' || !options_.lstrip_blocks || !lstrip_applies) return;
    const size_t newline = text.rfind('\n');
    const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
    if (line_begin == 0 && !line_starting) return;
    if (line_begin == text.size()) return;
    for (size_t i = line_begin; i < text.size();) {
      const size_t len = text::space_length_at(text, i);
      if (len == 0) return;
      i += len;
    }
    text.resize(line_begin);
  }

  // Past the end of a block/comment tag whose closing delimiter starts at `close` (after any sign).
  size_t after_close(size_t close, char sign, size_t delimiter_length, bool trim_applies) const {
    size_t end = close + delimiter_length;
    if (sign == '-') return skip_space(end);
    if (sign == 0 && trim_applies && options_.trim_blocks && end < src_.size() && src_[end] == '\n') ++end;
    return end;
  }

  Result<size_t> skip_comment(size_t tag_start, size_t pos) const {
    const size_t close = src_.find("#}", pos);
    if (close == std::string::npos) return error_at(tag_start, "missing end of comment tag");
    char sign = 0;
    if (close > pos && (src_[close - 1] == '-' || src_[close - 1] == '+')) sign = src_[close - 1];
    return after_close(close, sign, 2, true);
  }

  Result<size_t> lex_raw_body(size_t tag_start, size_t pos, bool line_starting) {
    for (size_t p = src_.find("{%", pos); p != std::string::npos; p = src_.find("{%", p + 1)) {
      char sign = 0;
      const size_t q = match_tag_word(p, "endraw", &sign);
      if (q == kNoMatch) continue;
      size_t end = kNoMatch;
      if (src_.compare(q, 3, "+%}") == 0) {
        end = q + 3;
      } else if (src_.compare(q, 3, "-%}") == 0) {
        end = skip_space(q + 3);
      } else if (src_.compare(q, 2, "%}") == 0) {
        end = after_close(q, 0, 2, true);
      }
      if (end == kNoMatch) continue;
      std::string text = src_.substr(pos, p - pos);
      apply_left_strip(text, sign, true, line_starting);
      emit_data(pos, std::move(text));
      return end;
    }
    return error_at(tag_start, "missing end of raw directive");
  }

  // The end of the tag at pos (when brackets are balanced): the position after it, or npos.
  size_t match_tag_end(size_t pos, bool block) const {
    const char closer = block ? '%' : '}';
    auto at = [&](size_t p, char a, char b) {
      return p + 1 < src_.size() && src_[p] == a && src_[p + 1] == b;
    };
    if (block && src_[pos] == '+' && at(pos + 1, closer, '}')) return pos + 3;
    if (src_[pos] == '-' && at(pos + 1, closer, '}')) return skip_space(pos + 3);
    if (at(pos, closer, '}')) return block ? after_close(pos, 0, 2, true) : pos + 2;
    return kNoMatch;
  }

  // (\d+_)*\d+ : the end of the digit run at pos, or npos.
  size_t match_digits(size_t pos) const {
    if (pos >= src_.size() || !is_digit(src_[pos])) return kNoMatch;
    size_t p = pos;
    while (true) {
      while (p < src_.size() && is_digit(src_[p])) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  size_t match_float(size_t pos) const {
    if (pos > 0 && src_[pos - 1] == '.') return kNoMatch;
    const size_t p = match_digits(pos);
    if (p == kNoMatch) return kNoMatch;
    size_t q = p;
    size_t fraction_end = kNoMatch;
    if (q < src_.size() && src_[q] == '.') fraction_end = match_digits(q + 1);
    if (fraction_end != kNoMatch) q = fraction_end;
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
      const size_t exponent_end = match_digits(r);
      if (exponent_end != kNoMatch) return exponent_end;
    }
    return fraction_end;
  }

  // 0b.., 0o.., 0x.., [1-9](_?\d)*, 0(_?0)*; returns the end and the value, or an error for overflow.
  Result<size_t> match_integer(size_t pos, int64_t* value) const {
    auto digits_in_base = [&](size_t p, int base, size_t* end) -> bool {
      // (_?digit)+
      uint64_t v = 0;
      size_t q = p;
      bool any = false;
      while (q < src_.size()) {
        size_t r = q;
        if (src_[r] == '_') ++r;
        if (r >= src_.size()) break;
        const int d = hex_value(src_[r]);
        if (d < 0 || d >= base) break;
        if (v > (static_cast<uint64_t>(INT64_MAX) - static_cast<uint64_t>(d)) / static_cast<uint64_t>(base)) {
          *end = kNoMatch;
          return true;
        }
        v = v * static_cast<uint64_t>(base) + static_cast<uint64_t>(d);
        q = r + 1;
        any = true;
      }
      *end = any ? q : 0;
      *value = static_cast<int64_t>(v);
      return any;
    };
    size_t end = 0;
    if (src_[pos] == '0' && pos + 1 < src_.size()) {
      const char kind = static_cast<char>(src_[pos + 1] | 0x20);
      const int base = kind == 'b' ? 2 : kind == 'o' ? 8 : kind == 'x' ? 16 : 0;
      if (base != 0 && digits_in_base(pos + 2, base, &end)) {
        if (end == kNoMatch) return error_at(pos, "integer literal too large");
        return end;
      }
    }
    if (src_[pos] == '0') {
      size_t q = pos + 1;
      while (true) {
        size_t r = q;
        if (r < src_.size() && src_[r] == '_') ++r;
        if (r >= src_.size() || src_[r] != '0') break;
        q = r + 1;
      }
      *value = 0;
      return q;
    }
    if (!digits_in_base(pos, 10, &end)) return kNoMatch;
    if (end == kNoMatch) return error_at(pos, "integer literal too large");
    return end;
  }

  // A quoted string at pos, decoded like Python's unicode-escape codec (Jinja's string literal rules).
  Result<size_t> lex_string(size_t pos, std::string* out) const {
    const char quote = src_[pos];
    size_t p = pos + 1;
    while (true) {
      if (p >= src_.size()) return error_at(pos, "unterminated string literal");
      const char c = src_[p];
      if (c == quote) break;
      if (c != '\\') {
        *out += c;
        ++p;
        continue;
      }
      if (p + 1 >= src_.size()) return error_at(pos, "unterminated string literal");
      const char e = src_[p + 1];
      p += 2;
      switch (e) {
        case '\n': break;
        case '\\': *out += '\\'; break;
        case '\'': *out += '\''; break;
        case '"': *out += '"'; break;
        case 'a': *out += '\a'; break;
        case 'b': *out += '\b'; break;
        case 'f': *out += '\f'; break;
        case 'n': *out += '\n'; break;
        case 'r': *out += '\r'; break;
        case 't': *out += '\t'; break;
        case 'v': *out += '\v'; break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t width = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          uint32_t cp = 0;
          for (size_t k = 0; k < width; ++k) {
            const int d = p + k < src_.size() ? hex_value(src_[p + k]) : -1;
            if (d < 0) return error_at(pos, std::string("truncated \\") + e + " escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          p += width;
          if (cp > 0x10FFFF) return error_at(pos, "illegal Unicode character in string literal");
          if (cp >= 0xD800 && cp <= 0xDFFF) return error_at(pos, "surrogate code point in string literal");
          text::append_utf8(*out, cp);
          break;
        }
        case 'N': return error_at(pos, "named Unicode escapes (\\N{...}) are not supported");
        default:
          if (e >= '0' && e <= '7') {
            uint32_t cp = static_cast<uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7'; ++k, ++p) {
              cp = cp * 8 + static_cast<uint32_t>(src_[p] - '0');
            }
            text::append_utf8(*out, cp);
          } else if (static_cast<unsigned char>(e) >= 0x80) {
            // Jinja turns non-ASCII text into \x/\u escapes before decoding, so a backslash in front of one
            // yields the escape's spelling.
            size_t len = 0;
            const uint32_t cp = text::decode_at(src_, p - 1, &len);
            char buf[16];
            std::snprintf(buf, sizeof(buf), cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
            *out += buf;
            p = p - 1 + len;
          } else {
            *out += '\\';
            *out += e;
          }
      }
    }
    return p + 1;
  }

  // Tokens inside {{ }} or {% %} up to and including the closing delimiter; returns the position after it.
  Result<size_t> lex_tag(size_t pos, bool block) {
    std::vector<char> balance;
    while (pos < src_.size()) {
      if (balance.empty()) {
        const size_t end = match_tag_end(pos, block);
        if (end != kNoMatch) {
          push(block ? TokenKind::kBlockEnd : TokenKind::kVariableEnd, pos, block ? "%}" : "}}");
          return end;
        }
      }
      if (size_t len = text::space_length_at(src_, pos)) {
        pos += len;
        continue;
      }
      const char c = src_[pos];
      if (size_t end = match_float(pos); end != kNoMatch) {
        std::string spelling = src_.substr(pos, end - pos);
        spelling.erase(std::remove(spelling.begin(), spelling.end(), '_'), spelling.end());
        double value = 0;
        std::from_chars(spelling.data(), spelling.data() + spelling.size(), value);
        push(TokenKind::kFloat, pos, std::move(spelling)).float_value = value;
        pos = end;
        continue;
      }
      if (is_digit(c)) {
        int64_t value = 0;
        QRT_ASSIGN_OR_RETURN(size_t end, match_integer(pos, &value));
        push(TokenKind::kInteger, pos, src_.substr(pos, end - pos)).int_value = value;
        pos = end;
        continue;
      }
      if (is_name_start(c)) {
        size_t end = pos;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        push(TokenKind::kName, pos, src_.substr(pos, end - pos));
        pos = end;
        continue;
      }
      if (c == '\'' || c == '"') {
        std::string value;
        QRT_ASSIGN_OR_RETURN(size_t end, lex_string(pos, &value));
        push(TokenKind::kString, pos, std::move(value));
        pos = end;
        continue;
      }
      static const char* kTwoCharOperators[] = {"//", "**", "==", "!=", ">=", "<="};
      std::string op;
      for (const char* two : kTwoCharOperators) {
        if (src_.compare(pos, 2, two) == 0) op = two;
      }
      if (op.empty() && std::string_view("+-/*%~[](){}><=.:|,;").find(c) != std::string_view::npos) op = c;
      if (op.empty()) {
        size_t len = 0;
        text::decode_at(src_, pos, &len);
        return error_at(pos, "unexpected char '" + src_.substr(pos, len) + "'");
      }
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (balance.empty()) return error_at(pos, "unexpected '" + op + "'");
        if (balance.back() != op[0]) {
          return error_at(pos, "unexpected '" + op + "', expected '" + std::string(1, balance.back()) + "'");
        }
        balance.pop_back();
      }
      push(TokenKind::kOperator, pos, op);
      pos += op.size();
    }
    return pos;  // end of input inside a tag: the parser reports it
  }

  std::string src_;
  LexerOptions options_;
  const std::string& name_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source, const LexerOptions& options,
                                    const std::string& template_name) {
  if (!text::is_valid_utf8(source)) return format_error(template_name + ": template source is not valid UTF-8");
  // Jinja normalizes \r\n and \r to \n and drops one trailing newline.
  std::string normalized;
  normalized.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      normalized += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      normalized += source[i];
    }
  }
  if (!options.keep_trailing_newline && !normalized.empty() && normalized.back() == '\n') normalized.pop_back();
  Lexer lexer(std::move(normalized), options, template_name);
  return lexer.run();
}

}  // namespace qrt::chat
