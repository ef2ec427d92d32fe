// Decode-time linear layer: y[m, rows] = x[m, cols] · Wᵀ for 1 <= m <= 8, W in any listed format.
// Chooses the fastest kernel qrt has for the format (a per-family kernel where one exists, else the generic one).
//
// Inputs (all device pointers): w's parts as the format defines them, rows packed back to back; x: [m, cols] and
// y: [m, rows], both contiguous fp32. The per-family kernels additionally need W's data and x 16-byte aligned
// (cudaMalloc gives 256), each packed row a whole number of 16 bytes (Q4_0, Q8_0, Q4_K, Q5_K: cols a multiple of
// 256; Q6_K: of 2048; F32, F16, BF16: of 8) and scale arrays aligned to their element size; inputs that miss any of
// these run the generic kernel, which needs no alignment beyond x's and y's floats. gemv_kernel_name(format, w, x, m)
// says which runs.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

Status gemv(quant::FormatId format, const quant::QuantView& w, const float* x, int m, float* y, cudaStream_t stream);

// The kernel gemv() runs for exactly these inputs ("gemv_q4_k", ..., or "gemv_generic").
std::string gemv_kernel_name(quant::FormatId format, const quant::QuantView& w, const float* x, int m);

// The kernel gemv() runs for this format on well-aligned inputs (for benchmark labels and reports).
std::string gemv_kernel_name(quant::FormatId format, int m);

}  // namespace qrt::kernels
