// THE format list. Every quantization format qrt knows appears here exactly once; the enum, the names, the
// dispatch switch (formats.hpp) and the test matrix are all generated from it.
//
// Adding a format: one line below, plus a `FormatTraits<FormatId::kNAME>` specialization in its family header
// (kernels/quant/<family>.hpp, included by formats.hpp). The contract a traits struct fulfils is documented on
// `FormatTraits` below; the tests iterate this list, so a new line is tested without touching any test.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "kernels/quant/common.hpp"
#include "kernels/quant/scalar_type.hpp"

// X(ENUM_NAME, "display name")
#define QRT_FORMAT_LIST(X)                                                              \
  /* unquantized (GGML F32/F16/BF16, UQFF Unquant, HF dense) */                         \
  X(F32, "f32") X(F16, "f16") X(BF16, "bf16")                                           \
  /* GGML 32-element blocks */                                                          \
  X(Q8_0, "q8_0")

namespace qrt::quant {

enum class FormatId : uint16_t {
#define QRT_X(name, str) k##name,
  QRT_FORMAT_LIST(QRT_X)
#undef QRT_X
};

constexpr int kFormatCount = 0
#define QRT_X(name, str) +1
    QRT_FORMAT_LIST(QRT_X)
#undef QRT_X
    ;

constexpr FormatId kAllFormats[] = {
#define QRT_X(name, str) FormatId::k##name,
    QRT_FORMAT_LIST(QRT_X)
#undef QRT_X
};

constexpr std::string_view format_name(FormatId id) {
  switch (id) {
#define QRT_X(name, str) \
  case FormatId::k##name: \
    return str;
    QRT_FORMAT_LIST(QRT_X)
#undef QRT_X
  }
  return "?";
}

enum class Family : uint8_t { kDense, kGgml, kAfq, kMxfp4, kMxfp8, kNvfp4, kFp8, kFp8Block, kF8q8, kHqq };

// The largest number of elements one decode_block call produces; callers size stack buffers with it.
constexpr int kMaxBlockElems = 256;

// Per-tensor parameters that are not fixed by the format id.
struct QuantParams {
  int32_t group_size = 0;                    // elements per scale group (AFQ 32/64/128, HQQ 64, ...); 0 = n/a
  ScalarType scale_type = ScalarType::kF32;  // dtype of the scales/biases parts where the format allows several
  float global_scale = 1.0f;                 // per-tensor multiplier (FP8 per-tensor, NVFP4 global scale)
};

// A 2-D view of one quantized matrix [rows, cols] (leading dims of a stacked tensor folded into rows). Blocks and
// groups run along cols, the input dimension. Pointers are host or device pointers depending on the caller.
struct QuantView {
  const uint8_t* data = nullptr;    // packed codes / blocks
  const uint8_t* scales = nullptr;  // separate per-group scales, or nullptr
  const uint8_t* biases = nullptr;  // separate per-group biases / zero points, or nullptr
  int64_t rows = 0;
  int64_t cols = 0;
  QuantParams params;
};

// Byte sizes of a tensor's parts; the loader checks the file's spans against these.
struct PartSizes {
  uint64_t data = 0;
  uint64_t scales = 0;
  uint64_t biases = 0;
};

// Host-side output of a quantizer.
struct QuantBuffers {
  std::vector<uint8_t> data;
  std::vector<uint8_t> scales;
  std::vector<uint8_t> biases;
};

// Specialized once per format. The contract:
//   static constexpr Family family;
//   static constexpr int ggml_type;        // GGML type id, or -1
//   static constexpr int block_elems;      // elements one decode_block produces (<= kMaxBlockElems);
//                                          //   0 means "params.group_size" (group-scaled formats)
//   static constexpr int block_bytes;      // bytes of `data` per block, or 0 when data is not block-structured
//   static constexpr double bits_per_weight;   // storage cost including scales, for reports
//   static constexpr bool has_quantizer;
//   QRT_HD static void decode_block(const QuantView& v, int64_t row, int64_t block, float* out);
//       // out[0 .. elems) = W[row, block*elems .. (block+1)*elems)
//   static Status check_params(int64_t rows, int64_t cols, const QuantParams& p);  // shape/param legality
//   static PartSizes part_sizes(int64_t rows, int64_t cols, const QuantParams& p);
//   static Status quantize(const float* x, int64_t rows, int64_t cols, const QuantParams& p,
//                          QuantBuffers* out);    // only when has_quantizer; x: [rows, cols]
template <FormatId Id>
struct FormatTraits;

}  // namespace qrt::quant
