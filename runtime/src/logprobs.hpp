// Log-probabilities of a generated token from the raw logits of its step (GenerateOptions::logprobs).
#pragma once

#include <cstdint>
#include <span>

#include "qrt/runtime.hpp"

namespace qrt::api_detail {

// log-softmax of `logits` at `token`, and the `top` most likely tokens (clamped to the vocabulary), most likely
// first, ties by the lower id. NaN logits count as -inf; sums run in double.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t token, int top);

}  // namespace qrt::api_detail
