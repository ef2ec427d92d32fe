// The loader's output unit: one weight as it sits in a memory-mapped file, zero-copy.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/quant/format_list.hpp"

namespace qrt {

// Bytes inside a mapping (or any buffer that outlives the span).
struct ByteSpan {
  const uint8_t* data = nullptr;
  uint64_t size = 0;
  bool empty() const { return size == 0; }
};

// A weight: name, format, logical shape and the byte spans of its parts. Spans point into the file mapping held
// by the owning ModelSource; nothing is copied or dequantized.
struct QuantTensor {
  std::string name;                      // as stored in the file (GGUF "blk.0.attn_q.weight", UQFF key + ".weight")
  quant::FormatId format = quant::FormatId::kF32;
  std::vector<int64_t> shape;            // logical, row-major, outermost first: [out, in] or [experts, out, in]
  ByteSpan data;                         // packed codes / blocks / dense values
  ByteSpan scales;                       // separate scales, when the format has them
  ByteSpan biases;                       // separate biases / zero points, when the format has them
  quant::QuantParams params;
  std::string file;                      // the file the spans point into, for error messages and reports

  // The loaders bound the product of the non-zero dims; a zero dim makes the tensor empty whatever the others are
  // (GGUF allows [0, 2^40, 2^40]), so it is looked for before multiplying.
  int64_t numel() const {
    for (int64_t d : shape)
      if (d == 0) return 0;
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }  // the input (block) dimension
  int64_t rows() const {  // everything else folded
    if (shape.empty()) return 1;
    return cols() == 0 ? 0 : numel() / cols();
  }
  uint64_t bytes() const { return data.size + scales.size + biases.size; }

  // The 2-D view decoders take (host pointers into the mapping).
  quant::QuantView view() const {
    quant::QuantView v;
    v.data = data.data;
    v.scales = scales.empty() ? nullptr : scales.data;
    v.biases = biases.empty() ? nullptr : biases.data;
    v.rows = rows();
    v.cols = cols();
    v.params = params;
    return v;
  }
};

// Name -> tensor, in a stable order.
using TensorTable = std::map<std::string, QuantTensor>;

}  // namespace qrt
