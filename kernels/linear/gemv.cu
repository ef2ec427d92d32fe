#include "kernels/linear/gemv.hpp"

#include "kernels/linear/gemv_batch.hpp"
#include "kernels/linear/gemv_fast.hpp"
#include "kernels/linear/gemv_generic.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt::kernels {

Status gemv(quant::FormatId format, const quant::QuantView& w, const float* x, int m, float* y, cudaStream_t stream) {
  const std::string name(quant::format_name(format));
  if (m < 1 || m > kGemvMaxBatch)
    return invalid_argument("gemv: batch " + std::to_string(m) + " not in 1.." + std::to_string(kGemvMaxBatch));
  if (w.data == nullptr || x == nullptr || y == nullptr) return invalid_argument("gemv " + name + ": null pointer");
  return quant::dispatch_format(format, [&](auto tag) -> Status {
    using Traits = typename decltype(tag)::Traits;
    constexpr quant::FormatId id = decltype(tag)::id;
    // Shape and params first: both kernels trust them (block size, group size, scale dtype).
    Status legal = Traits::check_params(w.rows, w.cols, w.params);
    if (!legal.ok()) return legal.with_context("gemv " + name);
    const quant::PartSizes parts = Traits::part_sizes(w.rows, w.cols, w.params);
    if ((parts.scales != 0 && w.scales == nullptr) || (parts.biases != 0 && w.biases == nullptr))
      return invalid_argument("gemv " + name + ": the format needs its scales/biases parts, found a null pointer");
    if constexpr (FastGemv<id>::kAvailable) {
      if (FastGemv<id>::applies(w, x)) return FastGemv<id>::launch(w, x, m, y, stream);
    }
    return gemv_generic(format, w, x, m, y, stream);
  });
}

std::string gemv_kernel_name(quant::FormatId format, const quant::QuantView& w, const float* x, int /*m*/) {
  return quant::dispatch_format(format, [&](auto tag) -> std::string {
    constexpr quant::FormatId id = decltype(tag)::id;
    if constexpr (FastGemv<id>::kAvailable) {
      if (FastGemv<id>::applies(w, x)) return std::string(FastGemv<id>::kName);
    }
    return "gemv_generic";
  });
}

std::string gemv_kernel_name(quant::FormatId format, int /*m*/) {
  return quant::dispatch_format(format, [&](auto tag) -> std::string {
    constexpr quant::FormatId id = decltype(tag)::id;
    if constexpr (FastGemv<id>::kAvailable) return std::string(FastGemv<id>::kName);
    return "gemv_generic";
  });
}

}  // namespace qrt::kernels
