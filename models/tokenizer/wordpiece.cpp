// WordPiece (BERT) and the Unicode-aware text helpers it needs: HF BertNormalizer semantics (clean-up, CJK
// spacing, accent stripping as NFD then removal of nonspacing marks, lowercase) and greedy
// longest-match-first WordPiece.
#include <algorithm>

#include "models/tokenizer/tokenizer_state.hpp"
#include "models/tokenizer/unicode.hpp"
#include "models/tokenizer/unicode_tables.hpp"

namespace qrt::tokenizer_detail {

namespace {

bool in_ranges(std::span<const CodeRange> ranges, uint32_t cp) {
  const auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                                   [](uint32_t value, const CodeRange& r) { return value < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

uint32_t lowercase_code_point(uint32_t cp) {
  const auto runs = lowercase_runs();
  const auto it = std::upper_bound(runs.begin(), runs.end(), cp,
                                   [](uint32_t value, const LowercaseRun& r) { return value < r.first; });
  if (it == runs.begin()) return cp;
  const LowercaseRun& run = *std::prev(it);
  if (cp > run.last || (cp - run.first) % run.step != 0) return cp;
  return static_cast<uint32_t>(static_cast<int64_t>(cp) + run.delta);
}

// CJK ideographs as BERT defines them: spaced apart so each becomes its own word.
bool is_cjk_ideograph(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace

bool is_bert_punctuation(uint32_t cp) {
  // ASCII symbols count as punctuation for BERT even where Unicode calls them symbols ($, +, <, ^, `, |, ~).
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) {
    return true;
  }
  return in_ranges(punctuation_ranges(), cp);
}

std::string unicode_lowercase(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    const uint32_t cp = utf8_decode(text, pos, &len);
    if (cp >= 0xDC00 && cp <= 0xDCFF && len == 1) {
      out.push_back(text[pos]);  // an ill-formed byte stays as it is
    } else if (cp == 0x130) {
      out += "i\xCC\x87";  // U+0130 lowercases to i + combining dot above
    } else {
      utf8_append(out, lowercase_code_point(cp));
    }
    pos += len;
  }
  return out;
}

Result<std::string> bert_normalize(std::string_view text, const NormalizerStep& step) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    const uint32_t cp = utf8_decode(text, pos, &len);
    const bool ill_formed = cp >= 0xDC00 && cp <= 0xDCFF && len == 1;
    pos += len;
    if (step.clean_text) {
      if (cp == 0 || cp == 0xFFFD || ill_formed) continue;
      if (is_whitespace(cp)) {
        out.push_back(' ');
        continue;
      }
      if (cp != '\t' && cp != '\n' && cp != '\r' && in_ranges(other_ranges(), cp)) continue;
    }
    if (step.handle_chinese_chars && is_cjk_ideograph(cp)) {
      out.push_back(' ');
      utf8_append(out, cp);
      out.push_back(' ');
      continue;
    }
    if (ill_formed) {
      out.push_back(text[pos - 1]);  // kept as the byte it is
    } else {
      utf8_append(out, cp);
    }
  }
  if (step.strip_accents) {
    // NFD of the whole text (so combining marks are also put in canonical order), then marks dropped.
    QRT_ASSIGN_OR_RETURN(out, strip_accents(out));
  }
  return step.lowercase ? unicode_lowercase(out) : out;
}

void encode_wordpiece_piece(const TokenizerState& state, std::string_view word, std::vector<int32_t>* out) {
  if (word.empty()) return;
  const TokenizerSpec& spec = state.spec;
  const auto unknown = [&]() {
    if (spec.unk_id >= 0) out->push_back(spec.unk_id);
  };
  if (utf8_count(word) > static_cast<size_t>(std::max(spec.max_input_chars_per_word, 0))) return unknown();
  std::vector<int32_t> pieces;
  std::string candidate;
  size_t start = 0;
  while (start < word.size()) {
    // Longest vocabulary entry starting at `start` ("##"-prefixed after the first), shrinking by characters.
    size_t end = word.size();
    int32_t found = -1;
    while (end > start) {
      candidate = start > 0 ? spec.continuing_subword_prefix : spec.word_start_prefix;
      candidate.append(word.substr(start, end - start));
      const auto it = state.token_to_id.find(candidate);
      if (it != state.token_to_id.end()) {
        found = it->second;
        break;
      }
      do {
        --end;
      } while (end > start && (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80);
    }
    if (found < 0) return unknown();  // any unmatched part makes the whole word unknown
    pieces.push_back(found);
    start = end;
  }
  out->insert(out->end(), pieces.begin(), pieces.end());
}

}  // namespace qrt::tokenizer_detail
