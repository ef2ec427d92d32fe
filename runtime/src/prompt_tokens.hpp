// The token ids of a prompt as a session feeds them: plain text (PromptOptions) or a conversation rendered with the
// model's chat template. Shared by Session and Engine so that both run the same ids for the same request.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "qrt/runtime.hpp"
#include "runtime/src/model_impl.hpp"

namespace qrt::api_detail {

// `first`: the context is empty, so the tokenizer's BOS (when options.add_special) starts it.
Result<std::vector<int32_t>> text_prompt_ids(const ModelImpl& m, std::string_view text, const PromptOptions& options,
                                             bool first);
Result<std::vector<int32_t>> chat_prompt_ids(const Model& model, const ModelImpl& m,
                                             const std::vector<ChatMessage>& messages);

}  // namespace qrt::api_detail
