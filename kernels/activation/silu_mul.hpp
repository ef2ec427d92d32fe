// SwiGLU's gating: out = silu(gate) * up, silu(g) = g / (1 + exp(-g)).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/status.hpp"

namespace qrt::kernels {

// gate, up, out: [n] device pointers; out may alias gate or up exactly.
Status silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t stream);

}  // namespace qrt::kernels
