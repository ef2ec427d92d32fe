// The text stages before the model: added-token splitting, normalizers and pre-tokenizers, with the
// semantics of the HF `tokenizers` components they mirror.
#include <algorithm>

#include "models/tokenizer/tokenizer_state.hpp"
#include "models/tokenizer/unicode.hpp"

namespace qrt::tokenizer_detail {

const char* gpt2_split_pattern() {
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
}

Status compile_pipeline(TokenizerState& state) {
  const std::string& source = state.spec.source;
  for (const NormalizerStep& step : state.spec.normalizer) {
    CompiledNormalizerStep compiled{step, std::nullopt};
    if (step.kind == NormalizerStep::Kind::kReplace) {
      if (step.pattern.empty()) return invalid_argument(source + ": a Replace normalizer has an empty pattern");
      auto regex = Regex::compile(step.pattern);
      if (!regex.ok()) return regex.status().with_context(source + ": normalizer");
      compiled.regex.emplace(std::move(regex).value());
    }
    state.normalizer.push_back(std::move(compiled));
  }
  for (const PreTokenizerStep& step : state.spec.pre_tokenizer) {
    CompiledPreTokenizerStep compiled{step, std::nullopt};
    std::string pattern;
    switch (step.kind) {
      case PreTokenizerStep::Kind::kSplit:
        if (step.pattern.empty()) return invalid_argument(source + ": a Split pre-tokenizer has an empty pattern");
        pattern = step.pattern;
        break;
      case PreTokenizerStep::Kind::kByteLevel:
        if (step.use_regex) pattern = gpt2_split_pattern();
        break;
      case PreTokenizerStep::Kind::kDigits:
        pattern = step.individual_digits ? "\\p{N}" : "\\p{N}+";
        break;
      case PreTokenizerStep::Kind::kMetaspace:
        if (step.replacement.empty()) return invalid_argument(source + ": a Metaspace pre-tokenizer has no replacement");
        if (step.split) pattern = Regex::escape(step.replacement);
        break;
      case PreTokenizerStep::Kind::kWhitespaceSplit:
        pattern = "\\s+";
        break;
      case PreTokenizerStep::Kind::kBert:
        break;
    }
    if (!pattern.empty()) {
      auto regex = Regex::compile(pattern);
      if (!regex.ok()) return regex.status().with_context(source + ": pre-tokenizer");
      compiled.regex.emplace(std::move(regex).value());
    }
    state.pre_tokenizer.push_back(std::move(compiled));
  }
  return ok_status();
}

// ---- Added tokens -------------------------------------------------------------------------------------------

namespace {

bool is_word_character(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  return !is_whitespace(cp) && cp < 0xDC00;
}

// The code point ending just before `end` (walking back over continuation bytes).
uint32_t code_point_before(std::string_view text, size_t end) {
  size_t begin = end - 1;
  while (begin > 0 && end - begin < 4 && (static_cast<uint8_t>(text[begin]) & 0xC0) == 0x80) --begin;
  size_t len = 0;
  const uint32_t cp = utf8_decode(text, begin, &len);
  return begin + len == end ? cp : 0xDC00u + static_cast<uint8_t>(text[end - 1]);
}

size_t skip_whitespace(std::string_view text, size_t pos) {
  while (pos < text.size()) {
    size_t len = 0;
    if (!is_whitespace(utf8_decode(text, pos, &len))) break;
    pos += len;
  }
  return pos;
}

size_t trim_whitespace_end(std::string_view text, size_t begin, size_t end) {
  while (end > begin) {
    const uint32_t cp = code_point_before(text, end);
    if (!is_whitespace(cp)) break;
    std::string encoded;
    utf8_append(encoded, cp);
    end -= encoded.size();
  }
  return end;
}

}  // namespace

std::vector<Fragment> split_added_tokens(const TokenizerState& state, std::string_view text, bool parse_special) {
  std::vector<Fragment> fragments;
  const auto& added = state.spec.added_tokens;
  size_t segment_begin = 0;  // start of the pending text fragment
  size_t pos = 0;
  const auto flush_text = [&](size_t end) {
    if (end > segment_begin) {
      fragments.push_back({std::string(text.substr(segment_begin, end - segment_begin)), -1, segment_begin == 0});
    }
  };
  while (pos < text.size()) {
    const AddedToken* match = nullptr;
    for (uint32_t index : state.added_by_first_byte[static_cast<uint8_t>(text[pos])]) {
      const AddedToken& token = added[index];
      if (token.special && !parse_special) continue;
      if (text.compare(pos, token.content.size(), token.content) != 0) continue;
      if (token.single_word) {
        const size_t end = pos + token.content.size();
        if (pos > 0 && is_word_character(code_point_before(text, pos))) continue;
        size_t len = 0;
        if (end < text.size() && is_word_character(utf8_decode(text, end, &len))) continue;
      }
      match = &token;  // candidates are sorted longest first
      break;
    }
    if (!match) {
      ++pos;
      continue;
    }
    flush_text(match->lstrip ? trim_whitespace_end(text, segment_begin, pos) : pos);
    fragments.push_back({std::string(), match->id, pos == 0});
    pos += match->content.size();
    if (match->rstrip) pos = skip_whitespace(text, pos);
    segment_begin = pos;
  }
  flush_text(text.size());
  return fragments;
}

// ---- Normalizers --------------------------------------------------------------------------------------------

Status normalize(const TokenizerState& state, RegexScratch& scratch, std::string* text) {
  std::vector<std::pair<size_t, size_t>> matches;
  for (const CompiledNormalizerStep& compiled : state.normalizer) {
    const NormalizerStep& step = compiled.step;
    switch (step.kind) {
      case NormalizerStep::Kind::kPrepend:
        if (!text->empty()) text->insert(0, step.content);
        break;
      case NormalizerStep::Kind::kReplace: {
        matches.clear();
        QRT_TRY(compiled.regex->find_all(*text, scratch, &matches));
        if (matches.empty()) break;
        std::string out;
        out.reserve(text->size() + matches.size() * step.content.size());
        size_t last = 0;
        for (const auto& [begin, end] : matches) {
          out.append(*text, last, begin - last);
          out += step.content;
          last = end;
        }
        out.append(*text, last, std::string::npos);
        *text = std::move(out);
        break;
      }
      case NormalizerStep::Kind::kLowercase:
        *text = unicode_lowercase(*text);
        break;
      case NormalizerStep::Kind::kStrip: {
        size_t begin = 0, end = text->size();
        if (step.strip_left) begin = skip_whitespace(*text, 0);
        if (step.strip_right) end = trim_whitespace_end(*text, begin, end);
        *text = text->substr(begin, end - begin);
        break;
      }
      case NormalizerStep::Kind::kBert: {
        QRT_ASSIGN_OR_RETURN(std::string normalized, bert_normalize(*text, step));
        *text = std::move(normalized);
        break;
      }
      case NormalizerStep::Kind::kStripAccents:
        *text = remove_combining_marks(*text);
        break;
      case NormalizerStep::Kind::kUnicode: {
        QRT_ASSIGN_OR_RETURN(std::string normalized, unicode_normalize(*text, step.form));
        *text = std::move(normalized);
        break;
      }
    }
  }
  return ok_status();
}

// ---- Pre-tokenizers -----------------------------------------------------------------------------------------

namespace {

struct Span {
  size_t begin, end;
  bool delimiter;
};

// Cuts `piece` around its delimiters as `behavior` says (HF SplitDelimiterBehavior), appending non-empty
// pieces. Only the first piece keeps at_input_start.
void split_piece(const Fragment& piece, const std::vector<std::pair<size_t, size_t>>& delimiters,
                 SplitBehavior behavior, std::vector<Fragment>* out) {
  std::vector<Span> spans;
  size_t last = 0;
  for (const auto& [begin, end] : delimiters) {
    if (begin > last) spans.push_back({last, begin, false});
    spans.push_back({begin, end, true});
    last = end;
  }
  if (last < piece.text.size()) spans.push_back({last, piece.text.size(), false});

  std::vector<std::pair<size_t, size_t>> ranges;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const Span& s : spans) ranges.emplace_back(s.begin, s.end);
      break;
    case SplitBehavior::kRemoved:
      for (const Span& s : spans) {
        if (!s.delimiter) ranges.emplace_back(s.begin, s.end);
      }
      break;
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_delimiter = false;
      for (const Span& s : spans) {
        if (s.delimiter && !previous_delimiter && !ranges.empty()) {
          ranges.back().second = s.end;
        } else {
          ranges.emplace_back(s.begin, s.end);
        }
        previous_delimiter = s.delimiter;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool next_delimiter = false;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->delimiter && !next_delimiter && !ranges.empty()) {
          ranges.back().first = it->begin;
        } else {
          ranges.emplace_back(it->begin, it->end);
        }
        next_delimiter = it->delimiter;
      }
      std::reverse(ranges.begin(), ranges.end());
      break;
    }
    case SplitBehavior::kContiguous: {
      bool previous_delimiter = false;
      for (const Span& s : spans) {
        if (s.delimiter && previous_delimiter) {
          ranges.back().second = s.end;
        } else {
          ranges.emplace_back(s.begin, s.end);
        }
        previous_delimiter = s.delimiter;
      }
      break;
    }
  }
  for (const auto& [begin, end] : ranges) {
    if (end <= begin) continue;
    out->push_back({piece.text.substr(begin, end - begin), -1, piece.at_input_start && begin == 0});
  }
}

// The complement of sorted, disjoint ranges within [0, size).
std::vector<std::pair<size_t, size_t>> complement(const std::vector<std::pair<size_t, size_t>>& ranges, size_t size) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t last = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin > last) out.emplace_back(last, begin);
    last = end;
  }
  if (last < size) out.emplace_back(last, size);
  return out;
}

// BERT: whitespace separates (and goes), every punctuation character is a piece of its own.
void bert_split(const Fragment& piece, std::vector<Fragment>* out) {
  const std::string& text = piece.text;
  size_t word_begin = 0;
  const auto flush = [&](size_t end) {
    if (end > word_begin) out->push_back({text.substr(word_begin, end - word_begin), -1, false});
  };
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    const uint32_t cp = utf8_decode(text, pos, &len);
    if (is_whitespace(cp)) {
      flush(pos);
      word_begin = pos + len;
    } else if (is_bert_punctuation(cp)) {
      flush(pos);
      out->push_back({text.substr(pos, len), -1, false});
      word_begin = pos + len;
    }
    pos += len;
  }
  flush(text.size());
}

}  // namespace

Status pre_tokenize(const TokenizerState& state, RegexScratch& scratch, Fragment fragment,
                    std::vector<Fragment>* pieces) {
  std::vector<Fragment> current;
  current.push_back(std::move(fragment));
  std::vector<Fragment> next;
  std::vector<std::pair<size_t, size_t>> matches;
  for (const CompiledPreTokenizerStep& compiled : state.pre_tokenizer) {
    const PreTokenizerStep& step = compiled.step;
    next.clear();
    for (Fragment& piece : current) {
      SplitBehavior behavior = SplitBehavior::kIsolated;
      bool invert = false;
      switch (step.kind) {
        case PreTokenizerStep::Kind::kSplit:
          behavior = step.behavior;
          invert = step.invert;
          break;
        case PreTokenizerStep::Kind::kByteLevel:
          if (step.add_prefix_space && (piece.text.empty() || piece.text[0] != ' ')) piece.text.insert(0, " ");
          break;
        case PreTokenizerStep::Kind::kDigits:
          break;
        case PreTokenizerStep::Kind::kMetaspace: {
          std::string replaced;
          replaced.reserve(piece.text.size() + 8);
          for (char c : piece.text) {
            if (c == ' ') {
              replaced += step.replacement;
            } else {
              replaced.push_back(c);
            }
          }
          const bool prepend = step.prepend_scheme == PrependScheme::kAlways ||
                               (step.prepend_scheme == PrependScheme::kFirst && piece.at_input_start);
          if (prepend && replaced.compare(0, step.replacement.size(), step.replacement) != 0) {
            replaced.insert(0, step.replacement);
          }
          piece.text = std::move(replaced);
          behavior = SplitBehavior::kMergedWithNext;
          break;
        }
        case PreTokenizerStep::Kind::kWhitespaceSplit:
          behavior = SplitBehavior::kRemoved;
          break;
        case PreTokenizerStep::Kind::kBert:
          bert_split(piece, &next);
          continue;
      }
      if (!compiled.regex) {
        if (!piece.text.empty()) next.push_back(std::move(piece));
        continue;
      }
      matches.clear();
      QRT_TRY(compiled.regex->find_all(piece.text, scratch, &matches));
      split_piece(piece, invert ? complement(matches, piece.text.size()) : matches, behavior, &next);
    }
    current.swap(next);
  }
  for (Fragment& piece : current) pieces->push_back(std::move(piece));
  return ok_status();
}

}  // namespace qrt::tokenizer_detail
