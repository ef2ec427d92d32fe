#include "runtime/src/gguf_tokenizer.hpp"

#include <string>

namespace qrt {
namespace {

constexpr std::string_view kTokens = "tokenizer.ggml.tokens";

Result<std::string> optional_string(const GgufMetadata& md, std::string_view key) {
  return md.get_or<std::string>(key, std::string());
}

Status read_optional_id(const GgufMetadata& md, std::string_view key, std::optional<int64_t>* out) {
  if (!md.contains(key)) return ok_status();
  QRT_ASSIGN_OR_RETURN(int64_t id, md.get_int(key));
  *out = id;
  return ok_status();
}

Status read_optional_flag(const GgufMetadata& md, std::string_view key, std::optional<bool>* out) {
  if (!md.contains(key)) return ok_status();
  QRT_ASSIGN_OR_RETURN(bool flag, md.get_bool(key));
  *out = flag;
  return ok_status();
}

}  // namespace

bool gguf_has_tokenizer(const GgufMetadata& metadata) { return metadata.contains(kTokens); }

Result<GgufTokenizerMetadata> gguf_tokenizer_metadata(const GgufMetadata& md) {
  GgufTokenizerMetadata meta;
  meta.source = md.source();
  QRT_ASSIGN_OR_RETURN(meta.model, md.get_string("tokenizer.ggml.model"));
  QRT_ASSIGN_OR_RETURN(meta.pre, optional_string(md, "tokenizer.ggml.pre"));
  QRT_ASSIGN_OR_RETURN(const std::vector<std::string>* tokens, md.get_string_array(kTokens));
  meta.tokens = *tokens;
  if (md.contains("tokenizer.ggml.scores")) {
    QRT_ASSIGN_OR_RETURN(const std::vector<float>* scores, md.get_f32_array("tokenizer.ggml.scores"));
    meta.scores = *scores;
  }
  if (md.contains("tokenizer.ggml.token_type")) {
    QRT_ASSIGN_OR_RETURN(std::vector<int64_t> types, md.get_int_array("tokenizer.ggml.token_type"));
    meta.token_types.reserve(types.size());
    for (int64_t t : types) {
      // Out-of-range codes become "undefined" in the front end; clamp so the narrowing cannot wrap into range.
      meta.token_types.push_back(t < 0 || t > 1000 ? -1 : static_cast<int32_t>(t));
    }
  }
  if (md.contains("tokenizer.ggml.merges")) {
    QRT_ASSIGN_OR_RETURN(const std::vector<std::string>* merges, md.get_string_array("tokenizer.ggml.merges"));
    meta.merges = *merges;
  }
  QRT_TRY(read_optional_id(md, "tokenizer.ggml.bos_token_id", &meta.bos_id));
  QRT_TRY(read_optional_id(md, "tokenizer.ggml.eos_token_id", &meta.eos_id));
  QRT_TRY(read_optional_id(md, "tokenizer.ggml.eot_token_id", &meta.eot_id));
  QRT_TRY(read_optional_id(md, "tokenizer.ggml.eom_token_id", &meta.eom_id));
  QRT_TRY(read_optional_id(md, "tokenizer.ggml.unknown_token_id", &meta.unk_id));
  QRT_TRY(read_optional_id(md, "tokenizer.ggml.seperator_token_id", &meta.sep_id));  // sic, as llama.cpp spells it
  QRT_TRY(read_optional_id(md, "tokenizer.ggml.padding_token_id", &meta.pad_id));
  QRT_TRY(read_optional_id(md, "tokenizer.ggml.cls_token_id", &meta.cls_id));
  QRT_TRY(read_optional_id(md, "tokenizer.ggml.mask_token_id", &meta.mask_id));
  QRT_TRY(read_optional_flag(md, "tokenizer.ggml.add_bos_token", &meta.add_bos));
  QRT_TRY(read_optional_flag(md, "tokenizer.ggml.add_eos_token", &meta.add_eos));
  QRT_TRY(read_optional_flag(md, "tokenizer.ggml.add_sep_token", &meta.add_sep));
  QRT_TRY(read_optional_flag(md, "tokenizer.ggml.add_space_prefix", &meta.add_space_prefix));
  QRT_TRY(read_optional_flag(md, "tokenizer.ggml.remove_extra_whitespaces", &meta.remove_extra_whitespaces));
  QRT_ASSIGN_OR_RETURN(meta.chat_template, optional_string(md, "tokenizer.chat_template"));
  return meta;
}

}  // namespace qrt
