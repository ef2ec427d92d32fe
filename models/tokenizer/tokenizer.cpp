#include "models/tokenizer/tokenizer.hpp"

#include <algorithm>
#include <array>

#include "models/tokenizer/tokenizer_state.hpp"
#include "models/tokenizer/unicode.hpp"

namespace qrt {

using tokenizer_detail::Fragment;
using tokenizer_detail::RegexScratch;
using tokenizer_detail::TokenizerState;

namespace {

// Texts that end a turn, in the order llama.cpp prefers them for the EOT id (spec/ggml.md §5).
constexpr std::array<std::string_view, 8> kEndOfTurnTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek's <｜end▁of▁sentence｜>
    "<|end_of_text|>"};
// Further texts that stop generation.
constexpr std::array<std::string_view, 4> kEndOfGenerationTexts = {"<|eom_id|>", "<|return|>", "<|call|>",
                                                                    "<|end_of_turn|>"};

Status check_spec(const TokenizerSpec& spec) {
  const std::string& src = spec.source;
  const size_t n = spec.tokens.size();
  if (n == 0) return format_error(src + ": the vocabulary is empty");
  if (n > static_cast<size_t>(INT32_MAX)) return format_error(src + ": vocabulary too large");
  if (!spec.scores.empty() && spec.scores.size() != n) {
    return format_error(src + ": " + std::to_string(spec.scores.size()) + " scores for " + std::to_string(n) +
                        " tokens");
  }
  if (!spec.types.empty() && spec.types.size() != n) {
    return format_error(src + ": " + std::to_string(spec.types.size()) + " token types for " + std::to_string(n) +
                        " tokens");
  }
  const std::pair<const char*, int32_t> ids[] = {{"bos", spec.bos_id}, {"eos", spec.eos_id}, {"eot", spec.eot_id},
                                                 {"eom", spec.eom_id}, {"unk", spec.unk_id}, {"pad", spec.pad_id},
                                                 {"sep", spec.sep_id}, {"mask", spec.mask_id}};
  for (const auto& [name, id] : ids) {
    if (id < -1 || id >= static_cast<int64_t>(n)) {
      return format_error(src + ": " + name + " token id " + std::to_string(id) + " is outside the vocabulary of " +
                          std::to_string(n));
    }
  }
  if (spec.add_bos && spec.bos_id < 0) return format_error(src + ": add_bos is set but there is no BOS token");
  if (spec.add_eos && spec.eos_id < 0) return format_error(src + ": add_eos is set but there is no EOS token");
  if (spec.add_sep && spec.sep_id < 0) return format_error(src + ": add_sep is set but there is no SEP token");
  for (const AddedToken& added : spec.added_tokens) {
    if (added.id < 0 || added.id >= static_cast<int64_t>(n)) {
      return format_error(src + ": added token \"" + added.content + "\" has id " + std::to_string(added.id) +
                          ", outside the vocabulary of " + std::to_string(n));
    }
    if (added.content.empty()) return format_error(src + ": added token " + std::to_string(added.id) + " is empty");
  }
  if (spec.model == TokenizerModelKind::kSentencePiece && spec.scores.empty()) {
    return format_error(src + ": a SentencePiece vocabulary needs scores");
  }
  if (spec.model == TokenizerModelKind::kBpe && spec.merges.empty() && !spec.merges_from_ranks) {
    return format_error(src + ": a BPE vocabulary needs merges");
  }
  if (spec.model == TokenizerModelKind::kWordPiece && spec.continuing_subword_prefix == spec.word_start_prefix) {
    return format_error(src + ": WordPiece needs different word-start and continuation prefixes");
  }
  return ok_status();
}

// What a token decodes to inside a sequence.
std::string decoded_piece(const TokenizerSpec& spec, const std::string& text, TokenType type) {
  if (spec.decoder.byte_fallback) {
    const int byte = tokenizer_detail::parse_byte_token(text);
    if (byte >= 0) return std::string(1, static_cast<char>(byte));
  }
  if (spec.byte_level) {
    std::string bytes;
    // Added tokens are stored as written ("<|endoftext|>", runs of spaces) and decode as themselves.
    if (tokenizer_detail::byte_level_decode(text, &bytes)) return bytes;
    return text;
  }
  if (spec.decoder.marker.empty() || type == TokenType::kControl) return text;
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, spec.decoder.marker.size(), spec.decoder.marker) == 0) {
      out.push_back(' ');
      pos += spec.decoder.marker.size();
    } else {
      out.push_back(text[pos++]);
    }
  }
  return out;
}

}  // namespace

Result<Tokenizer> Tokenizer::create(TokenizerSpec spec) {
  if (spec.source.empty()) spec.source = "tokenizer";
  QRT_TRY(check_spec(spec));
  auto state = std::make_unique<TokenizerState>();
  state->spec = std::move(spec);
  TokenizerState& s = *state;
  const TokenizerSpec& sp = s.spec;
  const size_t n = sp.tokens.size();

  s.types = sp.types.empty() ? std::vector<TokenType>(n, TokenType::kNormal) : sp.types;
  s.token_to_id.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    // A later duplicate wins, as in llama.cpp; empty texts are never looked up.
    if (!sp.tokens[id].empty()) s.token_to_id.insert_or_assign(sp.tokens[id], static_cast<int32_t>(id));
  }

  s.byte_tokens.fill(-1);
  for (int b = 0; b < 256; ++b) {
    if (sp.byte_level) {
      const auto it = s.token_to_id.find(tokenizer_detail::byte_to_unicode(static_cast<uint8_t>(b)));
      if (it != s.token_to_id.end()) s.byte_tokens[b] = it->second;
    } else if (sp.byte_fallback) {
      static const char* kHex = "0123456789ABCDEF";
      const std::string name = std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
      const auto it = s.token_to_id.find(name);
      if (it != s.token_to_id.end()) s.byte_tokens[b] = it->second;
    }
  }
  if (sp.model == TokenizerModelKind::kBpe) QRT_TRY(tokenizer_detail::build_merge_table(s));
  QRT_TRY(tokenizer_detail::compile_pipeline(s));

  s.pieces.resize(n);
  for (size_t id = 0; id < n; ++id) s.pieces[id] = decoded_piece(sp, sp.tokens[id], s.types[id]);

  for (uint32_t i = 0; i < sp.added_tokens.size(); ++i) {
    s.added_by_first_byte[static_cast<uint8_t>(sp.added_tokens[i].content[0])].push_back(i);
  }
  for (auto& candidates : s.added_by_first_byte) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](uint32_t a, uint32_t b) {
      return sp.added_tokens[a].content.size() > sp.added_tokens[b].content.size();
    });
  }

  // End of turn: from the spec, else the first known end-of-turn text the vocabulary has.
  if (s.spec.eot_id < 0) {
    for (std::string_view text : kEndOfTurnTexts) {
      const auto it = s.token_to_id.find(text);
      if (it != s.token_to_id.end()) {
        s.spec.eot_id = it->second;
        break;
      }
    }
  }
  for (int32_t id : {sp.eos_id, sp.eot_id, sp.eom_id}) {
    if (id >= 0) s.end_of_generation.push_back(id);
  }
  const auto add_control_by_text = [&](std::string_view text) {
    const auto it = s.token_to_id.find(text);
    if (it != s.token_to_id.end() && s.types[it->second] == TokenType::kControl) s.end_of_generation.push_back(it->second);
  };
  for (std::string_view text : kEndOfTurnTexts) add_control_by_text(text);
  for (std::string_view text : kEndOfGenerationTexts) add_control_by_text(text);
  std::sort(s.end_of_generation.begin(), s.end_of_generation.end());
  s.end_of_generation.erase(std::unique(s.end_of_generation.begin(), s.end_of_generation.end()),
                            s.end_of_generation.end());
  return Tokenizer(std::move(state));
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerState> state) : state_(std::move(state)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  const TokenizerState& s = *state_;
  const TokenizerSpec& sp = s.spec;
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special && sp.add_bos) ids.push_back(sp.bos_id);

  RegexScratch scratch;
  std::vector<Fragment> pieces;
  for (Fragment& fragment : tokenizer_detail::split_added_tokens(s, text, parse_special)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      continue;
    }
    QRT_TRY(tokenizer_detail::normalize(s, scratch, &fragment.text));
    pieces.clear();
    QRT_TRY(tokenizer_detail::pre_tokenize(s, scratch, std::move(fragment), &pieces));
    for (const Fragment& piece : pieces) {
      switch (sp.model) {
        case TokenizerModelKind::kBpe:
          tokenizer_detail::encode_bpe_piece(s, piece.text, &ids);
          break;
        case TokenizerModelKind::kSentencePiece:
          tokenizer_detail::encode_sentencepiece_piece(s, piece.text, &ids);
          break;
        case TokenizerModelKind::kWordPiece:
          tokenizer_detail::encode_wordpiece_piece(s, piece.text, &ids);
          break;
      }
    }
  }
  if (add_special && sp.add_eos) ids.push_back(sp.eos_id);
  if (add_special && sp.add_sep) ids.push_back(sp.sep_id);
  return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const TokenizerState& s = *state_;
  const DecoderSpec& dec = s.spec.decoder;
  std::string out;
  bool first = true;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || static_cast<size_t>(id) >= s.pieces.size()) {
      return out_of_range(s.spec.source + ": token id " + std::to_string(id) + " at position " + std::to_string(i) +
                          " is outside the vocabulary of " + std::to_string(s.pieces.size()));
    }
    if (skip_special && s.types[id] == TokenType::kControl) continue;
    const std::string& piece = s.pieces[id];
    if (dec.wordpiece) {
      if (piece.compare(0, dec.wordpiece_prefix.size(), dec.wordpiece_prefix) == 0) {
        out.append(piece, dec.wordpiece_prefix.size(), std::string::npos);
      } else {
        if (!first) out.push_back(' ');
        out += piece;
      }
    } else {
      out += piece;
    }
    first = false;
  }
  size_t strip = 0;
  while (strip < static_cast<size_t>(std::max(dec.strip_leading_spaces, 0)) && strip < out.size() && out[strip] == ' ') {
    ++strip;
  }
  out.erase(0, strip);
  if (dec.wordpiece_cleanup) {
    // HF's clean_up_tokenization: no space before punctuation and English contractions.
    static const std::pair<std::string_view, std::string_view> kCleanups[] = {
        {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
        {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : kCleanups) {
      std::string cleaned;
      size_t last = 0;
      for (size_t pos = out.find(from); pos != std::string::npos; pos = out.find(from, last)) {
        cleaned.append(out, last, pos - last);
        cleaned += to;
        last = pos + from.size();
      }
      cleaned.append(out, last, std::string::npos);
      out = std::move(cleaned);
    }
  }
  return out;
}

std::string_view Tokenizer::token_to_piece(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= state_->pieces.size()) return {};
  return state_->pieces[id];
}

std::string_view Tokenizer::token_text(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= state_->spec.tokens.size()) return {};
  return state_->spec.tokens[id];
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view text) const {
  const auto it = state_->token_to_id.find(text);
  if (it == state_->token_to_id.end()) return std::nullopt;
  return it->second;
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= state_->types.size()) return TokenType::kUndefined;
  return state_->types[id];
}

size_t Tokenizer::vocab_size() const { return state_->spec.tokens.size(); }
int32_t Tokenizer::bos_id() const { return state_->spec.bos_id; }
int32_t Tokenizer::eos_id() const { return state_->spec.eos_id; }
int32_t Tokenizer::eot_id() const { return state_->spec.eot_id; }
int32_t Tokenizer::unk_id() const { return state_->spec.unk_id; }
int32_t Tokenizer::pad_id() const { return state_->spec.pad_id; }

bool Tokenizer::is_end_of_generation(int32_t id) const {
  return std::binary_search(state_->end_of_generation.begin(), state_->end_of_generation.end(), id);
}

const std::string& Tokenizer::chat_template() const { return state_->spec.chat_template; }
const TokenizerSpec& Tokenizer::spec() const { return state_->spec; }

}  // namespace qrt
