// The integer-dot decode GEMV of the table formats (IQ4_NL, IQ4_XS, GGML's MXFP4 blocks), the ternary
// TQ1_0 and TQ2_0, and MLX affine AFQ4/AFQ8 (see gemv_dp4a_launch.cuh).
#include "kernels/linear/gemv_dp4a_launch.cuh"
#include "kernels/linear/gemv_dp4a_iquants.cuh"

namespace qrt::kernels::dp4a_launch {

namespace {
// AFQ's scale dtype becomes a template parameter here (gemv_dp4a_applies admitted only these three).
template <int Bits>
Status launch_afq(std::span<const GemvPart> parts, Q8ConstActivations x, int m, cudaStream_t stream) {
  switch (parts[0].w.params.scale_type) {
    case quant::ScalarType::kF16: return launch<dp4a::Afq<Bits, quant::ScalarType::kF16>>(parts, x, m, stream);
    case quant::ScalarType::kBF16: return launch<dp4a::Afq<Bits, quant::ScalarType::kBF16>>(parts, x, m, stream);
    default: return launch<dp4a::Afq<Bits, quant::ScalarType::kF32>>(parts, x, m, stream);
  }
}
}  // namespace

std::optional<Status> launch_tables_and_afq(quant::FormatId format, std::span<const GemvPart> parts,
                                            Q8ConstActivations x, int m, cudaStream_t stream) {
  switch (format) {
    case quant::FormatId::kIQ4_NL: return launch<dp4a::Iq4Nl>(parts, x, m, stream);
    case quant::FormatId::kIQ4_XS: return launch<dp4a::Iq4Xs>(parts, x, m, stream);
    case quant::FormatId::kTQ2_0: return launch<dp4a::Tq2>(parts, x, m, stream);
    case quant::FormatId::kTQ1_0: return launch<dp4a::Tq1>(parts, x, m, stream);
    case quant::FormatId::kMXFP4_GGML: return launch<dp4a::Mxfp4Ggml>(parts, x, m, stream);
    case quant::FormatId::kAFQ4: return launch_afq<4>(parts, x, m, stream);
    case quant::FormatId::kAFQ8: return launch_afq<8>(parts, x, m, stream);
    default: return std::nullopt;  // another family's
  }
}

}  // namespace qrt::kernels::dp4a_launch
