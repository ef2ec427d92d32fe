// Generic fused dequantize-GEMV for any format in the list: correct for every format, used as the fallback and as
// the baseline the per-family kernels are measured against.
#pragma once

#include <cuda_runtime.h>

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// y[m, w.rows] = x[m, w.cols] · Wᵀ on the device. w's pointers, x and y are device pointers; 1 <= m <= 8.
Status gemv_generic(quant::FormatId format, const quant::QuantView& w, const float* x, int m, float* y,
                    cudaStream_t stream);

}  // namespace qrt::kernels
