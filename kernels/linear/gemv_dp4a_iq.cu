// The integer-dot decode GEMV of the grid i-quants (see gemv_dp4a_launch.cuh).
#include "kernels/linear/gemv_dp4a_launch.cuh"
#include "kernels/linear/gemv_dp4a_iquants.cuh"

namespace qrt::kernels::dp4a_launch {

std::optional<Status> launch_iq_grids(quant::FormatId format, std::span<const GemvPart> parts,
                                      Q8ConstActivations x, int m, cudaStream_t stream) {
  switch (format) {
    case quant::FormatId::kIQ2_XXS: return launch<dp4a::Iq2Xxs>(parts, x, m, stream);
    case quant::FormatId::kIQ2_XS: return launch<dp4a::Iq2Xs>(parts, x, m, stream);
    case quant::FormatId::kIQ2_S: return launch<dp4a::Iq2S>(parts, x, m, stream);
    case quant::FormatId::kIQ3_XXS: return launch<dp4a::Iq3Xxs>(parts, x, m, stream);
    case quant::FormatId::kIQ3_S: return launch<dp4a::Iq3S>(parts, x, m, stream);
    case quant::FormatId::kIQ1_S: return launch<dp4a::Iq1S>(parts, x, m, stream);
    case quant::FormatId::kIQ1_M: return launch<dp4a::Iq1M>(parts, x, m, stream);
    default: return std::nullopt;  // another family's
  }
}

}  // namespace qrt::kernels::dp4a_launch
