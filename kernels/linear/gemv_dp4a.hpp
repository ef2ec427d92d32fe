// Decode GEMV on integer dot products: y[m, rows] = x[m, cols] · Wᵀ for 1 <= m <= 8 with x quantized to two int8
// limbs per 32 columns (q8_activations.hpp) and W in a GGML integer block format (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
// Q4_K, Q5_K, Q6_K, the K- and IQ-quants, TQ1_0/TQ2_0, MXFP4 in GGML blocks), MLX affine AFQ4/AFQ8 (groups of 32,
// 64 or 128 with F16, BF16 or F32 scales and biases), OCP MXFP4 or NVFP4 (E2M1 codes whose doubled values are
// integers, an E8M0 scale byte per 32 columns or an E4M3 one per 16 times a tensor scale).
//
// Why: the float GEMV (gemv.hpp) spends about 4 instructions per weight turning codes into floats and multiplying,
// which on an H100 leaves it issue-bound at a third of the memory bandwidth; dp4a multiplies four codes by four x
// bytes in one instruction, so decoding costs about 1–2 instructions per weight and reading W sets the pace. x is
// quantized once per call (a small kernel), its two limbs keep about 15 bits, so results stay within about 2e-5
// (relative L2) of the float GEMV.
//
// Work split: a block of 32, 64 or 128 threads (the fewest warps that give each item of a row a thread: 128 for rows
// of 128 items or more, 64 for 4096 columns of Q4_K, 32 for a 1024-wide model's projections) owns R consecutive
// rows (R = 2 for tall matrices, else 1, so that 1024-row projections still give every SM several blocks; launch
// tuning may choose others). Its threads take the rows' items (gemv_dp4a_formats.cuh) in turn, load each item's
// weights once for all batch rows and each activation piece once for all R rows, accumulate in fp32 and reduce
// through shuffles and shared memory. Bytes moved: W once from DRAM, x's codes (2·m·cols bytes) and scales from
// L2/L1, y once.
#pragma once

#include <cuda_runtime.h>

#include <span>

#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/q8_activations.hpp"
#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// Whether gemv_dp4a handles this format and W (the format has a policy; W's data is 16-byte aligned; cols fit;
// AFQ: its scales and biases present and aligned, a group size and scale dtype the kernel knows; OCP MXFP4: its
// scale bytes present; NVFP4: the same).
bool gemv_dp4a_applies(quant::FormatId format, const quant::QuantView& w);

// y = x · Wᵀ with x already quantized (quantize_q8_activations of the fp32 x, m rows of w.cols columns).
Status gemv_dp4a(quant::FormatId format, const quant::QuantView& w, Q8ConstActivations x, int m, float* y,
                 cudaStream_t stream);

// Several matrices of one format and width applied to the same x (a layer's q, k and v projections, or gate and
// up) in one launch: the grid is the parts' blocks one after the other, each writing its own y. Saves the launches
// and the tail of the small matrices (a 1024-row k or v projection alone leaves most of a large GPU idle while its
// last blocks run). The sums are those of gemv_dp4a on each part, bit for bit. (GemvPart: gemv_batch.hpp.)
// rows_per_block: 0 for the plan's choice (2 when a part is tall, else 1), or forced as gemv_dp4a_rows; max_blocks
// as there.
Status gemv_dp4a_parts(quant::FormatId format, std::span<const GemvPart> parts, Q8ConstActivations x, int m,
                       cudaStream_t stream, int rows_per_block = 0, int64_t max_blocks = 0);

// gemv_dp4a with the rows per block forced (1, 2, or 4 or 8 at batch 1; 0: the plan's choice), for measuring the
// work split and for the backend's launch tuning, which times them per shape: a block issues each thread's loads
// for all its rows at once, so more rows per block keep more bytes in flight per SM and read x once for more rows,
// at the price of fewer blocks. The sums are gemv_dp4a's, bit for bit. max_blocks > 0 (one x row only)
// launches at most that many blocks, each looping over the row groups of blocks b, b + max_blocks, ... with the next
// one's rows prefetched to L2 (a grid of a few blocks per SM that keeps loading where a block per row group ends
// after one round of loads); the sums are the same, bit for bit. 0: a block per row group.
Status gemv_dp4a_rows(quant::FormatId format, const quant::QuantView& w, Q8ConstActivations x, int m, float* y,
                      cudaStream_t stream, int rows_per_block, int64_t max_blocks = 0);

}  // namespace qrt::kernels
