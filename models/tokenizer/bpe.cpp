// The merge loop shared by BPE and SentencePiece: symbols in a linked list, candidate pairs in a min-heap
// ordered by (priority, position), stale candidates recognised by their recorded size. O(n log n) per piece,
// so a long unbroken piece (SentencePiece sees a whole segment as one) stays cheap.
#include <algorithm>
#include <queue>

#include "models/tokenizer/tokenizer_state.hpp"
#include "models/tokenizer/unicode.hpp"
#include "qrt/log.hpp"

namespace qrt::tokenizer_detail {

namespace {

struct Symbol {
  uint32_t begin;  // byte offset in the piece
  uint32_t size;   // bytes; 0 once merged into its left neighbour
  int32_t id;      // token id, -1 when the vocabulary has no such token
  int32_t prev, next;
};

struct Candidate {
  double priority;  // lower merges first
  uint32_t begin;   // left symbol's offset: ties go to the leftmost pair
  int32_t left, right;
  uint32_t size;    // left.size + right.size when the candidate was made
  int32_t merged;
  bool operator>(const Candidate& o) const {
    return priority != o.priority ? priority > o.priority : begin > o.begin;
  }
};

// Merges symbols while any adjacent pair has a rule. find(left, right, &priority, &merged) says whether the
// pair merges.
template <class FindPair>
void merge_symbols(std::vector<Symbol>& symbols, FindPair&& find) {
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  const auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    double priority = 0;
    int32_t merged = -1;
    if (find(symbols[l], symbols[r], &priority, &merged)) {
      heap.push({priority, symbols[l].begin, l, r, symbols[l].size + symbols[r].size, merged});
    }
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) consider(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& l = symbols[c.left];
    Symbol& r = symbols[c.right];
    // A symbol only grows by absorbing its right neighbour, so matching sizes mean both are unchanged.
    if (l.size == 0 || r.size == 0 || l.next != c.right || l.size + r.size != c.size) continue;
    l.size += r.size;
    l.id = c.merged;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = c.left;
    r.size = 0;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
}

// One symbol per UTF-8 character (ill-formed bytes one each).
std::vector<Symbol> character_symbols(const TokenizerState& state, std::string_view piece) {
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (size_t pos = 0; pos < piece.size();) {
    const size_t len = utf8_char_length(piece, pos);
    const auto it = state.token_to_id.find(piece.substr(pos, len));
    const int32_t id = it == state.token_to_id.end() ? -1 : it->second;
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(len), id, n - 1, n + 1});
    pos += len;
  }
  if (!symbols.empty()) symbols.back().next = -1;
  return symbols;
}

// Final symbols -> ids: known tokens as they are; unknown text as <0xNN> byte tokens (byte_fallback), else unk
// (consecutive unknowns fused into one when fuse_unk).
void emit_symbols(const TokenizerState& state, std::string_view piece, const std::vector<Symbol>& symbols,
                  std::vector<int32_t>* out) {
  const TokenizerSpec& spec = state.spec;
  bool previous_unknown = false;
  for (int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out->push_back(s.id);
      previous_unknown = false;
      continue;
    }
    if (spec.byte_fallback) {
      bool all_bytes = true;
      for (uint32_t k = 0; k < s.size; ++k) all_bytes &= state.byte_tokens[static_cast<uint8_t>(piece[s.begin + k])] >= 0;
      if (all_bytes) {
        for (uint32_t k = 0; k < s.size; ++k) out->push_back(state.byte_tokens[static_cast<uint8_t>(piece[s.begin + k])]);
        previous_unknown = false;
        continue;
      }
    }
    if (spec.unk_id >= 0 && !(spec.fuse_unk && previous_unknown)) out->push_back(spec.unk_id);
    previous_unknown = true;
  }
}

}  // namespace

void encode_bpe_piece(const TokenizerState& state, std::string_view piece, std::vector<int32_t>* out) {
  if (piece.empty()) return;
  const TokenizerSpec& spec = state.spec;
  std::vector<Symbol> symbols;
  if (spec.byte_level) {
    if (spec.ignore_merges) {
      const auto it = state.token_to_id.find(byte_level_encode(piece));
      if (it != state.token_to_id.end()) {
        out->push_back(it->second);
        return;
      }
    }
    symbols.reserve(piece.size());
    for (size_t i = 0; i < piece.size(); ++i) {
      const int32_t id = state.byte_tokens[static_cast<uint8_t>(piece[i])];
      const auto n = static_cast<int32_t>(i);
      symbols.push_back({static_cast<uint32_t>(i), 1, id, n - 1, n + 1});
    }
    symbols.back().next = -1;
  } else {
    if (spec.ignore_merges) {
      const auto it = state.token_to_id.find(piece);
      if (it != state.token_to_id.end()) {
        out->push_back(it->second);
        return;
      }
    }
    symbols = character_symbols(state, piece);
  }
  merge_symbols(symbols, [&](const Symbol& l, const Symbol& r, double* priority, int32_t* merged) {
    if (l.id < 0 || r.id < 0) return false;
    const auto it = state.merges.find(pair_key(l.id, r.id));
    if (it == state.merges.end()) return false;
    *priority = it->second.rank;
    *merged = it->second.merged;
    return true;
  });
  if (spec.byte_level) {
    // Byte-level symbols are always tokens, except bytes a broken vocabulary lacks.
    for (int32_t i = 0; i >= 0; i = symbols[i].next) {
      if (symbols[i].id >= 0) {
        out->push_back(symbols[i].id);
      } else if (spec.unk_id >= 0) {
        out->push_back(spec.unk_id);
      }
    }
    return;
  }
  emit_symbols(state, piece, symbols, out);
}

void encode_sentencepiece_piece(const TokenizerState& state, std::string_view piece, std::vector<int32_t>* out) {
  if (piece.empty()) return;
  std::vector<Symbol> symbols = character_symbols(state, piece);
  merge_symbols(symbols, [&](const Symbol& l, const Symbol& r, double* priority, int32_t* merged) {
    const auto it = state.token_to_id.find(piece.substr(l.begin, l.size + r.size));
    if (it == state.token_to_id.end()) return false;
    const TokenType type = state.types[it->second];
    // Only ordinary pieces are merge results; control and byte tokens are never spelled out by merging.
    if (type != TokenType::kNormal && type != TokenType::kUserDefined && type != TokenType::kUndefined) return false;
    *priority = state.spec.scores.empty() ? 0.0 : -static_cast<double>(state.spec.scores[it->second]);
    *merged = it->second;
    return true;
  });
  emit_symbols(state, piece, symbols, out);
}

Status build_merge_table(TokenizerState& state) {
  const TokenizerSpec& spec = state.spec;
  const auto lookup = [&](std::string_view text) {
    const auto it = state.token_to_id.find(text);
    return it == state.token_to_id.end() ? -1 : it->second;
  };
  if (spec.merges_from_ranks) {
    // tiktoken: a pair merges when its concatenation is a token, and the lower token id (its rank) goes
    // first. Only base tokens (not added ones) take part.
    for (size_t id = 0; id < spec.tokens.size(); ++id) {
      if (state.types[id] != TokenType::kNormal) continue;
      std::string_view text = spec.tokens[id];
      for (size_t cut = utf8_char_length(text, 0); cut < text.size(); cut += utf8_char_length(text, cut)) {
        const int32_t left = lookup(text.substr(0, cut)), right = lookup(text.substr(cut));
        if (left < 0 || right < 0) continue;
        state.merges.emplace(pair_key(left, right), MergeRule{static_cast<int32_t>(id), static_cast<int32_t>(id)});
      }
    }
    return ok_status();
  }
  state.merges.reserve(spec.merges.size());
  size_t skipped = 0;
  std::string first_skipped;
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [a, b] = spec.merges[rank];
    const int32_t left = lookup(a), right = lookup(b), merged = lookup(a + b);
    if (left < 0 || right < 0 || merged < 0) {
      // llama.cpp loads such vocabularies and the merge can never produce a token, so it is dropped.
      if (skipped++ == 0) first_skipped = "merge " + std::to_string(rank) + " (\"" + a + "\" \"" + b + "\")";
      continue;
    }
    // The first occurrence of a pair is its rank, as in HF and llama.cpp.
    state.merges.emplace(pair_key(left, right), MergeRule{static_cast<int32_t>(rank), merged});
  }
  if (skipped > 0) {
    log_warn(spec.source, ": ", skipped, " merges name tokens the vocabulary lacks and are ignored (first: ",
             first_skipped, ")");
  }
  return ok_status();
}

}  // namespace qrt::tokenizer_detail
