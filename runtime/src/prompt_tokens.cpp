#include "runtime/src/prompt_tokens.hpp"

namespace qrt::api_detail {

Result<std::vector<int32_t>> text_prompt_ids(const ModelImpl& m, std::string_view text, const PromptOptions& options,
                                             bool first) {
  return m.tokenizer->encode(text, options.add_special && first, options.parse_special);
}

Result<std::vector<int32_t>> chat_prompt_ids(const Model& model, const ModelImpl& m,
                                             const std::vector<ChatMessage>& messages) {
  QRT_ASSIGN_OR_RETURN(std::string text, model.render_chat(messages, /*add_generation_prompt=*/true));
  const Tokenizer& tok = *m.tokenizer;
  QRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tok.encode(text, /*add_special=*/true, /*parse_special=*/true));
  // Templates that write the BOS text themselves would get a second BOS from add_special.
  if (ids.size() >= 2 && tok.bos_id() >= 0 && ids[0] == tok.bos_id() && ids[1] == tok.bos_id())
    ids.erase(ids.begin());
  return ids;
}

}  // namespace qrt::api_detail
