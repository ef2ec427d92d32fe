// Row-wise RMSNorm: out = x / sqrt(mean(x²) + eps) * weight.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/linear/q8_activations.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// x, out: [rows, dim]; weight: [dim] (device pointers). out may alias x exactly.
// Bytes moved: x read twice (the second time mostly from L1/L2), out written once.
// q8 (optional): also write out in the integer-dot GEMV's activation layout (q8_activations.hpp), bit-equal to
// quantize_q8_activations(out); dim must then be a multiple of 32.
Status rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out,
                cudaStream_t stream, Q8Activations q8 = {});

// x += delta, then rms_norm of the new x into out, in one kernel (the same values as add then rms_norm). Each
// element is read and written by one thread, so out may be x or delta.
Status add_rms_norm(float* x, const float* delta, const float* weight, int64_t rows, int64_t dim, float eps,
                    float* out, cudaStream_t stream, Q8Activations q8 = {});

}  // namespace qrt::kernels
