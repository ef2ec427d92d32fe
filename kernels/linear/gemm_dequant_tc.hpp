// Prefill GEMM fused with dequantization, on the tensor cores: y[n, out] = x[n, in] · Wᵀ for a packed W in any
// format. A block computes 64 rows of W against 64 tokens: per chunk of columns it decodes its W rows into shared
// memory as fp16 (the format traits' decode_block, so every format), rounds its x rows to fp16 beside them, and
// multiplies with 16x16x16 wmma products accumulated in fp32. W is read once per 64 tokens in its packed form; the
// dequantize-then-cuBLAS path (CudaBackend::linear_gemm) writes and reads a fp16 copy of W instead. Which is faster
// per shape is for a GPU to say: QRT_CUDA_GEMM chooses (see CudaBackend::create).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

// Columns one step decodes: 64 for formats whose blocks divide 64 (dense, GGML 32-blocks, AFQ g32/g64, ...), the
// block itself for 128- and 256-column blocks (AFQ g128, K-quants); 0 when the format or row length does not fit
// (blocks of another size, or in not a multiple of the step).
int gemm_dequant_tc_chunk(quant::FormatId format, const quant::QuantView& w);

// Dynamic shared memory for a chunk width (over 48 KiB for 256: the launch opts in).
uint64_t gemm_dequant_tc_shared_bytes(int chunk);

// x: [n, w.cols] fp32; y: [n, w.rows] fp32 (row-major, written, not accumulated). Needs gemm_dequant_tc_chunk > 0.
Status gemm_dequant_tc(quant::FormatId format, const quant::QuantView& w, const float* x, int64_t n, float* y,
                       cudaStream_t stream);

}  // namespace qrt::kernels
