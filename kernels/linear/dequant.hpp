// Generic dequantization of whole rows of a packed matrix into fp32, for any format in the list (through the
// format traits' decode_block). Serves the first prefill path (dequantize a tile of W, then cuBLAS) and the
// embedding lookup (gather rows by token id).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// out[r, :] = W[first_row + r, :] for r in [0, rows).  w: device view; out: [rows, w.cols] fp32 on the device.
// The caller keeps [first_row, first_row + rows) inside [0, w.rows).
Status dequantize_rows(quant::FormatId format, const quant::QuantView& w, int64_t first_row, int64_t rows,
                       float* out, cudaStream_t stream);

// out[r, :] = W[row_ids[r], :] for r in [0, rows).  row_ids: [rows] int32 on the device. An id outside
// [0, w.rows) cannot be reported from the device: its output row is filled with NaN (never an out-of-bounds read),
// so callers validate ids on the host.
Status gather_rows(quant::FormatId format, const quant::QuantView& w, const int32_t* row_ids, int64_t rows,
                   float* out, cudaStream_t stream);

}  // namespace qrt::kernels
