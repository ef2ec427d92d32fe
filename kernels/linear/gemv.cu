#include "kernels/linear/gemv.hpp"
#include "kernels/linear/gemv_generic.hpp"

namespace qrt::kernels {

Status gemv(quant::FormatId format, const quant::QuantView& w, const float* x, int m, float* y, cudaStream_t stream) {
  return gemv_generic(format, w, x, m, y, stream);
}

std::string gemv_kernel_name(quant::FormatId format, int m) { return "gemv_generic"; }

}  // namespace qrt::kernels
