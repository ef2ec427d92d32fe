#include "tokenizer_fuzz_body.hpp"

#include <cstdlib>
#include <string>

#include "models/tokenizer/tokenizer.hpp"
#include "models/tokenizer/unicode.hpp"

namespace qrt::fuzz {

namespace {

// A small byte-level BPE (every byte plus a few merges) and a small SentencePiece, built once.
const Tokenizer& byte_level_tokenizer() {
  static const Tokenizer tokenizer = [] {
    TokenizerSpec spec;
    spec.model = TokenizerModelKind::kBpe;
    spec.byte_level = true;
    for (int b = 0; b < 256; ++b) spec.tokens.emplace_back(tokenizer_detail::byte_to_unicode(static_cast<uint8_t>(b)));
    spec.tokens.push_back("\xC4\xA0t");
    spec.tokens.push_back("he");
    spec.tokens.push_back("<|end|>");
    spec.types.assign(spec.tokens.size(), TokenType::kNormal);
    spec.types.back() = TokenType::kControl;
    spec.merges = {{"\xC4\xA0", "t"}, {"h", "e"}};
    AddedToken end;
    end.id = 258;
    end.content = "<|end|>";
    end.special = true;
    spec.added_tokens.push_back(end);
    PreTokenizerStep step = PreTokenizerStep::of_kind(PreTokenizerStep::Kind::kByteLevel);
    step.add_prefix_space = false;
    spec.pre_tokenizer.push_back(step);
    return std::move(Tokenizer::create(std::move(spec)).value());
  }();
  return tokenizer;
}

const Tokenizer& sentencepiece_tokenizer() {
  static const Tokenizer tokenizer = [] {
    GgufTokenizerMetadata meta;
    meta.source = "fuzz";
    meta.model = "llama";
    meta.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "\xE2\x96\x81" "a"};
    meta.scores = {0, 0, 0, -1, -2, -3};
    meta.token_types = {2, 3, 3, 1, 1, 1};
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      meta.tokens.push_back(name);
      meta.scores.push_back(0);
      meta.token_types.push_back(6);
    }
    return std::move(Tokenizer::create(std::move(tokenizer_spec_from_gguf(meta).value())).value());
  }();
  return tokenizer;
}

}  // namespace

void tokenizer_fuzz_one(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 5) {
    case 0: {
      auto spec = tokenizer_spec_from_hf_json(input);
      if (spec.ok()) {
        auto tokenizer = Tokenizer::create(std::move(spec).value());
        if (tokenizer.ok()) (void)tokenizer->encode("Hello world 123 \xE4\xB8\xAD", true, true);
      }
      break;
    }
    case 1:
      (void)tokenizer_spec_from_sentencepiece(input);
      break;
    case 2:
      (void)tokenizer_spec_from_tiktoken(input, {}, true);
      break;
    case 3: {
      const auto ids = byte_level_tokenizer().encode(input, true, data[0] & 8);
      if (!ids.ok()) std::abort();
      const auto text = byte_level_tokenizer().decode(*ids);
      if (!text.ok() || *text != input) std::abort();  // byte-level BPE loses nothing
      break;
    }
    case 4: {
      const auto ids = sentencepiece_tokenizer().encode(input, true, data[0] & 8);
      if (!ids.ok()) std::abort();
      const auto text = sentencepiece_tokenizer().decode(*ids, /*skip_special=*/true);
      // With byte fallback every byte survives; only the leading space is SentencePiece's to drop.
      if (!text.ok()) std::abort();
      break;
    }
  }
}

}  // namespace qrt::fuzz
