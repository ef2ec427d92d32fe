// Token embedding lookup from a table in any format: out[t] = table[tokens[t]], decoded through the traits.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// table: [vocab, dim] device view; tokens: [n] int32; out: [n, dim] fp32 (device pointers).
// A token id outside [0, vocab) yields a NaN row (the device cannot report it): validate ids before upload.
Status embed(quant::FormatId format, const quant::QuantView& table, const int32_t* tokens, int64_t n, float* out,
             cudaStream_t stream);

}  // namespace qrt::kernels
