#include "kernels/linear/gemv_dp4a.hpp"

#include <climits>
#include <string>

#include "kernels/linear/gemv_dp4a_launch.cuh"

namespace qrt::kernels {
namespace {

// Columns per block of the formats that have a policy; 0 for the others.
int64_t policy_block_cols(quant::FormatId format) {
  switch (format) {
    case quant::FormatId::kQ4_0:
    case quant::FormatId::kQ4_1:
    case quant::FormatId::kQ5_0:
    case quant::FormatId::kQ5_1:
    case quant::FormatId::kQ8_0:
    case quant::FormatId::kIQ4_NL:
    case quant::FormatId::kMXFP4_GGML:
    case quant::FormatId::kMXFP4:
    case quant::FormatId::kNVFP4:
    case quant::FormatId::kAFQ4:
    case quant::FormatId::kAFQ8: return 32;
    case quant::FormatId::kQ2_K:
    case quant::FormatId::kQ3_K:
    case quant::FormatId::kQ4_K:
    case quant::FormatId::kQ5_K:
    case quant::FormatId::kQ6_K:
    case quant::FormatId::kIQ4_XS:
    case quant::FormatId::kTQ2_0:
    case quant::FormatId::kIQ2_XXS:
    case quant::FormatId::kIQ2_XS:
    case quant::FormatId::kIQ2_S:
    case quant::FormatId::kIQ3_XXS:
    case quant::FormatId::kIQ3_S:
    case quant::FormatId::kIQ1_S:
    case quant::FormatId::kIQ1_M:
    case quant::FormatId::kTQ1_0: return 256;
    default: return 0;
  }
}

}  // namespace

bool gemv_dp4a_applies(quant::FormatId format, const quant::QuantView& w) {
  const int64_t block_cols = policy_block_cols(format);
  if (block_cols == 0) return false;
  if (w.data == nullptr || reinterpret_cast<uintptr_t>(w.data) % 16 != 0) return false;
  if (w.rows <= 0 || w.rows >= INT_MAX || w.cols <= 0 || w.cols % block_cols != 0) return false;
  if (format == quant::FormatId::kAFQ4 || format == quant::FormatId::kAFQ8) {
    const int g = w.params.group_size;
    const quant::ScalarType st = w.params.scale_type;
    if ((g != 32 && g != 64 && g != 128) || w.cols % g != 0 || w.scales == nullptr || w.biases == nullptr) return false;
    if (st != quant::ScalarType::kF16 && st != quant::ScalarType::kBF16 && st != quant::ScalarType::kF32) return false;
    const uintptr_t align = static_cast<uintptr_t>(quant::float_scale_bytes(st));
    if (reinterpret_cast<uintptr_t>(w.scales) % align != 0 || reinterpret_cast<uintptr_t>(w.biases) % align != 0)
      return false;
  }
  if (quant::is_e2m1_stream(format) && w.scales == nullptr) return false;  // E8M0 / E4M3 bytes: any address
  return w.cols / 8 < INT_MAX;  // items per row fit an int (8 columns per item at the least)
}

namespace {

Status launch_parts(quant::FormatId format, std::span<const GemvPart> parts, Q8ConstActivations x, int m,
                    cudaStream_t stream, int rows_per_block, int64_t max_blocks) {
  const std::string name = "gemv_dp4a " + std::string(quant::format_name(format));
  if (max_blocks < 0 || max_blocks > INT_MAX)
    return invalid_argument(name + ": at most " + std::to_string(max_blocks) + " blocks (0 for one per row group)");
  if (max_blocks > 0 && m != 1)
    return invalid_argument(name + ": a grid of at most " + std::to_string(max_blocks) +
                            " looping blocks at batch " + std::to_string(m) + " (one x row only)");
  if (rows_per_block != 0 && rows_per_block != 1 && rows_per_block != 2 &&
      !((rows_per_block == 4 || rows_per_block == 8) && m == 1))
    return invalid_argument(name + ": " + std::to_string(rows_per_block) + " rows per block at batch " +
                            std::to_string(m) + " (1 or 2, or 4 or 8 at batch 1)");
  if (m < 1 || m > kGemvMaxBatch)
    return invalid_argument(name + ": batch " + std::to_string(m) + " not in 1.." + std::to_string(kGemvMaxBatch));
  if (parts.empty() || parts.size() > static_cast<size_t>(kGemvMaxParts))
    return invalid_argument(name + ": " + std::to_string(parts.size()) + " matrices in one launch (1.." +
                            std::to_string(kGemvMaxParts) + ")");
  int64_t blocks = 0;
  for (const GemvPart& part : parts) {
    const quant::QuantView& w = part.w;
    if (!gemv_dp4a_applies(format, w))
      return invalid_argument(name + ": no integer-dot kernel for [" + std::to_string(w.rows) + ", " +
                              std::to_string(w.cols) + "] at this alignment (check gemv_dp4a_applies first)");
    const quant::QuantView& first = parts[0].w;
    if (w.cols != first.cols || w.params.group_size != first.params.group_size ||
        w.params.scale_type != first.params.scale_type || (w.scales == nullptr) != (first.scales == nullptr) ||
        w.params.global_scale != first.params.global_scale)
      return invalid_argument(name + ": the matrices of one launch differ in width or group parameters ([" +
                              std::to_string(w.rows) + ", " + std::to_string(w.cols) + "] after [" +
                              std::to_string(first.rows) + ", " + std::to_string(first.cols) + "])");
    if (part.y == nullptr) return invalid_argument(name + ": null output");
    blocks += w.rows;
  }
  if (blocks > INT_MAX) return invalid_argument(name + ": more rows than one grid holds");
  if (x.codes == nullptr || x.scales == nullptr) return invalid_argument(name + ": null activations");
  dp4a_launch::Dp4aLaunch launch{parts, x, m, stream, rows_per_block};
  launch.max_blocks = max_blocks;
  for (auto family : {dp4a_launch::launch_ggml, dp4a_launch::launch_iq_grids, dp4a_launch::launch_tables_and_afq}) {
    if (std::optional<Status> launched = family(format, launch)) return *launched;
  }
  return invalid_argument(name + ": no policy");  // unreachable: gemv_dp4a_applies checked
}

}  // namespace

Status gemv_dp4a(quant::FormatId format, const quant::QuantView& w, Q8ConstActivations x, int m, float* y,
                 cudaStream_t stream) {
  const GemvPart part{w, y};
  return launch_parts(format, {&part, 1}, x, m, stream, 0, 0);
}

Status gemv_dp4a_rows(quant::FormatId format, const quant::QuantView& w, Q8ConstActivations x, int m, float* y,
                      cudaStream_t stream, int rows_per_block, int64_t max_blocks) {
  const GemvPart part{w, y};
  return launch_parts(format, {&part, 1}, x, m, stream, rows_per_block, max_blocks);
}

Status gemv_dp4a_parts(quant::FormatId format, std::span<const GemvPart> parts, Q8ConstActivations x, int m,
                       cudaStream_t stream, int rows_per_block, int64_t max_blocks) {
  return launch_parts(format, parts, x, m, stream, rows_per_block, max_blocks);
}

}  // namespace qrt::kernels
