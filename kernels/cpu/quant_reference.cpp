#include "kernels/cpu/quant_reference.hpp"

#include <string>
#include <vector>

namespace qrt::cpu {
using namespace qrt::quant;

Status check_view(FormatId format, const QuantView& w) {
  return dispatch_format(format, [&](auto tag) -> Status {
    using T = typename decltype(tag)::Traits;
    Status s = T::check_params(w.rows, w.cols, w.params);
    if (!s.ok()) return s.with_context(std::string(format_name(format)) + " [" + std::to_string(w.rows) + ", " +
                                       std::to_string(w.cols) + "]");
    const int be = block_elems_for(T::block_elems, w.params);
    if (be <= 0 || be > kMaxBlockElems || w.cols % be != 0)
      return internal_error(std::string(format_name(format)) + ": block length " + std::to_string(be) +
                            " does not tile a row of " + std::to_string(w.cols));
    return ok_status();
  });
}

Status dequantize(FormatId format, const QuantView& w, float* out) {
  QRT_TRY(check_view(format, w));
  dispatch_format(format, [&](auto tag) {
    using T = typename decltype(tag)::Traits;
    const int be = block_elems_for(T::block_elems, w.params);
    for (int64_t r = 0; r < w.rows; ++r)
      for (int64_t b = 0; b < w.cols / be; ++b) T::decode_block(w, r, b, out + r * w.cols + b * be);
  });
  return ok_status();
}

Status matmul(FormatId format, const QuantView& w, const float* x, int64_t m, float* y) {
  QRT_TRY(check_view(format, w));
  std::vector<float> row(static_cast<size_t>(w.cols));
  dispatch_format(format, [&](auto tag) {
    using T = typename decltype(tag)::Traits;
    const int be = block_elems_for(T::block_elems, w.params);
    for (int64_t r = 0; r < w.rows; ++r) {
      for (int64_t b = 0; b < w.cols / be; ++b) T::decode_block(w, r, b, row.data() + b * be);
      for (int64_t i = 0; i < m; ++i) {
        double acc = 0.0;
        const float* xi = x + i * w.cols;
        for (int64_t c = 0; c < w.cols; ++c) acc += static_cast<double>(xi[c]) * row[static_cast<size_t>(c)];
        y[i * w.rows + r] = static_cast<float>(acc);
      }
    }
  });
  return ok_status();
}

Result<QuantBuffers> quantize(FormatId format, const float* x, int64_t rows, int64_t cols, const QuantParams& p) {
  return dispatch_format(format, [&](auto tag) -> Result<QuantBuffers> {
    using T = typename decltype(tag)::Traits;
    if constexpr (T::has_quantizer) {
      QuantBuffers out;
      QRT_TRY(T::check_params(rows, cols, p));
      QRT_TRY(T::quantize(x, rows, cols, p, &out));
      return out;
    } else {
      return unsupported(std::string("no quantizer for format ") + std::string(format_name(format)));
    }
  });
}

Result<PartSizes> part_sizes(FormatId format, int64_t rows, int64_t cols, const QuantParams& p) {
  return dispatch_format(format, [&](auto tag) -> Result<PartSizes> {
    using T = typename decltype(tag)::Traits;
    QRT_TRY(T::check_params(rows, cols, p));
    return T::part_sizes(rows, cols, p);
  });
}

QuantView view_of(const QuantBuffers& b, int64_t rows, int64_t cols, const QuantParams& p) {
  QuantView v;
  v.data = b.data.data();
  v.scales = b.scales.empty() ? nullptr : b.scales.data();
  v.biases = b.biases.empty() ? nullptr : b.biases.data();
  v.rows = rows;
  v.cols = cols;
  v.params = p;
  return v;
}

}  // namespace qrt::cpu
