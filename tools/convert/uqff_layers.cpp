#include "tools/convert/uqff_layers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"

namespace qrt::convert {
namespace {

using quant::Family;
using quant::FormatId;
using quant::ScalarType;

constexpr FormatId kUqffTypes[] = {
    FormatId::kQ4_0, FormatId::kQ4_1, FormatId::kQ5_0, FormatId::kQ5_1,  FormatId::kQ8_0, FormatId::kQ8_1,
    FormatId::kQ2_K, FormatId::kQ3_K, FormatId::kQ4_K, FormatId::kQ5_K,  FormatId::kQ6_K, FormatId::kQ8_K,
    FormatId::kHQQ4, FormatId::kHQQ8, FormatId::kFP8,  FormatId::kAFQ2,  FormatId::kAFQ3, FormatId::kAFQ4,
    FormatId::kAFQ6, FormatId::kAFQ8, FormatId::kF8Q8, FormatId::kMXFP4,
};

bool is_k_quant(FormatId f) {
  return f == FormatId::kQ2_K || f == FormatId::kQ3_K || f == FormatId::kQ4_K || f == FormatId::kQ5_K ||
         f == FormatId::kQ6_K || f == FormatId::kQ8_K;
}

// mistral.rs' fallback of a K-quant whose 256-element blocks do not fit a row (spec §3.1).
FormatId legacy_fallback(FormatId f) {
  switch (f) {
    case FormatId::kQ2_K:
    case FormatId::kQ3_K:
      return FormatId::kQ4_0;
    case FormatId::kQ4_K:
      return FormatId::kQ4_1;
    case FormatId::kQ5_K:
      return FormatId::kQ5_0;
    case FormatId::kQ6_K:
      return FormatId::kQ5_1;
    default:
      return FormatId::kQ8_1;  // Q8K
  }
}

int afq_bits(FormatId f) {
  switch (f) {
    case FormatId::kAFQ2:
      return 2;
    case FormatId::kAFQ3:
      return 3;
    case FormatId::kAFQ4:
      return 4;
    case FormatId::kAFQ6:
      return 6;
    default:
      return 8;
  }
}

ScalarType dense_dtype(FormatId f) {
  return f == FormatId::kF16 ? ScalarType::kF16 : f == FormatId::kBF16 ? ScalarType::kBF16 : ScalarType::kF32;
}

bool is_dense(FormatId f) { return f == FormatId::kF32 || f == FormatId::kF16 || f == FormatId::kBF16; }

std::string shape_string(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The layer as its source bytes (Unquant), with the reason.
UqffLayer unquant(const QuantTensor& source, const std::string& key, std::string why) {
  UqffLayer l;
  l.tensor = source;
  l.tensor.name = key + ".weight";
  l.tag = UqffTag::kUnquant;
  l.fallback = std::move(why);
  return l;
}

UqffLayer quantized_layer(const QuantTensor& source, const std::string& key, FormatId format,
                          const quant::QuantParams& params, quant::QuantBuffers buffers, UqffTag tag) {
  UqffLayer l;
  auto owned = std::make_shared<const quant::QuantBuffers>(std::move(buffers));
  auto span = [](const std::vector<uint8_t>& v) { return ByteSpan{v.empty() ? nullptr : v.data(), v.size()}; };
  l.tensor.name = key + ".weight";
  l.tensor.format = format;
  l.tensor.shape = source.shape;
  l.tensor.data = span(owned->data);
  l.tensor.scales = span(owned->scales);
  l.tensor.biases = span(owned->biases);
  l.tensor.params = params;
  l.tensor.file = "quantized from " + source.name;
  l.buffers = std::move(owned);
  l.tag = tag;
  return l;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  if (!v.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// The shape with its last dimension replaced.
std::vector<int64_t> with_last(std::vector<int64_t> shape, int64_t last) {
  shape.back() = last;
  return shape;
}

}  // namespace

Result<FormatId> uqff_type_from_name(std::string_view name) {
  std::string n(name);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  // mistral.rs spells the K-quants "q4k"; qrt "q4_k".
  if (n.size() == 3 && n[0] == 'q' && n[2] == 'k') n = n.substr(0, 2) + "_k";
  std::string known;
  for (FormatId f : kUqffTypes) known += (known.empty() ? "" : ", ") + uqff_type_name(f);
  const auto id = quant::format_from_name(n);
  if (!id) return invalid_argument("unknown type '" + std::string(name) + "' (UQFF types: " + known + ")");
  for (FormatId f : kUqffTypes)
    if (f == *id) return *id;
  return unsupported("type '" + std::string(name) +
                     "' has no UQFF encoding that mistral.rs reads (UQFF types: " + known + ")");
}

std::string uqff_type_name(FormatId format) {
  if (is_k_quant(format)) {
    const std::string n(quant::format_name(format));  // "q4_k"
    return n.substr(0, 2) + "k";
  }
  return std::string(quant::format_name(format));
}

FormatId promoted_for_output(FormatId format) {
  switch (format) {
    case FormatId::kQ2_K:
    case FormatId::kQ3_K:
    case FormatId::kQ4_K:
    case FormatId::kQ4_0:
    case FormatId::kQ4_1:
    case FormatId::kIQ3_S:
      return FormatId::kQ6_K;
    case FormatId::kIQ1_S:  // llama-quantize's output type for its lowest-bit mixes
    case FormatId::kIQ1_M:
    case FormatId::kIQ2_XXS:
    case FormatId::kIQ2_XS:
    case FormatId::kIQ2_S:
    case FormatId::kIQ3_XXS:
      return FormatId::kQ5_K;
    case FormatId::kQ5_0:
    case FormatId::kQ5_1:
    case FormatId::kQ8_0:
    case FormatId::kQ8_1:
    case FormatId::kQ5_K:
    case FormatId::kQ6_K:
    case FormatId::kQ8_K:
      return FormatId::kQ8_0;
    case FormatId::kAFQ2:
    case FormatId::kAFQ3:
    case FormatId::kAFQ4:
      return FormatId::kAFQ6;
    case FormatId::kAFQ6:
    case FormatId::kAFQ8:
      return FormatId::kAFQ8;
    default:
      return format;
  }
}

Result<std::vector<float>> dense_values(const QuantTensor& t) {
  if (!is_dense(t.format))
    return unsupported(t.name + ": a " + std::string(quant::format_name(t.format)) +
                       " source tensor (only F32, F16 and BF16 sources are quantized)");
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (!out.empty()) QRT_TRY(cpu::dequantize(t.format, t.view(), out.data()));
  return out;
}

Result<std::vector<float>> decoded_values(const QuantTensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (!out.empty()) {
    Status s = cpu::dequantize(t.format, t.view(), out.data());
    if (!s.ok()) return s.with_context(t.name);
  }
  return out;
}

bool needs_importance(FormatId format) {
  return format == FormatId::kIQ1_S || format == FormatId::kIQ1_M || format == FormatId::kIQ2_XXS ||
         format == FormatId::kIQ2_XS || format == FormatId::kIQ2_S;
}

Result<UqffLayer> quantize_uqff_layer(const QuantTensor& source, FormatId format, const std::string& key,
                                      const std::vector<float>* importance) {
  if (source.shape.size() != 2 && source.shape.size() != 3)
    return invalid_argument(key + ": a weight of shape " + shape_string(source.shape) + " (expected 2-D or 3-D)");
  const bool stack = source.shape.size() == 3;
  const int64_t cols = source.cols(), rows = source.rows();
  const std::string want = uqff_type_name(format);
  const Family family = quant::format_info(format).family;
  if (stack && (family == Family::kHqq || family == Family::kFp8 || family == Family::kF8q8))
    return unsupported(key + ": " + want + " cannot hold a stack of expert weights " + shape_string(source.shape) +
                       " (mistral.rs gathers experts only from GGML and AFQ stacks); choose another type for it");
  const int64_t experts = stack ? source.shape[0] : 1;
  if (importance != nullptr && static_cast<int64_t>(importance->size()) != experts * cols)
    return invalid_argument(key + ": " + std::to_string(importance->size()) + " importance values for " +
                            std::to_string(experts) + " x " + std::to_string(cols) + " columns");
  QRT_ASSIGN_OR_RETURN(std::vector<float> values, dense_values(source));
  auto fits = [&](FormatId f, const quant::QuantParams& p) { return cpu::part_sizes(f, rows, cols, p).ok(); };
  auto quantize = [&](FormatId f, const quant::QuantParams& p, UqffTag tag, std::string why) -> Result<UqffLayer> {
    quant::QuantBuffers b;
    if (importance == nullptr || family != Family::kGgml) {
      QRT_ASSIGN_OR_RETURN(b, cpu::quantize(f, values.data(), rows, cols, p));
    } else {
      // Each expert has its own importance (llama-imatrix counts the tokens routed to it): one call per expert.
      const int64_t expert_rows = rows / experts;
      for (int64_t e = 0; e < experts; ++e) {
        quant::QuantParams pe = p;
        pe.importance = importance->data() + e * cols;
        QRT_ASSIGN_OR_RETURN(quant::QuantBuffers part,
                             cpu::quantize(f, values.data() + e * expert_rows * cols, expert_rows, cols, pe));
        b.data.insert(b.data.end(), part.data.begin(), part.data.end());
      }
    }
    UqffLayer l = quantized_layer(source, key, f, p, std::move(b), tag);
    l.fallback = std::move(why);
    return l;
  };
  switch (family) {
    case Family::kGgml: {
      FormatId f = format;
      std::string why;
      if (!fits(f, {}) && is_k_quant(f)) {
        f = legacy_fallback(f);
        why = want + " needs rows of a multiple of 256 (" + std::to_string(cols) + "): " + uqff_type_name(f);
      } else if (!fits(f, {}) && quant::format_info(f).block_elems == 256 && f != FormatId::kTQ1_0 &&
                 f != FormatId::kTQ2_0) {
        f = FormatId::kIQ4_NL;  // llama-quantize's choice for an i-quant whose blocks do not fit a row
        why = want + " needs rows of a multiple of 256 (" + std::to_string(cols) + "): iq4_nl";
      }
      if (needs_importance(f) && importance == nullptr) {
        f = FormatId::kQ2_K;
        why = want + " needs an importance matrix and the imatrix has no entry for this tensor: q2k";
        if (!fits(f, {})) f = legacy_fallback(f);
      }
      if (!fits(f, {})) {
        // GGML F32 (type 0) inside the GGML family, as mistral.rs stores what no block fits.
        UqffLayer l = quantized_layer(source, key, FormatId::kF32, {}, quant::QuantBuffers{f32_bytes(values), {}, {}},
                                      UqffTag::kGgml);
        l.fallback = want + " needs rows of a multiple of 32 (" + std::to_string(cols) + "): GGML f32";
        return l;
      }
      return quantize(f, {}, UqffTag::kGgml, why);
    }
    case Family::kAfq: {
      quant::QuantParams p;
      p.group_size = 64;
      p.scale_type = dense_dtype(source.format);
      if (!fits(format, p))
        return unquant(source, key, want + " needs rows of a multiple of 64 (" + std::to_string(cols) + "): unquant");
      return quantize(format, p, UqffTag::kAfq, "");
    }
    case Family::kMxfp4:
      if (!fits(format, {}))
        return unquant(source, key, want + " needs rows of a multiple of 32 (" + std::to_string(cols) + "): unquant");
      return quantize(format, {}, UqffTag::kMxfp4, "");
    case Family::kHqq: {
      quant::QuantParams p;
      p.group_size = 64;
      p.scale_type = ScalarType::kF32;
      if (!fits(format, p))
        return unquant(source, key,
                       want + " needs a multiple of 64 elements (" + std::to_string(source.numel()) + "): unquant");
      return quantize(format, p, UqffTag::kHqq, "");
    }
    case Family::kFp8: {
      float amax = 0.0f;
      for (float v : values) amax = std::max(amax, std::fabs(v));
      quant::QuantParams p;
      p.global_scale = amax > 0.0f ? amax / 448.0f : 1.0f;
      return quantize(format, p, UqffTag::kFp8, "");
    }
    case Family::kF8q8:
      return quantize(format, {}, UqffTag::kF8q8, "");
    default:
      return unsupported(key + ": " + want + " has no UQFF family");
  }
}

uint64_t uqff_layer_bytes(const UqffLayer& layer) { return layer.tensor.bytes() + 256; }

Status add_uqff_layer(SafetensorsWriter& shard, const std::string& key, const UqffLayer& layer,
                      const QuantTensor* bias) {
  const QuantTensor& t = layer.tensor;
  const std::string w = key + ".weight";
  const std::vector<int64_t>& shape = t.shape;
  shard.add_u8(w + ".format", static_cast<uint8_t>(layer.tag));
  switch (layer.tag) {
    case UqffTag::kGgml:
      shard.add_view(w, ScalarType::kU8, {static_cast<int64_t>(t.data.size)}, t.data);
      shard.add_u32(w + ".dtype", static_cast<uint32_t>(quant::format_info(t.format).ggml_type));
      shard.add_u32_vector(w + ".shape", shape);
      break;
    case UqffTag::kUnquant:
      shard.add_view(w, dense_dtype(t.format), shape, t.data);
      break;
    case UqffTag::kAfq: {
      const int bits = afq_bits(t.format), gs = t.params.group_size;
      shard.add_view(w, ScalarType::kU32, with_last(shape, t.cols() * bits / 32), t.data);
      shard.add_view(w + ".scales", t.params.scale_type, with_last(shape, t.cols() / gs), t.scales);
      shard.add_view(w + ".biases", t.params.scale_type, with_last(shape, t.cols() / gs), t.biases);
      shard.add_u8(w + ".bits", static_cast<uint8_t>(bits));
      shard.add_u8(w + ".group_size", static_cast<uint8_t>(gs));
      break;
    }
    case UqffTag::kMxfp4:
      shard.add_view(w, ScalarType::kU8, with_last(shape, t.cols() / 2), t.data);
      shard.add_view(w + ".scales", ScalarType::kU8, with_last(shape, t.cols() / 32), t.scales);
      break;
    case UqffTag::kHqq: {
      const int bits = t.format == quant::FormatId::kHQQ4 ? 4 : 8, gs = t.params.group_size;
      const int64_t groups = t.numel() / gs;
      shard.add_view(w, ScalarType::kU8, {bits == 4 ? gs / 2 : gs, groups}, t.data);
      shard.add_view(w + ".scales", ScalarType::kF32, {1, groups}, t.scales);
      shard.add_view(w + ".zeros", ScalarType::kF32, {1, groups}, t.biases);
      shard.add_u32_vector(w + ".shape", shape);
      shard.add_u8(w + ".bits", static_cast<uint8_t>(bits));
      shard.add_u32(w + ".group_size", static_cast<uint32_t>(gs));
      shard.add_u8(w + ".axis", 0);
      shard.add_u32(w + ".optimization_steps", 0);  // qrt's quantizer stops at HQQ's initial estimate
      shard.add_u8(w + ".round_zeros", 0);
      shard.add_u8(w + ".channel_wise", 1);
      break;
    }
    case UqffTag::kFp8:
      shard.add_view(w, ScalarType::kF8_E4M3, shape, t.data);
      shard.add_f32(w + ".dequant_w_scale", t.params.global_scale);
      shard.add_f32(w + ".dequant_x_scale", t.params.global_scale);
      shard.add_f32(w + ".quant_scale", 1.0f / t.params.global_scale);
      shard.add_u32(w + ".dtype", 9);
      break;
    case UqffTag::kF8q8:
      shard.add_view(w, ScalarType::kU8, {static_cast<int64_t>(t.data.size)}, t.data);
      shard.add_u32(w + ".num_blocks", static_cast<uint32_t>((t.numel() + 31) / 32));
      shard.add_u32_vector(w + ".shape", shape);
      break;
  }
  if (bias != nullptr) {
    if (layer.tag == UqffTag::kGgml && bias->format != FormatId::kF32) {
      QRT_ASSIGN_OR_RETURN(std::vector<float> v, dense_values(*bias));
      shard.add(key + ".bias", ScalarType::kF32, bias->shape, f32_bytes(v));
    } else {
      if (!is_dense(bias->format)) return unsupported(bias->name + ": a bias that is not F32, F16 or BF16");
      shard.add_view(key + ".bias", dense_dtype(bias->format), bias->shape, bias->data);
    }
  }
  return ok_status();
}

}  // namespace qrt::convert
