// Unicode character data for BERT-style normalization, generated into unicode_tables.cpp by
// scripts/gen-unicode-tables.py (see there for the exact contents).
#pragma once

#include <cstdint>
#include <span>

namespace qrt::tokenizer_detail {

struct CodeRange {
  uint32_t first, last;  // inclusive
};
// Code points first, first + step, ... up to last lowercase to cp + delta.
struct LowercaseRun {
  uint32_t first, last;
  int32_t delta;
  uint32_t step;
};

std::span<const CodeRange> punctuation_ranges();
std::span<const CodeRange> other_ranges();
std::span<const LowercaseRun> lowercase_runs();

}  // namespace qrt::tokenizer_detail
