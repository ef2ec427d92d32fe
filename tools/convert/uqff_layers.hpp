// Quantizing one tracked module (a linear layer's weight, or a stack of expert weights) into a UQFF family, and
// its entries in a shard (spec/uqff.md §2.6, §3, §4), the inverse of loader/uqff.cpp's layer_tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/quant/format_list.hpp"
#include "loader/quant_tensor.hpp"
#include "qrt/status.hpp"
#include "tools/convert/safetensors_writer.hpp"

namespace qrt::convert {

// A type a UQFF export can hold, by mistral.rs' ISQ name ("q4k", "q8_0", "afq4", "hqq8", "fp8", "f8q8", "mxfp4")
// or qrt's ("q4_k"). Formats with no UQFF family (nvfp4, mxfp8, block FP8, the i-quants, ...) or no quantizer
// are refused with the list of what is possible.
Result<quant::FormatId> uqff_type_from_name(std::string_view name);
// mistral.rs' lower-case display name, used as the shard stem ("q4k", "afq4", ...).
std::string uqff_type_name(quant::FormatId format);
// The type an output head (lm_head) gets when `format` is asked for the whole model (mistral.rs' promotion of
// sensitive tensors, spec §4): 2- to 4-bit GGML types become Q6K, other GGML types Q8_0, AFQ2-4 AFQ6, AFQ6/8 AFQ8;
// for GGUF, IQ1_S/M, IQ2_* and IQ3_XXS Q5_K and IQ3_S Q6_K, as llama-quantize types output.weight.
quant::FormatId promoted_for_output(quant::FormatId format);

// The UQFF family tags (spec §2.5).
enum class UqffTag : uint8_t { kGgml = 0, kUnquant = 1, kHqq = 2, kFp8 = 3, kAfq = 4, kF8q8 = 5, kMxfp4 = 6 };

// One module as it will be stored: its tensor (spans into `buffers`, or into the source for Unquant), the family,
// and why the requested type was replaced when it was.
struct UqffLayer {
  QuantTensor tensor;
  UqffTag tag = UqffTag::kUnquant;
  std::shared_ptr<const quant::QuantBuffers> buffers;
  std::string fallback;  // "" or e.g. "q4k needs rows of a multiple of 256 (96): q4_1"
};

// The GGML types llama-quantize refuses to make without an importance matrix (its "very low-bit" types: IQ1_S,
// IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S).
bool needs_importance(quant::FormatId format);

// Quantizes `source` (a dense [out, in] or [experts, out, in] weight) to `format` with qrt's reference quantizers
// and the parameters mistral.rs' ISQ uses (AFQ and HQQ groups of 64, AFQ scales in the source's dtype, FP8 scaled
// by the tensor's largest magnitude). A shape the format cannot hold falls back as mistral.rs does: K-quants to a
// 32-element GGML type and then to GGML F32, AFQ, MXFP4 and HQQ to Unquant (the source bytes); i-quants (GGUF
// only) to IQ4_NL as llama-quantize does. Expert stacks in HQQ, FP8 or F8Q8 are refused (no reader gathers them).
// `importance` (an imatrix entry: cols values, experts * cols for a stack) weighs the GGML quantizers' errors; a
// type that needs_importance without one falls back to Q2_K, as llama-quantize types a matrix its imatrix lacks
// (token_embd).
Result<UqffLayer> quantize_uqff_layer(const QuantTensor& source, quant::FormatId format, const std::string& key,
                                      const std::vector<float>* importance = nullptr);

// Bytes the layer's entries will take in a shard (for the free-space check and shard splitting).
uint64_t uqff_layer_bytes(const UqffLayer& layer);

// Adds `<key>.weight` and its family's entries to a shard; `bias`, when given (dense), as `<key>.bias` (F32 for
// GGML layers, as mistral.rs stores them; the bias's own dtype otherwise).
Status add_uqff_layer(SafetensorsWriter& shard, const std::string& key, const UqffLayer& layer,
                      const QuantTensor* bias);

// The f32 values of a dense tensor (F32, F16 or BF16).
Result<std::vector<float>> dense_values(const QuantTensor& t);
// The values of a tensor in any format qrt decodes (convert-model --requantize).
Result<std::vector<float>> decoded_values(const QuantTensor& t);

}  // namespace qrt::convert
