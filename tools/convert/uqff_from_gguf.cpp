#include "tools/convert/uqff_from_gguf.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <vector>

#include "kernels/quant/formats.hpp"
#include "loader/gguf_metadata.hpp"
#include "models/arch/arch.hpp"
#include "models/arch/gguf_metadata_view.hpp"
#include "models/tensor_names.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "tools/convert/deepseek_convert.hpp"
#include "tools/convert/mxfp4_repack.hpp"
#include "tools/convert/progress.hpp"
#include "tools/convert/rope_freqs.hpp"
#include "tools/convert/rope_rows.hpp"
#include "tools/convert/spm_vocab.hpp"
#include "tools/convert/uqff_layers.hpp"

namespace qrt::convert {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using quant::FormatId;

bool llama_family(const ModelConfig& c) {
  return c.architecture == "llama" || c.architecture == "mistral" || c.architecture == "mixtral";
}

// A float as the JSON number with the fewest digits that reads back as the same float (1.1f as 1.1, not
// 1.100000023841858), so that config.json stays readable and qrt parses exactly the GGUF's value.
ordered_json short_float(float v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  return ordered_json(std::strtod(std::string(buf, r.ptr).c_str(), nullptr));
}

ordered_json float_list(const std::vector<float>& values) {
  ordered_json a = ordered_json::array();
  for (float v : values) a.push_back(short_float(v));
  return a;
}

// config.json for a model config read from GGUF.
Result<ordered_json> hf_config(const ModelConfig& c) {
  ordered_json j;
  j["model_type"] = nullptr;  // first, as in Hugging Face's files; set below
  std::string type = c.architecture;
  if (type == "qwen3moe") type = "qwen3_moe";
  if (type == "gemma3") type = "gemma3_text";
  const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
  if (type == "llama" && c.sliding_window > 0) type = "mistral";
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden;
  j["num_hidden_layers"] = c.layers;
  j["num_attention_heads"] = c.heads;
  j["num_key_value_heads"] = c.kv_heads;
  j["head_dim"] = c.head_dim;
  const bool gpt_oss = c.architecture == "gpt-oss";
  if (gpt_oss) type = "gpt_oss";
  j["model_type"] = type;
  j["intermediate_size"] = c.ffn > 0 && !gpt_oss ? c.ffn : c.expert_ffn;
  j["max_position_embeddings"] = c.context_length;
  j["rms_norm_eps"] = short_float(c.norm_eps);
  j["rope_theta"] = short_float(c.rope.theta);
  j["tie_word_embeddings"] = c.tied_embeddings;
  if (gemma) {
    // Gemma's fields (Gemma2Config / Gemma3TextConfig); soft-capping null when off.
    j["hidden_activation"] = "gelu_pytorch_tanh";
    // An integer in every published config; the float scale GGUF implies comes back within an ulp or two.
    const double scalar = 1.0 / (double{c.attention_scale} * c.attention_scale);
    const bool integer = std::fabs(scalar - std::round(scalar)) < 1e-3 * scalar;
    j["query_pre_attn_scalar"] = integer ? ordered_json(std::lround(scalar)) : ordered_json(scalar);
    auto cap = [](float v) { return v > 0.0f ? short_float(v) : ordered_json(nullptr); };
    j["attn_logit_softcapping"] = cap(c.attn_softcap);
    j["final_logit_softcapping"] = cap(c.final_softcap);
    if (c.architecture == "gemma3") {
      j["sliding_window_pattern"] = c.sliding_window_pattern;
      j["rope_local_base_freq"] = short_float(c.rope_local_theta);
    } else if (c.sliding_window_pattern != 2) {
      return unsupported("config.json cannot express a gemma2 window pattern other than every other layer");
    }
  } else {
    j["hidden_act"] = "silu";
  }
  if (c.architecture == "llama") {
    j["attention_bias"] = c.attention_bias;
    j["mlp_bias"] = c.mlp_bias;
  }
  j["sliding_window"] = c.sliding_window > 0 ? ordered_json(c.sliding_window) : ordered_json(nullptr);
  if (gpt_oss) {
    // GptOssConfig's fields: biases always, the clamp, one window type per layer (llama.cpp's file windows the even
    // layers: a global layer every sliding_window_pattern).
    if (c.swiglu_alpha != 1.702f)
      return unsupported("config.json cannot express a gpt-oss SwiGLU alpha other than 1.702 (GGUF " +
                         std::to_string(c.swiglu_alpha) + ")");
    j["attention_bias"] = true;
    j["swiglu_limit"] = short_float(c.swiglu_limit);
    ordered_json types = ordered_json::array();
    for (int l = 0; l < c.layers; ++l) {
      const bool global = c.sliding_window <= 0 ||
                          (c.sliding_window_pattern > 0 && (l + 1) % c.sliding_window_pattern == 0);
      types.push_back(global ? "full_attention" : "sliding_attention");
    }
    j["layer_types"] = types;
  }
  if (c.architecture == "qwen2" && c.sliding_window > 0) {
    // Qwen2Config applies the window only with use_sliding_window, from layer max_window_layers on: all layers.
    j["use_sliding_window"] = true;
    j["max_window_layers"] = 0;
  }
  if (c.rope.scaling == RopeScaling::kLinear) {
    j["rope_scaling"] = {{"type", "linear"}, {"factor", short_float(c.rope.factor)}};
  } else if (c.rope.scaling == RopeScaling::kLlama3) {
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", short_float(c.rope.factor)},
                         {"low_freq_factor", short_float(c.rope.low_freq_factor)},
                         {"high_freq_factor", short_float(c.rope.high_freq_factor)},
                         {"original_max_position_embeddings", c.rope.original_context}};
  } else if (c.rope.scaling == RopeScaling::kYarn) {
    // Hugging Face's YaRN parameters; attention_factor always, since GGUF's attn_factor may differ from the
    // 0.1 ln(factor) + 1 a reader derives without it.
    j["rope_scaling"] = {{"rope_type", "yarn"},
                         {"factor", short_float(c.rope.factor)},
                         {"original_max_position_embeddings", c.rope.original_context},
                         {"beta_fast", short_float(c.rope.yarn_beta_fast)},
                         {"beta_slow", short_float(c.rope.yarn_beta_slow)},
                         {"attention_factor", short_float(c.rope.attn_factor)},
                         // Written out: Hugging Face defaults to true, mistral.rs' gpt-oss to false.
                         {"truncate", c.rope.yarn_truncate}};
  } else if (c.rope.scaling == RopeScaling::kLongRope) {
    // Phi3Config's layout: the original context at the top level (the factor is max_position_embeddings over
    // it), the per-pair divisors in rope_scaling; attention_factor only where the GGUF's attn_factor is not the
    // sqrt(1 + ln(factor) / ln(original)) a reader derives without it.
    if (c.rope.original_context <= 0)
      return format_error("LongRoPE factor tensors without a positive rope.scaling.original_context_length");
    j["rope_scaling"] = {{"type", "longrope"},
                         {"short_factor", float_list(c.rope.short_factor)},
                         {"long_factor", float_list(c.rope.long_factor)}};
    const double factor = static_cast<double>(c.context_length) / c.rope.original_context;
    const auto derived =
        static_cast<float>(factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(c.rope.original_context)));
    if (derived != c.rope.attn_factor) j["rope_scaling"]["attention_factor"] = short_float(c.rope.attn_factor);
  } else if (c.rope.scaling != RopeScaling::kNone) {
    return unsupported("RoPE scaling other than linear, Llama 3's, YaRN and LongRoPE is not written to config.json "
                       "by convert-model yet");
  }
  if (c.architecture == "phi3" && c.rope.original_context > 0)
    j["original_max_position_embeddings"] = c.rope.original_context;
  if (c.experts > 0) {
    if (c.architecture == "mixtral" || gpt_oss) {
      j["num_local_experts"] = c.experts;
    } else {
      j["num_experts"] = c.experts;
      j["moe_intermediate_size"] = c.expert_ffn;
      j["norm_topk_prob"] = c.normalize_topk;
    }
    j["num_experts_per_tok"] = c.experts_used;
  }
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (c.eos_token_id >= 0) j["eos_token_id"] = c.eos_token_id;
  if (c.kv_lora_rank > 0) QRT_TRY(deepseek_hf_config(c, c.expert_choice_bias, &j));
  // The file must describe the same model: read it back as a loader would.
  QRT_ASSIGN_OR_RETURN(ModelConfig back, arch::config_from_hf(nlohmann::json::parse(j.dump())));
  auto same = [&](auto a, auto b, const char* what) -> Status {
    return a == b ? ok_status()
                  : unsupported(std::string("config.json cannot express this model's ") + what + " (GGUF " +
                                std::to_string(static_cast<long long>(a)) + ", read back " +
                                std::to_string(static_cast<long long>(b)) + ")");
  };
  QRT_TRY(same(c.vocab_size, back.vocab_size, "vocabulary"));
  QRT_TRY(same(c.layers, back.layers, "layer count"));
  QRT_TRY(same(c.heads, back.heads, "heads"));
  QRT_TRY(same(c.kv_heads, back.kv_heads, "KV heads"));
  QRT_TRY(same(c.head_dim, back.head_dim, "head dim"));
  QRT_TRY(gpt_oss ? same(c.expert_ffn, back.expert_ffn, "expert width") : same(c.ffn, back.ffn, "FFN width"));
  QRT_TRY(same(c.experts, back.experts, "experts"));
  QRT_TRY(same(c.experts_used, back.experts_used, "experts per token"));
  if (gpt_oss && (back.swiglu_limit != c.swiglu_limit || back.swiglu_alpha != c.swiglu_alpha ||
                  back.attention_sinks != c.attention_sinks))
    return unsupported("config.json cannot express this model's SwiGLU clamp or attention sinks");
  QRT_TRY(same(c.rope.rot_dim, back.rope.rot_dim, "rotary dims"));
  QRT_TRY(same(c.sliding_window, back.sliding_window, "sliding window"));
  QRT_TRY(same(c.sliding_window_pattern, back.sliding_window_pattern, "window pattern"));
  QRT_TRY(same(c.post_norms, back.post_norms, "post-norms"));
  QRT_TRY(same(static_cast<int>(c.activation), static_cast<int>(back.activation), "activation"));
  if (std::fabs(back.attention_scale - c.attention_scale) > 1e-6f * c.attention_scale ||
      back.attn_softcap != c.attn_softcap ||
      back.final_softcap != c.final_softcap || back.rope_local_theta != c.rope_local_theta)
    return unsupported("config.json cannot express this model's attention scale, soft-capping or local RoPE base");
  QRT_TRY(same(c.normalize_topk, back.normalize_topk, "router normalization"));
  if (c.kv_lora_rank > 0) {  // DeepSeek's latent attention and routing
    QRT_TRY(same(c.q_lora_rank, back.q_lora_rank, "q latent"));
    QRT_TRY(same(c.kv_lora_rank, back.kv_lora_rank, "kv latent"));
    QRT_TRY(same(c.qk_nope_dim, back.qk_nope_dim, "key dims without RoPE"));
    QRT_TRY(same(c.v_head_dim, back.v_head_dim, "value dims"));
    QRT_TRY(same(c.shared_expert_ffn, back.shared_expert_ffn, "shared experts"));
    QRT_TRY(same(c.leading_dense_layers, back.leading_dense_layers, "leading dense layers"));
    QRT_TRY(same(c.expert_groups, back.expert_groups, "expert groups"));
    QRT_TRY(same(c.expert_groups_used, back.expert_groups_used, "expert groups used"));
    QRT_TRY(same(c.router_sigmoid, back.router_sigmoid, "sigmoid routing"));
    QRT_TRY(same(c.group_score_top2, back.group_score_top2, "group scores"));
    QRT_TRY(same(c.expert_choice_bias, back.expert_choice_bias, "choice bias"));
    if (back.routed_scale != c.routed_scale)
      return unsupported("config.json cannot express this model's routed_scaling_factor");
  }
  QRT_TRY(same(static_cast<int>(c.rope.scaling), static_cast<int>(back.rope.scaling), "RoPE scaling"));
  if (c.rope.scaling == RopeScaling::kYarn &&
      (back.rope.factor != c.rope.factor || back.rope.attn_factor != c.rope.attn_factor ||
       back.rope.original_context != c.rope.original_context || back.rope.yarn_beta_fast != c.rope.yarn_beta_fast ||
       back.rope.yarn_beta_slow != c.rope.yarn_beta_slow || back.rope.yarn_truncate != c.rope.yarn_truncate))
    return unsupported("config.json cannot express this model's YaRN parameters");
  if (c.rope.scaling == RopeScaling::kLongRope) {
    QRT_TRY(same(c.rope.original_context, back.rope.original_context, "original context"));
    if (back.rope.attn_factor != c.rope.attn_factor || back.rope.short_factor != c.rope.short_factor ||
        back.rope.long_factor != c.rope.long_factor)
      return unsupported("config.json cannot express this model's LongRoPE factors and attn_factor (GGUF " +
                         std::to_string(c.rope.attn_factor) + ", read back " + std::to_string(back.rope.attn_factor) +
                         ")");
  }
  return j;
}

// tokenizer.json and tokenizer_config.json for a "gpt2" GGUF vocabulary.
Result<ordered_json> gpt2_tokenizer_json(const GgufMetadata& md, const std::vector<std::string>* tokens,
                                         const std::vector<int32_t>& types) {
  std::string pre = "default";
  if (md.contains("tokenizer.ggml.pre")) {
    QRT_ASSIGN_OR_RETURN(pre, md.get_string("tokenizer.ggml.pre"));
  }
  QRT_ASSIGN_OR_RETURN(std::vector<std::string> regexes, gguf_pre_tokenizer_regexes(pre));
  std::vector<std::string> merges;
  if (md.contains("tokenizer.ggml.merges")) {
    QRT_ASSIGN_OR_RETURN(const std::vector<std::string>* m, md.get_string_array("tokenizer.ggml.merges"));
    merges = *m;
  }
  ordered_json tok = tokenizer_json_skeleton();
  ordered_json vocab = ordered_json::object();
  // Appended in id order through a hash index (a repeated piece keeps its first place and takes the last id, as
  // operator[] did): ordered_json's own lookups scan its entries, quadratic in o200k's 200k pieces.
  auto& vocab_entries = vocab.get_ref<ordered_json::object_t&>();
  vocab_entries.reserve(tokens->size());
  std::unordered_map<std::string, size_t> vocab_place;
  for (size_t i = 0; i < tokens->size(); ++i) {
    if (types[i] == 3 || types[i] == 4) {
      tok["added_tokens"].push_back({{"id", i},
                                     {"content", (*tokens)[i]},
                                     {"single_word", false},
                                     {"lstrip", false},
                                     {"rstrip", false},
                                     {"normalized", types[i] == 4},
                                     {"special", types[i] == 3}});
      if (types[i] == 4) continue;  // user-defined: in the vocab only through added_tokens
    }
    const auto [place, added] = vocab_place.emplace((*tokens)[i], vocab_entries.size());
    if (added) {
      vocab_entries.emplace_back((*tokens)[i], i);
    } else {
      std::next(vocab_entries.begin(), static_cast<std::ptrdiff_t>(place->second))->second = i;
    }
  }
  tok["normalizer"] = nullptr;
  const bool gpt2_regex = regexes.size() == 1 && (pre == "gpt-2" || pre == "default" || pre == "phi-2");
  if (gpt2_regex) {
    tok["pre_tokenizer"] = {
        {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  } else {
    if (regexes.size() != 1) return unsupported("the GGUF pre-tokenizer \"" + pre + "\" splits in several passes");
    tok["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", regexes[0]}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}}}}};
  }
  tok["post_processor"] = {
      {"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}};
  tok["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", true}, {"use_regex", true}};
  tok["model"] = {{"type", "BPE"},
                  {"dropout", nullptr},
                  {"unk_token", nullptr},
                  {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", nullptr},
                  {"fuse_unk", false},
                  {"byte_fallback", false},
                  {"ignore_merges", pre == "llama-bpe"},
                  {"vocab", vocab},
                  {"merges", merges}};
  return tok;
}

// tokenizer.json and tokenizer_config.json for a GGUF vocabulary: byte-level BPE ("gpt2") or SentencePiece-style
// ("llama", spm_vocab.hpp).
Result<std::pair<std::string, std::string>> hf_tokenizer(const GgufMetadata& md) {
  QRT_ASSIGN_OR_RETURN(std::string model, md.get_string("tokenizer.ggml.model"));
  if (model != "gpt2" && model != "llama")
    return unsupported("the GGUF tokenizer is \"" + model +
                       "\"; convert-model writes tokenizer.json for byte-level BPE (\"gpt2\") and "
                       "SentencePiece-style (\"llama\") vocabularies");
  QRT_ASSIGN_OR_RETURN(const std::vector<std::string>* tokens, md.get_string_array("tokenizer.ggml.tokens"));
  std::vector<int32_t> types(tokens->size(), 1);
  if (md.contains("tokenizer.ggml.token_type")) {
    QRT_ASSIGN_OR_RETURN(const std::vector<int32_t>* t, md.get_array_of<int32_t>("tokenizer.ggml.token_type"));
    if (t->size() != tokens->size()) return format_error("tokenizer.ggml.token_type does not match the tokens");
    types = *t;
  }
  ordered_json tok;
  if (model == "llama") {
    SpmVocab v;
    v.tokens = *tokens;
    v.types = types;
    QRT_ASSIGN_OR_RETURN(const std::vector<float>* scores, md.get_f32_array("tokenizer.ggml.scores"));
    v.scores = *scores;
    if (md.contains("tokenizer.ggml.add_space_prefix")) {
      QRT_ASSIGN_OR_RETURN(v.add_space_prefix, md.get_bool("tokenizer.ggml.add_space_prefix"));
    }
    QRT_ASSIGN_OR_RETURN(tok, spm_tokenizer_json(v));
  } else {
    QRT_ASSIGN_OR_RETURN(tok, gpt2_tokenizer_json(md, tokens, types));
  }
  ordered_json cfg;
  auto named = [&](const char* key, const char* cfg_key) -> Status {
    if (!md.contains(key)) return ok_status();
    QRT_ASSIGN_OR_RETURN(uint32_t id, md.get_u32(key));
    if (id < tokens->size()) cfg[cfg_key] = (*tokens)[id];
    return ok_status();
  };
  QRT_TRY(named("tokenizer.ggml.bos_token_id", "bos_token"));
  QRT_TRY(named("tokenizer.ggml.eos_token_id", "eos_token"));
  QRT_TRY(named("tokenizer.ggml.padding_token_id", "pad_token"));
  QRT_TRY(named("tokenizer.ggml.unknown_token_id", "unk_token"));
  if (md.contains("tokenizer.ggml.add_bos_token")) {
    QRT_ASSIGN_OR_RETURN(bool add, md.get_bool("tokenizer.ggml.add_bos_token"));
    cfg["add_bos_token"] = add;
  } else if (model == "llama") {
    cfg["add_bos_token"] = true;  // llama.cpp's default for SentencePiece vocabularies without the key
  }
  if (md.contains("tokenizer.ggml.add_eos_token")) {
    QRT_ASSIGN_OR_RETURN(bool add, md.get_bool("tokenizer.ggml.add_eos_token"));
    cfg["add_eos_token"] = add;
  }
  if (md.contains("tokenizer.chat_template")) {
    QRT_ASSIGN_OR_RETURN(std::string t, md.get_string("tokenizer.chat_template"));
    cfg["chat_template"] = t;
  }
  return std::pair{tok.dump(), cfg.dump(2) + "\n"};
}

Status write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  return out ? ok_status() : io_error("writing " + p.string() + " failed");
}

// Rows of a GGUF Q or K tensor back in Hugging Face's order (rope_rows.hpp).
std::shared_ptr<std::vector<uint8_t>> unpermute(const QuantTensor& t, int heads) {
  auto out = std::make_shared<std::vector<uint8_t>>(t.data.size);
  const int64_t rows = t.shape.size() >= 2 ? t.numel() / t.cols() : t.numel();
  reorder_rope_rows(t.data.data, out->data(), rows, t.data.size / static_cast<uint64_t>(rows), heads, true);
  return out;
}

}  // namespace

// GGML type codes mistral.rs reads from UQFF's GGML family (spec/uqff.md §3.1).
bool uqff_ggml_code(int code) {
  return code == 0 || code == 1 || code == 30 || (code >= 2 && code <= 15 && code != 4 && code != 5);
}

Result<UqffExportReport> write_uqff_from_gguf(const ModelSource& source, const std::string& dir,
                                              const std::string& stem, const UqffFromGgufOptions& options) {
  if (!source.gguf_metadata) return unsupported(source.path + " is not a GGUF model");
  const GgufMetadata& md = *source.gguf_metadata;
  QRT_ASSIGN_OR_RETURN(ModelConfig c, arch::config_from_gguf(arch::GgufMetadataView(md)));
  if (!llama_family(c) && c.architecture != "qwen2" && c.architecture != "qwen3" && c.architecture != "qwen3moe" &&
      c.architecture != "phi3" && c.architecture != "gemma2" && c.architecture != "gemma3" &&
      c.architecture != "deepseek2" && c.architecture != "gpt-oss")
    return unsupported("convert-model does not write UQFF exports of " + c.architecture +
                       " GGUF models yet (llama, mistral, mixtral, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3, "
                       "gpt-oss, deepseek2)");
  QRT_ASSIGN_OR_RETURN(names::CanonicalTensors canonical,
                       names::canonicalize(source.tensors, names::NameScheme::kGguf));
  arch::apply_tensor_presence(canonical.tensors, &c);
  std::vector<std::shared_ptr<std::vector<uint8_t>>> merged;  // kv_b_proj rebuilt from split files
  if (c.kv_lora_rank > 0) QRT_TRY(merge_deepseek_kv_b(c, &canonical.tensors, &merged));
  const bool gemma = c.architecture == "gemma2" || c.architecture == "gemma3";
  // LongRoPE's factor tensors (llama.cpp's phi3) go into config.json's rope_scaling, as Phi3Config holds them.
  const bool has_long = canonical.tensors.count(std::string(names::kRopeFactorsLong)) != 0;
  if (has_long != (canonical.tensors.count(std::string(names::kRopeFactorsShort)) != 0))
    return format_error("the GGUF holds only one of " + std::string(names::kRopeFactorsLong) + " and " +
                        std::string(names::kRopeFactorsShort) + "; LongRoPE needs both");
  for (auto [name, out] : {std::pair{names::kRopeFactorsLong, &c.rope.long_factor},
                           std::pair{names::kRopeFactorsShort, &c.rope.short_factor}}) {
    auto it = canonical.tensors.find(std::string(name));
    if (it == canonical.tensors.end()) continue;
    QRT_ASSIGN_OR_RETURN(*out, dense_values(it->second));
    if (static_cast<int>(out->size()) != c.rope.rot_dim / 2)
      return format_error(it->second.name + " holds " + std::to_string(out->size()) + " factors, not one per rotary "
                          "pair (" + std::to_string(c.rope.rot_dim / 2) + ")");
    canonical.tensors.erase(it);
  }
  // llama.cpp's phi3 keeps the fused [gate; up] projection as ffn_up of 2 * ffn rows (no ffn_gate); as one module,
  // mistral.rs' gate_up_proj, it keeps its blocks whole. The same rule as the loader's split (fused_tensors.hpp).
  for (int l = 0; l < c.layers && c.ffn > 0; ++l) {
    const std::string up = names::layer_tensor(l, names::LayerTensor::kFfnUp);
    const std::string gate_up = names::layer_tensor(l, names::LayerTensor::kFfnGateUp);
    auto it = canonical.tensors.find(up);
    if (it == canonical.tensors.end() || it->second.shape.empty() || it->second.shape[0] != 2 * int64_t{c.ffn} ||
        canonical.tensors.count(names::layer_tensor(l, names::LayerTensor::kFfnGate)))
      continue;
    for (const bool bias : {false, true}) {
      auto node = canonical.tensors.extract(bias ? names::bias_of(up) : up);
      if (node.empty()) continue;
      node.key() = bias ? names::bias_of(gate_up) : gate_up;
      canonical.tensors.insert(std::move(node));
    }
  }
  // Llama 3.x files carry their RoPE scaling as a rope_freqs tensor: back into config.json's rope_scaling.
  if (auto it = canonical.tensors.find(std::string(names::kRopeFreqs)); it != canonical.tensors.end()) {
    QRT_ASSIGN_OR_RETURN(const std::vector<float> divisors, dense_values(it->second));
    Status s = llama3_rope_from_divisors(divisors, c.head_dim, &c.rope);
    if (!s.ok()) return s.with_context(it->second.name);
    canonical.tensors.erase(it);
  }
  QRT_ASSIGN_OR_RETURN(ordered_json config, hf_config(c));
  QRT_ASSIGN_OR_RETURN(auto tokenizer, hf_tokenizer(md));

  // Every tensor under its Hugging Face name, Q/K rows reordered; modules for the shards, the rest residual.
  std::vector<std::shared_ptr<std::vector<uint8_t>>> storage;
  std::vector<std::shared_ptr<quant::QuantBuffers>> repacked_mxfp4;
  std::vector<std::unique_ptr<QuantTensor>> renamed;
  std::vector<std::unique_ptr<UqffLayer>> layers;
  std::map<std::string, const QuantTensor*> biases;  // module key -> bias
  std::vector<std::pair<std::string, const UqffLayer*>> modules;
  std::vector<const QuantTensor*> residual;
  for (const auto& [key, t] : canonical.tensors) {
    const auto hf = names::hf_from_canonical(key, c.architecture, c.post_norms);
    if (!hf) return unsupported("tensor " + t.name + " has no Hugging Face name");
    auto r = std::make_unique<QuantTensor>(t);
    r->name = *hf;
    const bool q = key.find(".attn_q") != std::string::npos && key.find("_norm") == std::string::npos;
    const bool k = key.find(".attn_k") != std::string::npos && key.find("_norm") == std::string::npos;
    if (llama_family(c) && (q || k)) {
      storage.push_back(unpermute(t, q ? c.heads : c.kv_heads));
      r->data = ByteSpan{storage.back()->data(), storage.back()->size()};
    }
    const bool norm = key.size() >= 4 && key.compare(key.size() - 4, 4, "norm") == 0;
    if (gemma && norm) {
      // GGUF's Gemma norms hold 1 + w; config.json checkpoints (and mistral.rs) hold w.
      QRT_ASSIGN_OR_RETURN(std::vector<float> values, decoded_values(t));
      auto bytes = std::make_shared<std::vector<uint8_t>>(values.size() * sizeof(float));
      for (size_t i = 0; i < values.size(); ++i) {
        const float w = values[i] - 1.0f;
        std::memcpy(bytes->data() + i * sizeof(float), &w, sizeof(float));
      }
      storage.push_back(bytes);
      r->format = quant::FormatId::kF32;
      r->data = ByteSpan{bytes->data(), bytes->size()};
      r->scales = r->biases = {};
    }
    // GGUF's MXFP4 blocks become UQFF's MXFP4 layer (tag 6): the same codes and exponents, repacked.
    UqffTag tag = UqffTag::kGgml;
    if (r->format == quant::FormatId::kMXFP4_GGML) {
      auto repacked = std::make_shared<quant::QuantBuffers>();
      const int64_t cols = r->cols();
      mxfp4_gguf_to_uqff(r->data.data, r->numel() / cols, cols, &repacked->data, &repacked->scales);
      r->format = quant::FormatId::kMXFP4;
      r->data = ByteSpan{repacked->data.data(), repacked->data.size()};
      r->scales = ByteSpan{repacked->scales.data(), repacked->scales.size()};
      repacked_mxfp4.push_back(std::move(repacked));
      tag = UqffTag::kMxfp4;
    }
    const bool is_bias = hf->size() > 5 && hf->compare(hf->size() - 5, 5, ".bias") == 0;
    const auto [module, expert] = uqff_module_of(is_bias ? hf->substr(0, hf->size() - 5) + ".weight" : *hf);
    const quant::FormatInfo info = quant::format_info(r->format);
    const bool quantized = info.family != quant::Family::kDense;
    const bool requantize = quantized && tag == UqffTag::kGgml && !uqff_ggml_code(info.ggml_type);
    if (requantize && !options.requantize)
      return unsupported(t.name + " is " + std::string(info.name) +
                         ", which UQFF's GGML family cannot hold (types "
                         "mistral.rs reads: f32, f16, bf16, q4_0 ... q8_1, q2k ... q8k); pass --requantize TYPE");
    if (is_bias && !module.empty()) {
      biases[module] = r.get();
    } else if (!module.empty() || (quantized && key == names::kTokenEmbd)) {
      const std::string module_key = module.empty() ? std::string("model.embed_tokens") : module;
      auto l = std::make_unique<UqffLayer>();
      if (requantize) {
        // Decoded, then quantized to the asked type (with mistral.rs' fallbacks, e.g. q4k -> q4_1 for short rows).
        QRT_ASSIGN_OR_RETURN(std::vector<float> values, decoded_values(*r));
        QuantTensor dense = *r;
        dense.format = quant::FormatId::kF32;
        dense.data = ByteSpan{reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)};
        dense.scales = dense.biases = {};
        const std::vector<float>* importance = nullptr;
        if (options.importance != nullptr) {
          QRT_ASSIGN_OR_RETURN(importance, options.importance->for_tensor(
                                               t.name, dense.cols(), dense.shape.size() == 3 ? dense.shape[0] : 1));
        }
        QRT_ASSIGN_OR_RETURN(*l, quantize_uqff_layer(dense, *options.requantize, module_key, importance));
        const std::string why = std::string(info.name) + " has no UQFF type: requantized to " +
                                std::string(quant::format_name(l->tensor.format));
        l->fallback = l->fallback.empty() ? why : why + " (" + l->fallback + ")";
      } else {
        l->tensor = *r;
        l->tag = quantized ? tag : UqffTag::kUnquant;
      }
      modules.emplace_back(module_key, l.get());
      layers.push_back(std::move(l));
    } else if (quantized) {
      return unsupported(t.name + " is quantized (" + std::string(info.name) + ") but is not a module UQFF quantizes");
    } else {
      residual.push_back(r.get());
    }
    renamed.push_back(std::move(r));
  }
  std::vector<UqffModule> set;
  for (const auto& [key, layer] : modules) {
    auto b = biases.find(key);
    set.push_back({key, layer, b == biases.end() ? nullptr : b->second});
  }
  UqffExportReport report;
  uint64_t total = 0;
  for (const UqffModule& m : set) total += uqff_layer_bytes(*m.layer);
  Progress progress("converting", total, options.quiet ? Progress::Mode::kQuiet : Progress::Mode::kAuto);
  QRT_ASSIGN_OR_RETURN(UqffExportReport::Output out,
                       write_uqff_set(dir, stem, stem, set, uint64_t{10} << 30,
                                      [&](uint64_t bytes) { progress.add(bytes); }));
  progress.finish();
  report.outputs.push_back(std::move(out));
  QRT_TRY(write_uqff_residual(dir, residual));
  QRT_TRY(write_text(fs::path(dir) / "config.json", config.dump(2) + "\n"));
  QRT_TRY(write_text(fs::path(dir) / "tokenizer.json", tokenizer.first));
  QRT_TRY(write_text(fs::path(dir) / "tokenizer_config.json", tokenizer.second));
  QRT_TRY(write_uqff_report(dir, report));
  return report;
}

}  // namespace qrt::convert
