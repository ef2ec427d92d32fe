#include "tools/convert/gguf_export.hpp"

#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "kernels/quant/formats.hpp"
#include "models/arch/arch.hpp"
#include "models/tensor_names.hpp"
#include "models/tokenizer/regex.hpp"
#include "qrt/version.hpp"
#include "tools/convert/gguf_tokenizer.hpp"
#include "tools/convert/gguf_writer.hpp"
#include "tools/convert/mxfp4_repack.hpp"
#include "tools/convert/parallel.hpp"
#include "tools/convert/progress.hpp"
#include "tools/convert/rope_freqs.hpp"
#include "tools/convert/rope_rows.hpp"
#include "tools/convert/uqff_layers.hpp"

namespace qrt::convert {
namespace {

using quant::FormatId;

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool llama_family(const ModelConfig& c) {
  return c.architecture == "llama" || c.architecture == "mistral" || c.architecture == "mixtral";
}

bool deepseek(const ModelConfig& c) { return c.architecture == "deepseek2" || c.architecture == "deepseek3"; }

// llama.cpp's deepseek2 serves DeepSeek-V2, V2.5 and V3 alike.
std::string gguf_architecture(const ModelConfig& c) {
  return llama_family(c) ? "llama" : deepseek(c) ? "deepseek2" : c.architecture;
}

// DeepSeek's latent attention and routing as llama.cpp's deepseek2 keys, in its expanded form (attn_kv_b whole,
// key_length nope + rope, value_length v): what llama.cpp cannot record is refused.
Status add_deepseek_keys(GgufWriter& w, const ModelConfig& c, const std::string& p) {
  if (c.latent_norm_eps != c.norm_eps)
    return unsupported("GGUF cannot record DeepSeek's latent norm epsilon " + std::to_string(c.latent_norm_eps) +
                       " apart from rms_norm_eps " + std::to_string(c.norm_eps) + " (llama.cpp uses one for both)");
  if (c.rope.scaling == RopeScaling::kYarn && std::fabs(c.rope.attn_factor - 1.0f) > 1e-6f)
    return unsupported("GGUF cannot record DeepSeek's YaRN cos/sin factor " + std::to_string(c.rope.attn_factor) +
                       " (llama.cpp's deepseek2 assumes mscale == mscale_all_dim, a factor of 1)");
  const double plain = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  double log_mul = 0.0;  // q·k scale = (1 + log_mul ln(factor))^2 / sqrt(head_dim)
  if (c.rope.scaling == RopeScaling::kYarn && c.rope.factor > 1.0f)
    log_mul = (std::sqrt(c.attention_scale / plain) - 1.0) / std::log(static_cast<double>(c.rope.factor));
  else if (std::fabs(c.attention_scale - plain) > 1e-6 * plain)
    return unsupported("GGUF cannot record DeepSeek's q·k scale " + std::to_string(c.attention_scale) +
                       " without YaRN scaling");
  w.set_u32(p + "attention.value_length", static_cast<uint32_t>(c.v_head_dim));
  w.set_u32(p + "attention.kv_lora_rank", static_cast<uint32_t>(c.kv_lora_rank));
  if (c.q_lora_rank > 0) w.set_u32(p + "attention.q_lora_rank", static_cast<uint32_t>(c.q_lora_rank));
  if (c.rope.scaling == RopeScaling::kYarn)
    w.set_f32(p + "rope.scaling.yarn_log_multiplier", static_cast<float>(log_mul));
  if (c.experts == 0) return ok_status();
  w.set_u32(p + "leading_dense_block_count", static_cast<uint32_t>(c.leading_dense_layers));
  if (c.shared_expert_ffn % c.expert_ffn != 0)
    return unsupported("GGUF records shared experts as a count of expert widths; " +
                       std::to_string(c.shared_expert_ffn) + " is not a multiple of " + std::to_string(c.expert_ffn));
  w.set_u32(p + "expert_shared_count", static_cast<uint32_t>(c.shared_expert_ffn / c.expert_ffn));
  w.set_f32(p + "expert_weights_scale", c.routed_scale);
  w.set_u32(p + "expert_gating_func", c.router_sigmoid ? 2 : 1);
  if (c.group_score_top2 != c.router_sigmoid && c.expert_groups > 1)
    return unsupported("GGUF's deepseek2 scores expert groups by their best (softmax) or two best (sigmoid) "
                       "scores; this model's groups are scored otherwise");
  if (c.expert_groups > 1) {
    w.set_u32(p + "expert_group_count", static_cast<uint32_t>(c.expert_groups));
    w.set_u32(p + "expert_group_used_count", static_cast<uint32_t>(c.expert_groups_used));
  }
  return ok_status();
}

// The GGUF name of a canonical tensor: llama.cpp's phi3 keeps the fused [gate; up] projection under ffn_up (of 2 *
// feed_forward_length rows), which is how qrt's GGUF loader recognizes it (models/fused_tensors.hpp); its gpt-oss
// names the MLP's input norm post_attention_norm (which qrt's loader reads back as the MLP norm).
std::string gguf_tensor_name(const std::string& key, const ModelConfig& c) {
  const bool bias = ends_with(key, ".bias");
  std::string base = bias ? key.substr(0, key.size() - 5) : key;
  if (ends_with(base, ".ffn_gate_up")) base = base.substr(0, base.size() - 12) + ".ffn_up";
  if (c.architecture == "gpt-oss" && ends_with(base, ".ffn_norm"))
    base = base.substr(0, base.size() - 9) + ".post_attention_norm";
  return base + (bias ? ".bias" : ".weight");
}

// What llama.cpp's gemma2 / gemma3 assume rather than read (models/arch/gemma_family.cpp): a config that differs
// cannot be written without changing the model.
Status check_gemma_for_gguf(const ModelConfig& c) {
  const bool gemma3 = c.architecture == "gemma3";
  const bool is_27b = c.layers == (gemma3 ? 62 : 46);
  const float scale = 1.0f / std::sqrt(static_cast<float>(is_27b ? c.hidden / c.heads : c.head_dim));
  if (std::fabs(c.attention_scale - scale) > 1e-6f * scale)
    return unsupported("GGUF cannot record this " + c.architecture + " model's query_pre_attn_scalar (" +
                       std::to_string(1.0 / (double{c.attention_scale} * c.attention_scale)) +
                       "): llama.cpp derives it from the model size (head_dim " + std::to_string(c.head_dim) +
                       (is_27b ? ", hidden / heads for the 27B" : "") + ")");
  if (gemma3 && c.rope_local_theta != 10000.0f)
    return unsupported("GGUF cannot record gemma3's rope_local_base_freq " + std::to_string(c.rope_local_theta) +
                       " (llama.cpp assumes 10000)");
  if (gemma3 && (c.attn_softcap > 0.0f || c.final_softcap > 0.0f))
    return unsupported("llama.cpp's gemma3 applies no logit soft-capping; this model has some");
  if (!gemma3 && c.sliding_window_pattern != 2)
    return unsupported("llama.cpp's gemma2 windows every other layer; this model's pattern is " +
                       std::to_string(c.sliding_window_pattern));
  return ok_status();
}

Status add_architecture(GgufWriter& w, const ModelConfig& c) {
  const std::string a = gguf_architecture(c), p = a + ".";
  if (a != "llama" && a != "qwen2" && a != "qwen3" && a != "qwen3moe" && a != "phi3" && a != "gemma2" &&
      a != "gemma3" && a != "gpt-oss" && a != "deepseek2")
    return unsupported("writing GGUF for " + c.architecture +
                       " models is not supported yet (llama, mistral, mixtral, qwen2, qwen3, qwen3moe, phi3, gemma2, "
                       "gemma3, gpt-oss, deepseek2, deepseek3)");
  if (a == "gemma2" || a == "gemma3") QRT_TRY(check_gemma_for_gguf(c));
  // llama.cpp's gpt-oss hard-codes the clamp (alpha 1.702, limit 7) and windows the even layers.
  if (a == "gpt-oss" && (c.swiglu_limit != 7.0f || c.swiglu_alpha != 1.702f || c.sliding_window_pattern != 2))
    return unsupported("GGUF cannot record this gpt-oss model's swiglu_limit " + std::to_string(c.swiglu_limit) +
                       " or window pattern (llama.cpp assumes 7 and every other layer)");
  if (c.rope.scaling == RopeScaling::kLongRope) {
    // Only llama.cpp's phi3 reads the original context and attn_factor keys that go with the factor tensors.
    if (a != "phi3")
      return unsupported("LongRoPE scaling is written to GGUF for phi3 models only, not " + c.architecture);
    const size_t pairs = static_cast<size_t>(c.rope.rot_dim / 2);
    if (c.rope.original_context <= 0 || c.rope.short_factor.size() != pairs || c.rope.long_factor.size() != pairs)
      return invalid_argument("LongRoPE scaling needs original_max_position_embeddings > 0 (found " +
                              std::to_string(c.rope.original_context) + ") and " + std::to_string(pairs) +
                              " short and long factors (found " + std::to_string(c.rope.short_factor.size()) +
                              " and " + std::to_string(c.rope.long_factor.size()) + ")");
  }
  if (c.rope.scaling == RopeScaling::kLlama3 &&
      (c.rope.original_context <= 0 || !(c.rope.high_freq_factor > c.rope.low_freq_factor) ||
       !(c.rope.low_freq_factor > 0.0f) || !(c.rope.factor > 0.0f)))
    return invalid_argument("Llama 3 RoPE scaling needs original_max_position_embeddings > 0, factor > 0 and "
                            "high_freq_factor > low_freq_factor > 0");
  w.set_string("general.architecture", a);
  w.set_u32(p + "vocab_size", static_cast<uint32_t>(c.vocab_size));
  w.set_u32(p + "context_length", static_cast<uint32_t>(c.context_length));
  w.set_u32(p + "embedding_length", static_cast<uint32_t>(c.hidden));
  w.set_u32(p + "block_count", static_cast<uint32_t>(c.layers));
  w.set_u32(p + "feed_forward_length", static_cast<uint32_t>(c.ffn));
  w.set_u32(p + "attention.head_count", static_cast<uint32_t>(c.heads));
  w.set_u32(p + "attention.head_count_kv", static_cast<uint32_t>(c.kv_heads));
  w.set_u32(p + "attention.key_length", static_cast<uint32_t>(c.head_dim));
  w.set_u32(p + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  w.set_f32(p + "attention.layer_norm_rms_epsilon", c.norm_eps);
  // llama.cpp's phi3 converter always writes the window, 0 for none (Phi-4 without one shares the architecture).
  if (c.sliding_window > 0 || a == "phi3")
    w.set_u32(p + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  w.set_f32(p + "rope.freq_base", c.rope.theta);
  w.set_u32(p + "rope.dimension_count", static_cast<uint32_t>(c.rope.rot_dim));
  if (a == "gemma2") {
    w.set_f32(p + "attn_logit_softcapping", c.attn_softcap);
    w.set_f32(p + "final_logit_softcapping", c.final_softcap);
  }
  // llama.cpp's gemma3 assumes 6; the key is for the other patterns (which qrt's reader honours).
  if (a == "gemma3" && c.sliding_window_pattern != 6)
    w.set_u32(p + "attention.sliding_window_pattern", static_cast<uint32_t>(c.sliding_window_pattern));
  if (a == "phi3") {
    // The original context is always there, as llama.cpp's converter writes it (Phi3Config's
    // original_max_position_embeddings; the full context for models without LongRoPE): llama.cpp picks the long
    // factors for contexts beyond it, qrt derives the LongRoPE factor from it and context_length. The factors
    // travel as the rope_factors_* tensors, the cos/sin multiplier as attn_factor, which readers take as is.
    const int original = c.rope.original_context > 0 ? c.rope.original_context : c.context_length;
    w.set_u32(p + "rope.scaling.original_context_length", static_cast<uint32_t>(original));
    if (c.rope.scaling == RopeScaling::kLongRope) w.set_f32(p + "rope.scaling.attn_factor", c.rope.attn_factor);
  }
  if (c.rope.scaling == RopeScaling::kLinear) {
    w.set_string(p + "rope.scaling.type", "linear");
    w.set_f32(p + "rope.scaling.factor", c.rope.factor);
  } else if (c.rope.scaling == RopeScaling::kYarn) {
    // llama.cpp multiplies attn_factor by YaRN's 0.1 ln(factor) + 1 when it reads the file.
    w.set_string(p + "rope.scaling.type", "yarn");
    w.set_f32(p + "rope.scaling.factor", c.rope.factor);
    w.set_u32(p + "rope.scaling.original_context_length", static_cast<uint32_t>(c.rope.original_context));
    w.set_f32(p + "rope.scaling.yarn_beta_fast", c.rope.yarn_beta_fast);
    w.set_f32(p + "rope.scaling.yarn_beta_slow", c.rope.yarn_beta_slow);
    if (a != "deepseek2")  // its cos/sin are never scaled (add_deepseek_keys)
      w.set_f32(p + "rope.scaling.attn_factor", c.rope.attn_factor / (0.1f * std::log(c.rope.factor) + 1.0f));
  }
  if (a == "deepseek2") QRT_TRY(add_deepseek_keys(w, c, p));
  if (c.experts > 0) {
    w.set_u32(p + "expert_count", static_cast<uint32_t>(c.experts));
    w.set_u32(p + "expert_used_count", static_cast<uint32_t>(c.experts_used));
    w.set_u32(p + "expert_feed_forward_length", static_cast<uint32_t>(c.expert_ffn));
    if (!llama_family(c) && a != "gpt-oss") w.set_bool(p + "expert_weights_norm", c.normalize_topk);
  }
  return ok_status();
}

// GGML blocks and dense floats have GGUF types; UQFF's MXFP4 is repacked into GGUF's MXFP4 blocks.
bool has_gguf_type(FormatId f) {
  const quant::FormatInfo info = quant::format_info(f);
  return f == FormatId::kMXFP4 ||
         (info.ggml_type >= 0 && (info.family == quant::Family::kGgml || info.family == quant::Family::kDense));
}

// A tensor kept in its encoding: GGML blocks and dense floats have GGUF types; whole rows move for the Q/K
// permutation (block formats keep each row's blocks together, so rows are byte ranges).
Result<UqffLayer> copied_tensor(const QuantTensor& t, const std::string& name, int permute) {
  const quant::FormatInfo info = quant::format_info(t.format);
  if (!has_gguf_type(t.format))
    return unsupported(name + " (" + t.name + ") is " + std::string(info.name) +
                       ", which has no GGUF type; pass --requantize TYPE, convert from an export in GGML types, or "
                       "quantize the checkpoint");
  const int64_t rows = t.shape.size() >= 2 ? t.numel() / t.cols() : t.numel();
  auto keep = std::make_shared<quant::QuantBuffers>();
  FormatId format = t.format;
  if (t.format == FormatId::kMXFP4) {
    if (t.cols() % 32 != 0 || t.scales.data == nullptr)
      return format_error(name + " (" + t.name + "): MXFP4 rows of " + std::to_string(t.cols()) +
                          " are not whole blocks of 32 with scales");
    keep->data = mxfp4_uqff_to_gguf(t.data.data, t.scales.data, rows, t.cols());
    format = FormatId::kMXFP4_GGML;
  } else {
    keep->data.assign(t.data.data, t.data.data + t.data.size);
  }
  if (permute > 0) {
    const std::vector<uint8_t> in = keep->data;
    reorder_rope_rows(in.data(), keep->data.data(), rows, in.size() / static_cast<uint64_t>(rows), permute, false);
  }
  UqffLayer l;
  l.tensor = t;
  l.tensor.format = format;
  l.tensor.scales = {};
  l.tensor.data = ByteSpan{keep->data.data(), keep->data.size()};
  l.buffers = keep;
  l.tag = UqffTag::kGgml;
  return l;
}

struct Job {
  std::string name;  // GGUF name
  const QuantTensor* source;
  FormatId format;        // F32 for vectors and routers
  int permute_heads = 0;  // > 0: llama Q/K rows to interleave
  bool copy = false;      // keep the source's blocks (keep_types, or a checkpoint's own MXFP4 experts)
  bool requantize = false;  // keep_types, but the source's type has no GGUF counterpart
  float norm_offset = 0.0f;  // added to an RMSNorm weight: Gemma's (1 + w), stored whole as llama.cpp does
};


}  // namespace

Result<FormatId> gguf_type_from_name(std::string_view name) {
  std::string n(name);
  for (char& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (n.size() == 3 && n[0] == 'q' && n[2] == 'k') n = n.substr(0, 2) + "_k";  // mistral.rs' spelling
  const auto id = quant::format_from_name(n);
  std::string known;
  for (FormatId f : quant::kAllFormats)
    if (quant::format_info(f).family == quant::Family::kGgml && quant::format_info(f).has_quantizer &&
        f != FormatId::kQ8_1 && f != FormatId::kQ8_K)
      known += (known.empty() ? "" : ", ") + std::string(quant::format_name(f));
  if (!id || quant::format_info(*id).family != quant::Family::kGgml || !quant::format_info(*id).has_quantizer ||
      *id == FormatId::kQ8_1 || *id == FormatId::kQ8_K)
    return invalid_argument("'" + std::string(name) + "' is not a GGML type qrt quantizes for GGUF models (" + known +
                            ")");
  return *id;
}

Result<GgufExportReport> write_gguf_export(const ModelSource& source, const std::string& path,
                                           const GgufExportOptions& options) {
  if (source.kind != SourceKind::kHfCheckpoint && !(options.keep_types && source.kind == SourceKind::kUqff))
    return unsupported(source.path + " is not a Hugging Face checkpoint" +
                       (options.keep_types ? " or UQFF export" : ""));
  if (!options.keep_types && quant::format_info(options.type).family != quant::Family::kGgml)
    return invalid_argument("a GGUF output needs a GGML type (q4_0 ... q8_0, q2k ... q6k, iq4_nl, ...), not " +
                            std::string(quant::format_name(options.type)));
  const nlohmann::json hf = nlohmann::json::parse(source.hf_config_json, nullptr, false);
  if (hf.is_discarded()) return format_error(source.path + "/config.json is not valid JSON");
  QRT_ASSIGN_OR_RETURN(ModelConfig config, arch::config_from_hf(hf));
  QRT_ASSIGN_OR_RETURN(names::CanonicalTensors canonical,
                       names::canonicalize(source.tensors, names::NameScheme::kHuggingFace));

  GgufWriter w;
  QRT_TRY(add_architecture(w, config));
  w.set_string("general.name", hf.value("_name_or_path", std::string("model")));
  w.set_string("general.quantized_by", std::string("qrt ") + qrt::kVersion);
  QRT_TRY(add_gguf_tokenizer(w, source.tokenizer.tokenizer_json, source.tokenizer.tokenizer_config_json,
                             source.tokenizer.chat_template, hf));

  QRT_ASSIGN_OR_RETURN(const TypeOverrides overrides, TypeOverrides::compile(options.overrides));
  std::vector<Job> jobs;
  uint64_t source_bytes = 0;
  for (const auto& [key, t] : canonical.tensors) {
    const bool bias = ends_with(key, ".bias");
    const std::string name = gguf_tensor_name(key, config);
    FormatId format = FormatId::kF32;
    bool requantize = false, pinned_format = false;
    if (options.keep_types) {
      format = t.format;
      if (options.requantize && !has_gguf_type(t.format)) {
        format = *options.requantize;
        requantize = true;
      }
    } else if (!bias && t.shape.size() >= 2 && !ends_with(key, "ffn_gate_inp")) {  // routers stay F32 (llama.cpp)
      format = key == names::kOutput && options.promote_output ? promoted_for_output(options.type) : options.type;
      QRT_ASSIGN_OR_RETURN(std::optional<FormatId> pinned, overrides.match(name));
      if (pinned) format = *pinned;
      pinned_format = pinned.has_value();
    }
    int permute = 0;
    if (llama_family(config) &&
        (key.find(".attn_q") != std::string::npos || key.find(".attn_k") != std::string::npos) &&
        key.find("_norm") == std::string::npos)
      permute = key.find(".attn_q") != std::string::npos ? config.heads : config.kv_heads;
    if ((!options.keep_types || requantize) && needs_importance(format) && options.importance == nullptr)
      return invalid_argument(name + ": " + std::string(quant::format_name(format)) +
                              " is made only with an importance matrix (pass --imatrix FILE, llama-imatrix's output)");
    // Gemma's norms: config.json checkpoints hold w of (1 + w), GGUF holds 1 + w.
    const float norm_offset = ends_with(key, "norm") ? config.norm_weight_offset : 0.0f;
    if (norm_offset != 0.0f) format = FormatId::kF32;
    // A checkpoint already in MXFP4 (openai's gpt-oss experts) keeps its blocks, as llama.cpp's converter does: GGUF
    // has the type, and requantizing 4-bit codes would only add error.
    const bool copy = (options.keep_types && !requantize && norm_offset == 0.0f) ||
                      (!options.keep_types && t.format == FormatId::kMXFP4 && !pinned_format);
    jobs.push_back({name, &t, format, permute, copy, requantize, norm_offset});
    source_bytes += t.bytes();
  }
  if (options.check_space) QRT_TRY(options.check_space(source_bytes + (uint64_t{1} << 20)));

  // Quantize (or copy) on `threads` threads; each result owns its bytes.
  std::vector<Result<UqffLayer>> done;
  std::atomic<int> weighted{0};
  {
    Progress progress(options.keep_types ? "converting" : "quantizing", source_bytes,
                      options.quiet ? Progress::Mode::kQuiet : Progress::Mode::kAuto);
    done = parallel_results<UqffLayer>(
        jobs.size(), options.threads,
        [&](size_t i) -> Result<UqffLayer> {
          const Job& j = jobs[i];
          if (j.copy) return copied_tensor(*j.source, j.name, j.permute_heads);
          QRT_ASSIGN_OR_RETURN(std::vector<float> v, j.requantize || j.norm_offset != 0.0f
                                                         ? decoded_values(*j.source)
                                                         : dense_values(*j.source));
          for (float& x : v) x += j.norm_offset;
          if (j.permute_heads > 0) {
            const int64_t cols = j.source->shape.size() >= 2 ? j.source->cols() : 1;
            std::vector<float> reordered(v.size());
            reorder_rope_rows(reinterpret_cast<const uint8_t*>(v.data()), reinterpret_cast<uint8_t*>(reordered.data()),
                              j.source->numel() / cols, static_cast<uint64_t>(cols) * sizeof(float), j.permute_heads,
                              false);
            v = std::move(reordered);
          }
          auto values = std::make_shared<std::vector<float>>(std::move(v));
          QuantTensor dense = *j.source;
          dense.format = FormatId::kF32;
          dense.data = ByteSpan{reinterpret_cast<const uint8_t*>(values->data()), values->size() * sizeof(float)};
          if (j.format == FormatId::kF32 || dense.shape.size() < 2) {
            UqffLayer l;
            l.tensor = dense;
            auto keep = std::make_shared<quant::QuantBuffers>();
            keep->data.assign(dense.data.data, dense.data.data + dense.data.size);
            l.tensor.data = ByteSpan{keep->data.data(), keep->data.size()};
            l.buffers = keep;
            return l;
          }
          const std::vector<float>* importance = nullptr;
          if (options.importance != nullptr) {
            const int64_t experts = dense.shape.size() == 3 ? dense.shape[0] : 1;
            QRT_ASSIGN_OR_RETURN(importance, options.importance->for_tensor(j.name, dense.cols(), experts));
            if (importance != nullptr) ++weighted;
          }
          return quantize_uqff_layer(dense, j.format, j.name, importance);
        },
        [&](size_t i) { progress.add(jobs[i].source->bytes()); });
  }
  for (size_t i = 0; i < jobs.size(); ++i)
    if (!done[i].ok()) return done[i].status().with_context(jobs[i].name);
  if (options.importance != nullptr && weighted == 0)
    return invalid_argument(options.importance->path + " has no importance for any matrix of this model (its names "
                            "are GGUF names like " + options.importance->entries.begin()->first + ")");
  GgufExportReport report;
  if (deepseek(config) && (config.q_lora_rank == 0) != (config.layers == 27 || config.layers == 26))
    report.fallbacks.push_back("attention: llama.cpp's deepseek2 takes q without a low rank (attn_q) only for 26 or "
                               "27 layers (the V2-Lite shape), whatever the file says; qrt reads the file's form");
  if (config.rope.scaling == RopeScaling::kYarn && !config.rope.yarn_truncate)
    report.fallbacks.push_back("rope: config.json keeps YaRN's correction range fractional (truncate: false); GGUF "
                               "readers (llama.cpp, qrt) round it to whole dimensions");
  std::vector<float> rope_divisors;  // alive until the file is written
  if (config.rope.scaling == RopeScaling::kLlama3) {
    rope_divisors = llama3_rope_divisors(config.rope, config.head_dim);
    const ByteSpan bytes{reinterpret_cast<const uint8_t*>(rope_divisors.data()), rope_divisors.size() * sizeof(float)};
    w.add_tensor(std::string(names::kRopeFreqs) + ".weight", quant::format_info(FormatId::kF32).ggml_type,
                 {static_cast<int64_t>(rope_divisors.size())}, bytes);
    report.bytes += bytes.size;
  }
  // LongRoPE's per-pair divisors as llama.cpp's phi3 tensors (F32 [rot_dim / 2]); config.json had them as lists.
  if (config.rope.scaling == RopeScaling::kLongRope) {
    for (auto [name, factors] : {std::pair{names::kRopeFactorsLong, &config.rope.long_factor},
                                 std::pair{names::kRopeFactorsShort, &config.rope.short_factor}}) {
      const ByteSpan bytes{reinterpret_cast<const uint8_t*>(factors->data()), factors->size() * sizeof(float)};
      w.add_tensor(std::string(name) + ".weight", quant::format_info(FormatId::kF32).ggml_type,
                   {static_cast<int64_t>(factors->size())}, bytes);
      report.bytes += bytes.size;
    }
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    const UqffLayer& l = *done[i];  // every job succeeded (checked above)
    if (l.tag != UqffTag::kGgml && l.tensor.format != FormatId::kF32)
      return internal_error(jobs[i].name + ": not a GGML encoding");
    if (!l.fallback.empty()) report.fallbacks.push_back(jobs[i].name + ": " + l.fallback);
    if (jobs[i].requantize)
      report.requantized.push_back(jobs[i].name + ": " + std::string(quant::format_name(jobs[i].source->format)) +
                                   " -> " + std::string(quant::format_name(l.tensor.format)));
    w.add_tensor(jobs[i].name, quant::format_info(l.tensor.format).ggml_type, l.tensor.shape, l.tensor.data);
    report.bytes += l.tensor.data.size;
  }
  QRT_TRY(w.write(path));
  return report;
}

}  // namespace qrt::convert
