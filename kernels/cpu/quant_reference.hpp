// The CPU reference for every format: plain loops over the shared decode functions. This is the oracle the GPU
// kernels are tested against, so it favours obviously-correct over fast.
#pragma once

#include <cstdint>

#include "kernels/quant/formats.hpp"
#include "qrt/status.hpp"

namespace qrt::cpu {

// Checks that the view's shape and params are legal for the format (not the byte sizes: see part_sizes).
Status check_view(quant::FormatId format, const quant::QuantView& w);

// out: [w.rows, w.cols] row-major float32.
Status dequantize(quant::FormatId format, const quant::QuantView& w, float* out);

// y = x · Wᵀ.  x: [m, w.cols], y: [m, w.rows]. Accumulates in double so it can judge fp32 GPU kernels.
Status matmul(quant::FormatId format, const quant::QuantView& w, const float* x, int64_t m, float* y);

// Quantizes x: [rows, cols] with the format's reference quantizer.
Result<quant::QuantBuffers> quantize(quant::FormatId format, const float* x, int64_t rows, int64_t cols,
                                     const quant::QuantParams& params);

// Expected part sizes for a tensor of this format and shape (after check_params).
Result<quant::PartSizes> part_sizes(quant::FormatId format, int64_t rows, int64_t cols,
                                    const quant::QuantParams& params);

// A view over quantizer output.
quant::QuantView view_of(const quant::QuantBuffers& b, int64_t rows, int64_t cols, const quant::QuantParams& p);

}  // namespace qrt::cpu
