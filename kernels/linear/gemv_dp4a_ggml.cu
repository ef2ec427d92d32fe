// The integer-dot decode GEMV of the legacy GGML blocks and the K-quants (see gemv_dp4a_launch.cuh).
#include "kernels/linear/gemv_dp4a_launch.cuh"
#include "kernels/linear/gemv_dp4a_formats.cuh"

namespace qrt::kernels::dp4a_launch {

std::optional<Status> launch_ggml(quant::FormatId format, const Dp4aLaunch& l) {
  switch (format) {
    case quant::FormatId::kQ4_0: return launch<dp4a::Q4_0>(l);
    case quant::FormatId::kQ4_1: return launch<dp4a::Q4_1>(l);
    case quant::FormatId::kQ5_0: return launch<dp4a::Q5_0>(l);
    case quant::FormatId::kQ5_1: return launch<dp4a::Q5_1>(l);
    case quant::FormatId::kQ8_0: return launch<dp4a::Q8_0>(l);
    case quant::FormatId::kQ2_K: return launch<dp4a::Q2K>(l);
    case quant::FormatId::kQ3_K: return launch<dp4a::Q3K>(l);
    case quant::FormatId::kQ4_K: return launch<dp4a::Q4K>(l);
    case quant::FormatId::kQ5_K: return launch<dp4a::Q5K>(l);
    case quant::FormatId::kQ6_K: return launch<dp4a::Q6K>(l);
    default: return std::nullopt;  // another family's
  }
}

}  // namespace qrt::kernels::dp4a_launch
