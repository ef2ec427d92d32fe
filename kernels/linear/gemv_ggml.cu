// Fast decode GEMV for the GGML block formats Q4_0, Q8_0, Q4_K, Q5_K, Q6_K: the staged kernel (gemv_staged.cuh)
// with the lane policies of gemv_lanes_ggml.hpp. Bytes each must move and the expected bound are stated there and
// in bench/NOTES-gemv.md.
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/gemv_lanes_ggml.hpp"
#include "kernels/linear/gemv_staged.cuh"

namespace qrt::kernels {

// The GGML block formats carry their scales inside the blocks, so the scale dtype argument is irrelevant.
#define QRT_DEFINE_GGML_FAST_GEMV(ID)                                                                          \
  bool FastGemv<quant::FormatId::k##ID>::applies(const quant::QuantView& w, const float* x) {                  \
    using Policy = gemv_lanes::LanePolicy<quant::FormatId::k##ID, quant::ScalarType::kF32>::type;              \
    return gemv_staged::staged_applies<Policy>(w, x);                                                          \
  }                                                                                                            \
  Status FastGemv<quant::FormatId::k##ID>::launch(const quant::QuantView& w, const float* x, int m, float* y, \
                                                  cudaStream_t stream) {                                      \
    using Policy = gemv_lanes::LanePolicy<quant::FormatId::k##ID, quant::ScalarType::kF32>::type;              \
    return gemv_staged::launch_staged<Policy>(kName.data(), w, x, m, y, stream);                               \
  }

QRT_DEFINE_GGML_FAST_GEMV(Q4_0)
QRT_DEFINE_GGML_FAST_GEMV(Q8_0)
QRT_DEFINE_GGML_FAST_GEMV(Q4_K)
QRT_DEFINE_GGML_FAST_GEMV(Q5_K)
QRT_DEFINE_GGML_FAST_GEMV(Q6_K)

#undef QRT_DEFINE_GGML_FAST_GEMV

}  // namespace qrt::kernels
