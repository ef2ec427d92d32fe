// Dequantization of whole rows of a packed matrix, for any format in the list: to fp16 for the prefill path
// (dequantize a tile of W, then cuBLAS on the tensor cores) and to fp32 for the embedding lookup (gather rows by
// token id).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// out[r, :] = W[first_row + r, :] for r in [0, rows), rounded to fp16 (the tensor-core prefill GEMM).  w: device
// view; out: [rows, w.cols] on the device. The caller keeps [first_row, first_row + rows) inside [0, w.rows).
Status dequantize_rows_half(quant::FormatId format, const quant::QuantView& w, int64_t first_row, int64_t rows,
                            __half* out, cudaStream_t stream);

// Its two kernels, both agreeing with the CPU reference's decode rounded to fp16 (up to one fp32 rounding):
// - by policy (dequant_policy.cu: coalesced, no shared memory), taken whenever it applies: a format with an int8
//   tensor-core weight policy (gemm_q8_mma_applies: W 16-byte aligned, its width a whole number of the policy's
//   steps) and out 8-byte aligned;
// - generic, for every format: the format traits' decode, a decode block per lane staged in shared memory; the
//   one-element formats and AFQ eight consecutive elements per thread and one 16-byte store instead, when out is
//   16-byte aligned and the width a multiple of 8.
bool dequantize_rows_half_by_policy_applies(quant::FormatId format, const quant::QuantView& w, const __half* out);
Status dequantize_rows_half_by_policy(quant::FormatId format, const quant::QuantView& w, int64_t first_row,
                                      int64_t rows, __half* out, cudaStream_t stream);
Status dequantize_rows_half_generic(quant::FormatId format, const quant::QuantView& w, int64_t first_row,
                                    int64_t rows, __half* out, cudaStream_t stream);

// out[i] = x[i] rounded to fp16, i in [0, n).
Status to_half(const float* x, int64_t n, __half* out, cudaStream_t stream);

// out[r, :] = W[row_ids[r], :] for r in [0, rows).  row_ids: [rows] int32 on the device. An id outside
// [0, w.rows) cannot be reported from the device: its output row is filled with NaN (never an out-of-bounds read),
// so callers validate ids on the host.
Status gather_rows(quant::FormatId format, const quant::QuantView& w, const int32_t* row_ids, int64_t rows,
                   float* out, cudaStream_t stream);

}  // namespace qrt::kernels
