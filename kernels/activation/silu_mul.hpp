// The gated MLP activations: SwiGLU's out = silu(gate) * up, silu(g) = g / (1 + exp(-g)), and GeGLU's with the
// tanh GELU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/q8_activations.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// gate, up, out: [n] device pointers; out may alias gate or up exactly.
// q8 (optional): also write out, as rows of a multiple of 32 columns, in the integer-dot GEMV's activation layout
// (q8_activations.hpp), bit-equal to quantize_q8_activations(out); n must then be a multiple of 32.
Status silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream,
                Q8Activations q8 = {});

// GeGLU's gating, the same contract: out = gelu_tanh(gate) * up, gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi)
// (g + 0.044715 g³))).
Status gelu_tanh_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream,
                     Q8Activations q8 = {});

// gpt-oss's: out = g sigmoid(alpha g) (u + 1), g = min(gate, limit), u = clamp(up, -limit, limit).
Status swiglu_clamped_mul(const float* gate, const float* up, int64_t n, float alpha, float limit, float* out,
                          cudaStream_t stream, Q8Activations q8 = {});

}  // namespace qrt::kernels
