// Row-wise RMSNorm: out = x / sqrt(mean(x²) + eps) * weight.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "qrt/status.hpp"

namespace qrt::kernels {

// x, out: [rows, dim]; weight: [dim] (device pointers). out may alias x exactly.
// Bytes moved: x read twice (the second time mostly from L1/L2), out written once.
Status rms_norm(const float* x, const float* weight, int64_t rows, int64_t dim, float eps, float* out,
                cudaStream_t stream);

}  // namespace qrt::kernels
