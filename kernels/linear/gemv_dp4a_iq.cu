// The integer-dot decode GEMV of the grid i-quants (see gemv_dp4a_launch.cuh).
#include "kernels/linear/gemv_dp4a_launch.cuh"
#include "kernels/linear/gemv_dp4a_iquants.cuh"

namespace qrt::kernels::dp4a_launch {

std::optional<Status> launch_iq_grids(quant::FormatId format, const Dp4aLaunch& l) {
  switch (format) {
    case quant::FormatId::kIQ2_XXS: return launch<dp4a::Iq2Xxs>(l);
    case quant::FormatId::kIQ2_XS: return launch<dp4a::Iq2Xs>(l);
    case quant::FormatId::kIQ2_S: return launch<dp4a::Iq2S>(l);
    case quant::FormatId::kIQ3_XXS: return launch<dp4a::Iq3Xxs>(l);
    case quant::FormatId::kIQ3_S: return launch<dp4a::Iq3S>(l);
    case quant::FormatId::kIQ1_S: return launch<dp4a::Iq1S>(l);
    case quant::FormatId::kIQ1_M: return launch<dp4a::Iq1M>(l);
    default: return std::nullopt;  // another family's
  }
}

}  // namespace qrt::kernels::dp4a_launch
