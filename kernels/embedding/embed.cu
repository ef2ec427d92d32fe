#include "kernels/embedding/embed.hpp"
#include "kernels/linear/dequant.hpp"

namespace qrt::kernels {

// An embedding lookup is a row gather of the packed table; the one templated row decoder (linear/dequant.cu)
// does it, so no second instantiation per format is compiled.
Status embed(quant::FormatId format, const quant::QuantView& table, const int32_t* tokens, int64_t n, float* out,
             cudaStream_t stream) {
  Status s = gather_rows(format, table, tokens, n, out, stream);
  return s.ok() ? s : s.with_context("embed");
}

}  // namespace qrt::kernels
