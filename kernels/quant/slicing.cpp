#include "kernels/quant/slicing.hpp"

#include <string>

#include "kernels/quant/formats.hpp"

namespace qrt::quant {
namespace {

std::string shape_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SliceRule unsliceable(std::string reason) {
  SliceRule r;
  r.sliceable = false;
  r.reason = std::move(reason);
  return r;
}

SliceRule aligned(int64_t alignment, bool partial_end_ok = false) {
  SliceRule r;
  r.sliceable = true;
  r.alignment = alignment;
  r.partial_end_ok = partial_end_ok;
  return r;
}

// Part sizes of a [rows, cols] tensor, after the format's own legality check.
Result<PartSizes> sizes_of(FormatId format, int64_t rows, int64_t cols, const QuantParams& params) {
  return dispatch_format(format, [&](auto tag) -> Result<PartSizes> {
    using T = typename decltype(tag)::Traits;
    QRT_TRY(T::check_params(rows, cols, params));
    return T::part_sizes(rows, cols, params);
  });
}

ByteRuns runs(uint64_t offset, uint64_t length, uint64_t stride, uint64_t count) {
  if (length == 0) return {};  // the format has no such part
  return {offset, length, stride, count};
}

int64_t tiles_along(int64_t n) { return (n + kFp8TileEdge - 1) / kFp8TileEdge; }

// Block FP8: codes are a plain [rows, cols] byte matrix; scales a [tiles(rows), tiles(cols)] matrix.
SliceBytes fp8_block_slice(const QuantParams& params, int64_t rows, int64_t cols, const DimRange& r) {
  const auto sb = static_cast<uint64_t>(float_scale_bytes(params.scale_type));
  const auto tile_cols = static_cast<uint64_t>(tiles_along(cols));
  const auto first_tile = static_cast<uint64_t>(r.start / kFp8TileEdge);
  const auto tiles = static_cast<uint64_t>(tiles_along(r.length));
  const auto ucols = static_cast<uint64_t>(cols), start = static_cast<uint64_t>(r.start),
             length = static_cast<uint64_t>(r.length);
  SliceBytes out;
  if (r.dim == 0) {
    out.data = runs(start * ucols, length * ucols, length * ucols, 1);
    out.scales = runs(first_tile * tile_cols * sb, tiles * tile_cols * sb, tiles * tile_cols * sb, 1);
  } else {
    out.data = runs(start, length, ucols, static_cast<uint64_t>(rows));
    out.scales = runs(first_tile * sb, tiles * sb, tile_cols * sb, static_cast<uint64_t>(tiles_along(rows)));
  }
  return out;
}

}  // namespace

Result<DimRange> even_share(int dim, int64_t size, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world)
    return invalid_argument("rank " + std::to_string(rank) + " of " + std::to_string(world) + " ranks");
  if (size <= 0 || size % world != 0)
    return invalid_argument("dimension " + std::to_string(dim) + " (size " + std::to_string(size) +
                            ") does not divide evenly among " + std::to_string(world) + " ranks");
  const int64_t share = size / world;
  return DimRange{dim, share * rank, share};
}

SliceRule slice_rule(FormatId format, const QuantParams& params, std::span<const int64_t> shape, int dim) {
  if (shape.empty() || dim < 0 || static_cast<size_t>(dim) >= shape.size())
    return unsliceable("dimension " + std::to_string(dim) + " does not exist in shape " + shape_string(shape));
  const FormatInfo info = format_info(format);
  const bool last = static_cast<size_t>(dim) + 1 == shape.size();
  const int64_t cols = shape.back();
  switch (info.family) {
    case Family::kHqq:
      return unsliceable("HQQ quantization groups are strided columns of the flattened tensor, so no part of it is "
                         "a slice of the weight");
    case Family::kF8q8: {
      constexpr int64_t kBlock = FormatTraits<FormatId::kF8Q8>::kStorageElems;
      if (cols % kBlock != 0)
        return unsliceable("F8Q8 blocks of " + std::to_string(kBlock) + " run over the flattened tensor and its rows of " +
                           std::to_string(cols) + " elements are not whole blocks");
      return aligned(last ? kBlock : 1);
    }
    case Family::kFp8Block:
      if (shape.size() != 2) return unsliceable("block FP8 scale tiles are defined on a 2-D matrix only");
      return aligned(kFp8TileEdge, /*partial_end_ok=*/true);
    default: {
      if (!last) return aligned(1);  // whole rows: every other format stores each row's parts contiguously
      const int64_t block = block_elems_for(info.block_elems, params);
      if (block <= 0) return unsliceable("the tensor's group size is not set");
      return aligned(block);
    }
  }
}

Status check_slice(FormatId format, const QuantParams& params, std::span<const int64_t> shape, const DimRange& range) {
  const std::string what = std::string(format_name(format)) + " tensor " + shape_string(shape) + ": cannot take [" +
                           std::to_string(range.start) + ", " + std::to_string(range.start + range.length) +
                           ") of dimension " + std::to_string(range.dim);
  const SliceRule rule = slice_rule(format, params, shape, range.dim);
  if (!rule.sliceable) return invalid_argument(what + ": " + rule.reason);
  const int64_t size = shape[static_cast<size_t>(range.dim)];
  if (range.start < 0 || range.length <= 0 || range.start > size || range.length > size - range.start)
    return invalid_argument(what + " (size " + std::to_string(size) + "): the range is empty or out of bounds");
  const bool start_ok = range.start % rule.alignment == 0;
  const bool end_ok = range.length % rule.alignment == 0 || (rule.partial_end_ok && range.start + range.length == size);
  if (!start_ok || !end_ok)
    return invalid_argument(what + " (size " + std::to_string(size) + "): " + std::string(format_name(format)) +
                            " slices along this dimension only on multiples of " + std::to_string(rule.alignment) +
                            (rule.partial_end_ok ? " (or up to its end)" : ""));
  return ok_status();
}

Result<SliceBytes> slice_bytes(FormatId format, const QuantParams& params, std::span<const int64_t> shape,
                               const DimRange& range) {
  QRT_TRY(check_slice(format, params, shape, range));
  const size_t nd = shape.size();
  const int64_t cols = shape.back();
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < nd; ++i) rows *= shape[i];

  SliceBytes out;
  if (format_info(format).family == Family::kFp8Block) {
    out = fp8_block_slice(params, rows, cols, range);
  } else {
    // Every other sliceable format stores each row's parts contiguously, one row after another.
    QRT_ASSIGN_OR_RETURN(const PartSizes row, sizes_of(format, 1, cols, params));
    QRT_ASSIGN_OR_RETURN(const PartSizes all, sizes_of(format, rows, cols, params));
    const auto urows = static_cast<uint64_t>(rows);
    if (all.data != row.data * urows || all.scales != row.scales * urows || all.biases != row.biases * urows)
      return internal_error(std::string(format_name(format)) + ": parts are not stored row by row");
    const auto start = static_cast<uint64_t>(range.start), length = static_cast<uint64_t>(range.length);
    if (static_cast<size_t>(range.dim) + 1 < nd) {
      // Whole rows: for each index of the dimensions before `dim`, one run over `length` indices of `dim`, each
      // covering `inner` rows (the product of the dimensions between `dim` and the last).
      uint64_t outer = 1, inner = 1;
      for (size_t i = 0; i < static_cast<size_t>(range.dim); ++i) outer *= static_cast<uint64_t>(shape[i]);
      for (size_t i = static_cast<size_t>(range.dim) + 1; i + 1 < nd; ++i) inner *= static_cast<uint64_t>(shape[i]);
      const auto dim_size = static_cast<uint64_t>(shape[static_cast<size_t>(range.dim)]);
      auto part = [&](uint64_t row_bytes) {
        return runs(start * inner * row_bytes, length * inner * row_bytes, dim_size * inner * row_bytes, outer);
      };
      out.data = part(row.data);
      out.scales = part(row.scales);
      out.biases = part(row.biases);
    } else {
      // Columns: the same byte range of every row. Block and group aligned, so the bytes before the slice and the
      // slice's own bytes are the part sizes of rows of `start` and `length` elements.
      PartSizes before;
      if (start > 0) {
        QRT_ASSIGN_OR_RETURN(before, sizes_of(format, 1, range.start, params));
      }
      QRT_ASSIGN_OR_RETURN(const PartSizes within, sizes_of(format, 1, range.length, params));
      out.data = runs(before.data, within.data, row.data, urows);
      out.scales = runs(before.scales, within.scales, row.scales, urows);
      out.biases = runs(before.biases, within.biases, row.biases, urows);
    }
  }
  out.shape.assign(shape.begin(), shape.end());
  out.shape[static_cast<size_t>(range.dim)] = range.length;
  return out;
}

}  // namespace qrt::quant
