// The integer-dot decode GEMV of the legacy GGML blocks and the K-quants (see gemv_dp4a_launch.cuh).
#include "kernels/linear/gemv_dp4a_launch.cuh"
#include "kernels/linear/gemv_dp4a_formats.cuh"

namespace qrt::kernels::dp4a_launch {

std::optional<Status> launch_ggml(quant::FormatId format, std::span<const GemvPart> parts,
                                  Q8ConstActivations x, int m, cudaStream_t stream) {
  switch (format) {
    case quant::FormatId::kQ4_0: return launch<dp4a::Q4_0>(parts, x, m, stream);
    case quant::FormatId::kQ4_1: return launch<dp4a::Q4_1>(parts, x, m, stream);
    case quant::FormatId::kQ5_0: return launch<dp4a::Q5_0>(parts, x, m, stream);
    case quant::FormatId::kQ5_1: return launch<dp4a::Q5_1>(parts, x, m, stream);
    case quant::FormatId::kQ8_0: return launch<dp4a::Q8_0>(parts, x, m, stream);
    case quant::FormatId::kQ2_K: return launch<dp4a::Q2K>(parts, x, m, stream);
    case quant::FormatId::kQ3_K: return launch<dp4a::Q3K>(parts, x, m, stream);
    case quant::FormatId::kQ4_K: return launch<dp4a::Q4K>(parts, x, m, stream);
    case quant::FormatId::kQ5_K: return launch<dp4a::Q5K>(parts, x, m, stream);
    case quant::FormatId::kQ6_K: return launch<dp4a::Q6K>(parts, x, m, stream);
    default: return std::nullopt;  // another family's
  }
}

}  // namespace qrt::kernels::dp4a_launch
