// The integer-dot decode GEMV of the grid i-quants (see gemv_dp4a_launch.cuh).
#include "kernels/linear/gemv_dp4a_launch.cuh"
#include "kernels/linear/gemv_dp4a_iquants.cuh"

namespace qrt::kernels::dp4a_launch {

std::optional<Status> launch_iq_grids(quant::FormatId format, const quant::QuantView& w, Q8ConstActivations x, int m,
                                      float* y, cudaStream_t stream) {
  switch (format) {
    case quant::FormatId::kIQ2_XXS: return launch<dp4a::Iq2Xxs>(w, x, m, y, stream);
    case quant::FormatId::kIQ2_XS: return launch<dp4a::Iq2Xs>(w, x, m, y, stream);
    case quant::FormatId::kIQ2_S: return launch<dp4a::Iq2S>(w, x, m, y, stream);
    case quant::FormatId::kIQ3_XXS: return launch<dp4a::Iq3Xxs>(w, x, m, y, stream);
    case quant::FormatId::kIQ3_S: return launch<dp4a::Iq3S>(w, x, m, y, stream);
    case quant::FormatId::kIQ1_S: return launch<dp4a::Iq1S>(w, x, m, y, stream);
    case quant::FormatId::kIQ1_M: return launch<dp4a::Iq1M>(w, x, m, y, stream);
    default: return std::nullopt;  // another family's
  }
}

}  // namespace qrt::kernels::dp4a_launch
