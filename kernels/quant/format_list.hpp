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
  /* MLX affine (AFQ; UQFF tag 4, Ollama int4/int8): afq.hpp */                         \
  X(AFQ2, "afq2") X(AFQ3, "afq3") X(AFQ4, "afq4") X(AFQ5, "afq5") X(AFQ6, "afq6")       \
  X(AFQ8, "afq8")                                                                       \
  /* microscaled floats (OCP MXFP4 = UQFF tag 6; Ollama mxfp8, nvfp4): mx.hpp */        \
  X(MXFP4, "mxfp4") X(MXFP8, "mxfp8") X(NVFP4, "nvfp4")                                 \
  /* FP8 E4M3 (per tensor: UQFF tag 3; HF 128x128 blocks; F8Q8: UQFF tag 5): fp8.hpp */ \
  X(FP8, "fp8") X(FP8_BLOCK, "fp8_block") X(F8Q8, "f8q8")                               \
  /* HQQ axis 0 (UQFF tag 2): hqq.hpp */                                                \
  X(HQQ4, "hqq4") X(HQQ8, "hqq8")                                                       \
  /* GGML 32-element blocks */                                                          \
  X(Q4_0, "q4_0") X(Q4_1, "q4_1") X(Q5_0, "q5_0") X(Q5_1, "q5_1")                       \
  X(Q8_0, "q8_0") X(Q8_1, "q8_1")                                                       \
  /* GGML K-quants (256-element super-blocks) */                                        \
  X(Q2_K, "q2_k") X(Q3_K, "q3_k") X(Q4_K, "q4_k") X(Q5_K, "q5_k") X(Q6_K, "q6_k")       \
  X(Q8_K, "q8_k")                                                                       \
  /* GGML i-quants / ternary / MXFP4 */                                                 \
  X(IQ1_S, "iq1_s") X(IQ1_M, "iq1_m") X(IQ2_XXS, "iq2_xxs") X(IQ2_XS, "iq2_xs")         \
  X(IQ2_S, "iq2_s") X(IQ3_XXS, "iq3_xxs") X(IQ3_S, "iq3_s") X(IQ4_NL, "iq4_nl")         \
  X(IQ4_XS, "iq4_xs") X(TQ1_0, "tq1_0") X(TQ2_0, "tq2_0") X(MXFP4_GGML, "mxfp4_ggml")

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
  // Quantizers only: how much each input column matters (cols floats, e.g. an imatrix entry, loader/imatrix.hpp).
  // The GGML types whose ggml quantizers weigh errors by it (legacy 4/5-bit, K-quants, i-quants) do; the others
  // ignore it. nullptr: unweighted, ggml's behaviour without an imatrix.
  const float* importance = nullptr;
};

// A 2-D view of one quantized matrix [rows, cols] (leading dims of a stacked tensor folded into rows). Blocks and
// groups run along cols, the input dimension. Pointers are host or device pointers depending on the caller.
// OCP MXFP4 and NVFP4: rows of E2M1 nibbles with one scale byte per group (E8M0 per 32 columns, E4M3 per 16) in a
// separate array, which the integer kernels read byte by byte (so at any address) and cannot run without.
constexpr bool is_e2m1_stream(FormatId id) { return id == FormatId::kMXFP4 || id == FormatId::kNVFP4; }

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
