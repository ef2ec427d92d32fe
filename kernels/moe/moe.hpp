// Mixture-of-experts routing and combining.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/moe/moe_routing.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// The most experts moe_route handles (each lane of a warp tracks its share of them in one 32-bit mask).
constexpr int kMaxRoutedExperts = 1024;

// Router: softmax over each row of logits (in double, as the CPU reference), then the top_k largest probabilities
// in decreasing order, ties going to the lower expert id; renormalize divides the selected ones by their sum.
//   logits: [tokens, experts]; ids: [tokens, top_k] int32; weights: [tokens, top_k] (device pointers).
// A row whose probabilities are NaN (NaN logits) selects nothing: its ids are -1 and its weights NaN.
Status moe_route(const float* logits, int64_t tokens, int experts, int top_k, bool renormalize, int32_t* ids,
                 float* weights, cudaStream_t stream);

// DeepSeek's router (Backend::moe_route_grouped states the rule), one warp per token with the scores in shared
// memory. routing.choice_bias is a device pointer or null.
constexpr int kMaxGroupedRoutedExperts = 512;
constexpr int kMaxExpertGroups = 64;
Status moe_route_grouped(const float* logits, int64_t tokens, int experts, int top_k, const MoeRouting& routing,
                         int32_t* ids, float* weights, cudaStream_t stream);

// out[t] = sum_s weights[t, s] * y[t * top_k + s].  y: [tokens * top_k, dim]; weights: [tokens, top_k];
// out: [tokens, dim], overlapping neither input.
Status moe_combine(const float* y, const float* weights, int64_t tokens, int top_k, int64_t dim, float* out,
                   cudaStream_t stream);

}  // namespace qrt::kernels
