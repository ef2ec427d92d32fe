// Slicing rules for tensor parallelism: which ranges of a packed tensor a rank may take along each dimension,
// and where the bytes of such a slice lie in each part (data, scales, biases). Host-only.
//
// The rules (spec/uqff.md §5): a slice along any dimension but the last takes whole rows, which every
// row-separable format allows at any row; a slice along the last (input) dimension must start and end on block
// or group boundaries: GGML block elems (32 or 256), AFQ group size, MXFP4/MXFP8 32, NVFP4 16, F8Q8 32, FP8 and
// dense 1. Three formats are special: block FP8 scales cover 128×128 tiles, so both of its dimensions slice on
// tile edges (the last tile may be partial); F8Q8 blocks run over the flattened tensor, so it slices only when its
// rows are whole blocks; HQQ groups are strided columns of the flattened tensor and never slice.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/quant/format_list.hpp"
#include "qrt/status.hpp"

namespace qrt::quant {

// [start, start + length) of dimension `dim` of a logical shape (outermost first, as QuantTensor::shape).
struct DimRange {
  int dim = 0;
  int64_t start = 0;
  int64_t length = 0;
};

// Rank `rank`'s equal share of dimension `dim` of size `size` among `world` ranks; the size must divide evenly.
Result<DimRange> even_share(int dim, int64_t size, int rank, int world);

// What slices along one dimension a format allows for a tensor of a given shape.
struct SliceRule {
  bool sliceable = false;
  int64_t alignment = 1;       // start and length must be multiples of it...
  bool partial_end_ok = false;  // ...except that a slice may end at the end of the dimension (block FP8 edge tiles)
  std::string reason;          // why not, when !sliceable
};
SliceRule slice_rule(FormatId format, const QuantParams& params, std::span<const int64_t> shape, int dim);

// Checks `range` against the rule and the shape; the error names the format, the shape, the range and the rule.
Status check_slice(FormatId format, const QuantParams& params, std::span<const int64_t> shape, const DimRange& range);

// `count` runs of `length` bytes each, the i-th starting at offset + i·stride, relative to the start of a part.
struct ByteRuns {
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t stride = 0;
  uint64_t count = 0;
  uint64_t total() const { return length * count; }
  bool contiguous() const { return count <= 1 || stride == length; }
};

// Where a slice's bytes are, and what the slice is as a tensor of its own.
struct SliceBytes {
  ByteRuns data, scales, biases;
  std::vector<int64_t> shape;  // the slice's logical shape
};
Result<SliceBytes> slice_bytes(FormatId format, const QuantParams& params, std::span<const int64_t> shape,
                               const DimRange& range);

}  // namespace qrt::quant
