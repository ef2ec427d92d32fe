// Byte-level BPE vocabularies from files other than tokenizer.json: tiktoken rank files and GPT-2 style
// vocab.json + merges.txt pairs.
#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/tokenizer_state.hpp"
#include "models/tokenizer/unicode.hpp"

namespace qrt {

namespace {

// Standard base64 through OpenSSL; '=' padding may be left out (it is restored first). False on anything that is
// not base64.
bool base64_decode(std::string_view text, std::string* out) {
  std::string padded(text);
  if (padded.size() % 4 == 1) return false;
  while (padded.size() % 4 != 0) padded.push_back('=');
  out->assign(padded.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out->data()),
                                reinterpret_cast<const unsigned char*>(padded.data()), static_cast<int>(padded.size()));
  if (n < 0) return false;
  // EVP_DecodeBlock counts the padding as zero bytes.
  size_t pad = 0;
  while (pad < 2 && pad < padded.size() && padded[padded.size() - 1 - pad] == '=') ++pad;
  out->resize(static_cast<size_t>(n) - pad);
  return true;
}

std::vector<PreTokenizerStep> split_steps(std::vector<std::string> regexes) {
  if (regexes.empty()) regexes.emplace_back(tokenizer_detail::gpt2_split_pattern());
  std::vector<PreTokenizerStep> steps;
  for (std::string& regex : regexes) {
    steps.push_back(PreTokenizerStep::split_by(std::move(regex)));
  }
  return steps;
}

}  // namespace

Result<TokenizerSpec> tokenizer_spec_from_tiktoken(std::string_view ranks_text, std::vector<std::string> regexes,
                                                   bool ignore_merges, std::vector<std::string> special_tokens,
                                                   std::string source) {
  TokenizerSpec spec;
  spec.source = std::move(source);
  spec.model = TokenizerModelKind::kBpe;
  spec.byte_level = true;
  spec.merges_from_ranks = true;
  spec.ignore_merges = ignore_merges;
  std::string bytes;
  size_t line_number = 0;
  while (!ranks_text.empty()) {
    const size_t newline = ranks_text.find('\n');
    std::string_view line = ranks_text.substr(0, newline);
    ranks_text.remove_prefix(newline == std::string_view::npos ? ranks_text.size() : newline + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    const auto bad = [&](const std::string& why) {
      return format_error(spec.source + ": line " + std::to_string(line_number) + ": " + why);
    };
    if (space == std::string_view::npos) return bad("expected \"<base64> <rank>\"");
    if (!base64_decode(line.substr(0, space), &bytes) || bytes.empty()) return bad("the token is not base64");
    std::string_view rank_text = line.substr(space + 1);
    uint64_t rank = 0;
    if (rank_text.empty() || rank_text.size() > 9) return bad("bad rank");
    for (char c : rank_text) {
      if (c < '0' || c > '9') return bad("bad rank");
      rank = rank * 10 + static_cast<uint64_t>(c - '0');
    }
    // Ranks are token ids; the files list them in order, and a gap would leave an id without a token.
    if (rank != spec.tokens.size()) {
      return bad("rank " + std::to_string(rank) + " where " + std::to_string(spec.tokens.size()) + " was expected");
    }
    spec.tokens.push_back(tokenizer_detail::byte_level_encode(bytes));
  }
  if (spec.tokens.empty()) return format_error(spec.source + ": no ranks");
  spec.types.assign(spec.tokens.size(), TokenType::kNormal);
  for (std::string& special : special_tokens) {
    const auto id = static_cast<int32_t>(spec.tokens.size());
    AddedToken added;
    added.id = id;
    added.content = special;
    added.special = true;
    spec.added_tokens.push_back(std::move(added));
    spec.tokens.push_back(std::move(special));
    spec.types.push_back(TokenType::kControl);
  }
  spec.pre_tokenizer = split_steps(std::move(regexes));
  return spec;
}

Result<TokenizerSpec> tokenizer_spec_from_bpe_files(std::string_view vocab_json, std::string_view merges_text,
                                                    std::vector<std::string> regexes, bool ignore_merges,
                                                    std::string source) {
  TokenizerSpec spec;
  spec.source = std::move(source);
  spec.model = TokenizerModelKind::kBpe;
  spec.byte_level = true;
  spec.ignore_merges = ignore_merges;
  const nlohmann::json vocab = nlohmann::json::parse(vocab_json, nullptr, /*allow_exceptions=*/false);
  if (!vocab.is_object()) return format_error(spec.source + ": expected a JSON object of token -> id");
  for (const auto& [text, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= static_cast<int64_t>(vocab.size())) {
      return format_error(spec.source + ": token \"" + text + "\" has id " + id.dump() + ", expected 0.." +
                          std::to_string(vocab.size() - 1));
    }
  }
  spec.tokens.resize(vocab.size());
  for (const auto& [text, id] : vocab.items()) spec.tokens[id.get<size_t>()] = text;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.tokens[id].empty()) return format_error(spec.source + ": no token has id " + std::to_string(id));
  }
  size_t line_number = 0;
  while (!merges_text.empty()) {
    const size_t newline = merges_text.find('\n');
    std::string_view line = merges_text.substr(0, newline);
    merges_text.remove_prefix(newline == std::string_view::npos ? merges_text.size() : newline + 1);
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ', 1);
    if (space == std::string_view::npos) {
      return format_error(spec.source + ": merges line " + std::to_string(line_number) + " has no space");
    }
    spec.merges.emplace_back(std::string(line.substr(0, space)), std::string(line.substr(space + 1)));
  }
  spec.pre_tokenizer = split_steps(std::move(regexes));
  return spec;
}

}  // namespace qrt
