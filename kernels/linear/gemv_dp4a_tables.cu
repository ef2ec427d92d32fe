// The integer-dot decode GEMV of the table formats (IQ4_NL, IQ4_XS, MXFP4 in GGML blocks and OCP's, NVFP4), the ternary
// TQ1_0 and TQ2_0, and MLX affine AFQ4/AFQ8 (see gemv_dp4a_launch.cuh).
#include "kernels/linear/gemv_dp4a_launch.cuh"
#include "kernels/linear/gemv_dp4a_iquants.cuh"

namespace qrt::kernels::dp4a_launch {

namespace {
// AFQ's scale dtype becomes a template parameter here (gemv_dp4a_applies admitted only these three).
template <int Bits>
Status launch_afq(const Dp4aLaunch& l) {
  switch (l.parts[0].w.params.scale_type) {
    case quant::ScalarType::kF16: return launch<dp4a::Afq<Bits, quant::ScalarType::kF16>>(l);
    case quant::ScalarType::kBF16: return launch<dp4a::Afq<Bits, quant::ScalarType::kBF16>>(l);
    default: return launch<dp4a::Afq<Bits, quant::ScalarType::kF32>>(l);
  }
}
}  // namespace

std::optional<Status> launch_tables_and_afq(quant::FormatId format, const Dp4aLaunch& l) {
  switch (format) {
    case quant::FormatId::kIQ4_NL: return launch<dp4a::Iq4Nl>(l);
    case quant::FormatId::kIQ4_XS: return launch<dp4a::Iq4Xs>(l);
    case quant::FormatId::kTQ2_0: return launch<dp4a::Tq2>(l);
    case quant::FormatId::kTQ1_0: return launch<dp4a::Tq1>(l);
    case quant::FormatId::kMXFP4_GGML: return launch<dp4a::Mxfp4Ggml>(l);
    case quant::FormatId::kMXFP4: return launch<dp4a::Mxfp4Ocp>(l);
    case quant::FormatId::kNVFP4: return launch<dp4a::Nvfp4>(l);
    case quant::FormatId::kAFQ4: return launch_afq<4>(l);
    case quant::FormatId::kAFQ8: return launch_afq<8>(l);
    default: return std::nullopt;  // another family's
  }
}

}  // namespace qrt::kernels::dp4a_launch
