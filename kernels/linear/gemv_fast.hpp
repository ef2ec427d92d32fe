// Which formats have a per-family fast decode GEMV, as a compile-time table keyed by format: FastGemv<id> says
// "none" unless the format is declared below, and each declared format defines applies() and launch() in its
// family's .cu file (gemv_dense.cu, gemv_ggml.cu, gemv_afq.cu, gemv_mx.cu, gemv_fp8.cu). kernels::gemv() (gemv.cu) reaches them
// through quant::dispatch_format and `if constexpr (FastGemv<id>::kAvailable)`, so there is no second switch over
// formats.
#pragma once

#include <cuda_runtime.h>

#include <span>
#include <string_view>

#include "kernels/linear/gemv_batch.hpp"
#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::kernels {

template <quant::FormatId Id>
struct FastGemv {
  static constexpr bool kAvailable = false;
};

// applies(w, x): whether the fast kernel can run on these inputs (alignment, shape, params); when it cannot, gemv()
// runs the generic kernel. launch(): enqueue y[m, w.rows] = x[m, w.cols] · Wᵀ for 1 <= m <= 8 (checked by gemv()).
#define QRT_DECLARE_FAST_GEMV(ID, NAME)                                                                     \
  template <>                                                                                               \
  struct FastGemv<quant::FormatId::k##ID> {                                                                 \
    static constexpr bool kAvailable = true;                                                                \
    static constexpr std::string_view kName = NAME;                                                         \
    static bool applies(const quant::QuantView& w, const float* x);                                         \
    static Status launch(const quant::QuantView& w, const float* x, int m, float* y, cudaStream_t stream); \
  };

QRT_DECLARE_FAST_GEMV(F32, "gemv_f32")
QRT_DECLARE_FAST_GEMV(F16, "gemv_f16")
QRT_DECLARE_FAST_GEMV(BF16, "gemv_bf16")
QRT_DECLARE_FAST_GEMV(Q4_0, "gemv_q4_0")
QRT_DECLARE_FAST_GEMV(Q8_0, "gemv_q8_0")
QRT_DECLARE_FAST_GEMV(Q4_K, "gemv_q4_k")
QRT_DECLARE_FAST_GEMV(Q5_K, "gemv_q5_k")
QRT_DECLARE_FAST_GEMV(Q6_K, "gemv_q6_k")
QRT_DECLARE_FAST_GEMV(AFQ2, "gemv_afq2")
QRT_DECLARE_FAST_GEMV(AFQ3, "gemv_afq3")
QRT_DECLARE_FAST_GEMV(AFQ4, "gemv_afq4")
QRT_DECLARE_FAST_GEMV(AFQ5, "gemv_afq5")
QRT_DECLARE_FAST_GEMV(AFQ6, "gemv_afq6")
QRT_DECLARE_FAST_GEMV(AFQ8, "gemv_afq8")
QRT_DECLARE_FAST_GEMV(MXFP4, "gemv_mxfp4")
QRT_DECLARE_FAST_GEMV(NVFP4, "gemv_nvfp4")
QRT_DECLARE_FAST_GEMV(MXFP8, "gemv_mxfp8")
QRT_DECLARE_FAST_GEMV(FP8, "gemv_fp8")
QRT_DECLARE_FAST_GEMV(FP8_BLOCK, "gemv_fp8_block")

#undef QRT_DECLARE_FAST_GEMV

// The dense kernel over several matrices of one format (F32, F16 or BF16) and width sharing x, in one launch (a
// layer's q/k/v or gate/up from an unquantized checkpoint): the sums of each part's own launch, bit for bit.
bool gemv_dense_parts_apply(quant::FormatId format, std::span<const GemvPart> parts, const float* x);
Status gemv_dense_parts(quant::FormatId format, std::span<const GemvPart> parts, const float* x, int m,
                        cudaStream_t stream);

}  // namespace qrt::kernels
