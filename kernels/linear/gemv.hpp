// Decode-time linear layer: y[m, rows] = x[m, cols] · Wᵀ for 1 <= m <= 8, W in any listed format.
// Chooses the fastest kernel qrt has for the format (a per-family kernel where one exists, else the generic one).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

Status gemv(quant::FormatId format, const quant::QuantView& w, const float* x, int m, float* y, cudaStream_t stream);

// Which kernel gemv() runs for this format and batch (for benchmark labels and reports).
std::string gemv_kernel_name(quant::FormatId format, int m);

}  // namespace qrt::kernels
