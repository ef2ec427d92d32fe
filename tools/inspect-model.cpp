// inspect-model: what a model is — source kind, architecture and config, tokenizer summary, and every tensor
// (name as stored, format, logical shape, bytes, file). --json prints the same as JSON; --dump writes one tensor
// dequantized to little-endian float32 in row-major logical order.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "loader/gguf_metadata.hpp"
#include "loader/open_model.hpp"
#include "models/arch/arch.hpp"
#include "models/arch/gguf_metadata_view.hpp"
#include "models/transformer.hpp"

namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}


// The config as qrt runs it (ModelConfig's feature flags), whatever file it came from.
nlohmann::json model_json(const qrt::ModelConfig& c) {
  static const char* const kScaling[] = {"none", "linear", "llama3", "yarn", "longrope"};
  nlohmann::json rope = {{"theta", c.rope.theta},
                         {"rotary_dims", c.rope.rot_dim},
                         {"layout", c.rope.layout == qrt::RopeLayout::kInterleaved ? "interleaved" : "half-split"},
                         {"scaling", kScaling[static_cast<int>(c.rope.scaling)]}};
  if (c.rope.scaling != qrt::RopeScaling::kNone) {
    rope["factor"] = c.rope.factor;
    rope["original_context"] = c.rope.original_context;
    rope["attn_factor"] = c.rope.attn_factor;
  }
  if (c.rope.scaling == qrt::RopeScaling::kLongRope) {
    rope["short_factors"] = c.rope.short_factor.size();  // GGUF: read from its tensors when the model is built
    rope["long_factors"] = c.rope.long_factor.size();
  }
  nlohmann::json m = {{"architecture", c.architecture}, {"layers", c.layers},   {"hidden", c.hidden},
                      {"heads", c.heads},               {"kv_heads", c.kv_heads}, {"head_dim", c.head_dim},
                      {"ffn", c.ffn},                   {"vocab", c.vocab_size}, {"context", c.context_length},
                      {"norm_eps", c.norm_eps},         {"rope", rope}};
  if (c.sliding_window > 0) m["sliding_window"] = c.sliding_window;
  // Gemma's features, shown only where a model has them.
  if (c.sliding_window > 0 && c.sliding_window_pattern > 0) m["global_attention_every"] = c.sliding_window_pattern;
  if (c.rope_local_theta > 0.0f) m["rope"]["local_theta"] = c.rope_local_theta;
  if (c.activation == qrt::Activation::kGeluTanh) m["activation"] = "gelu_tanh";
  if (c.activation == qrt::Activation::kSwigluClamped) {
    m["activation"] = "swiglu_clamped";
    m["swiglu_limit"] = c.swiglu_limit;
  }
  if (c.rope.scaling == qrt::RopeScaling::kYarn && !c.rope.yarn_truncate) m["rope"]["yarn_truncate"] = false;
  if (c.embedding_scale != 1.0f) m["embedding_scale"] = c.embedding_scale;
  if (c.norm_weight_offset != 0.0f) m["norm_weight_offset"] = c.norm_weight_offset;
  if (c.attention_scale > 0.0f) m["attention_scale"] = c.attention_scale;
  if (c.attn_softcap > 0.0f) m["attn_softcap"] = c.attn_softcap;
  if (c.final_softcap > 0.0f) m["final_softcap"] = c.final_softcap;
  if (c.experts > 0) {
    m["experts"] = {
        {"count", c.experts}, {"used", c.experts_used}, {"ffn", c.expert_ffn}, {"normalize", c.normalize_topk}};
    // DeepSeek's routing and shared experts.
    if (c.router_sigmoid) m["experts"]["scores"] = "sigmoid";
    if (c.expert_choice_bias) m["experts"]["choice_bias"] = true;
    if (c.expert_groups > 1)
      m["experts"]["groups"] = {{"count", c.expert_groups},
                                {"used", c.expert_groups_used},
                                {"score", c.group_score_top2 ? "top2_sum" : "max"}};
    if (c.routed_scale != 1.0f) m["experts"]["scale"] = c.routed_scale;
    if (c.shared_expert_ffn > 0) m["experts"]["shared_ffn"] = c.shared_expert_ffn;
    if (c.leading_dense_layers > 0) m["experts"]["leading_dense_layers"] = c.leading_dense_layers;
  }
  if (c.kv_lora_rank > 0)  // DeepSeek's multi-head latent attention
    m["latent_attention"] = {{"q_lora_rank", c.q_lora_rank},
                             {"kv_lora_rank", c.kv_lora_rank},
                             {"qk_nope_dim", c.qk_nope_dim},
                             {"qk_rope_dim", c.qk_rope_dim},
                             {"v_head_dim", c.v_head_dim},
                             {"cache_row", c.qk_rope_dim + c.kv_lora_rank}};
  if (c.extra_layers > 0) m["extra_layers_skipped"] = c.extra_layers;
  for (auto [flag, on] : {std::pair{"qk_norm", c.qk_norm}, std::pair{"attention_bias", c.attention_bias},
                          std::pair{"mlp_bias", c.mlp_bias}, std::pair{"tied_embeddings", c.tied_embeddings},
                          std::pair{"post_norms", c.post_norms}, std::pair{"attention_sinks", c.attention_sinks},
                          std::pair{"router_bias", c.router_bias}, std::pair{"expert_bias", c.expert_bias}})
    if (on) m[flag] = true;
  return m;
}

nlohmann::json describe(const qrt::ModelSource& src) {
  nlohmann::json j;
  j["source"] = qrt::source_kind_name(src.kind);
  j["path"] = src.path;
  nlohmann::json config = nlohmann::json::parse(src.hf_config_json, nullptr, false);
  if (!src.hf_config_json.empty() && !config.is_discarded()) {
    j["config"] = config;
    if (config.contains("architectures") && config["architectures"].is_array() && !config["architectures"].empty())
      j["architecture"] = config["architectures"][0];
    else if (config.contains("model_type"))
      j["architecture"] = config["model_type"];
  }
  nlohmann::json tok;
  if (src.gguf_metadata) {
    const auto& md = *src.gguf_metadata;
    if (auto arch = md.get_string("general.architecture"); arch.ok()) j["architecture"] = *arch;
    j["metadata_keys"] = md.size();
    if (auto model = md.get_string("tokenizer.ggml.model"); model.ok()) tok["gguf_model"] = *model;
    if (auto pre = md.get_string("tokenizer.ggml.pre"); pre.ok()) tok["gguf_pre"] = *pre;
    if (auto tokens = md.get_string_array("tokenizer.ggml.tokens"); tokens.ok()) tok["tokens"] = (*tokens)->size();
  }
  tok["tokenizer_json"] = !src.tokenizer.tokenizer_json.empty();
  tok["tokenizer_config_json"] = !src.tokenizer.tokenizer_config_json.empty();
  tok["chat_template"] = !src.tokenizer.chat_template.empty();
  j["tokenizer"] = tok;
  nlohmann::json tensors = nlohmann::json::array();
  uint64_t total = 0;
  for (const auto& [name, t] : src.tensors) {
    tensors.push_back({{"name", name},
                       {"format", std::string(qrt::quant::format_name(t.format))},
                       {"shape", t.shape},
                       {"bytes", t.bytes()},
                       {"file", t.file}});
    total += t.bytes();
  }
  j["tensors"] = tensors;
  j["tensor_bytes"] = total;
  // What running it takes, by owner: the weights as stored, and the KV cache a session holds per token of context
  // (f32 K and V of every layer, as on the CPU; f16 as on CUDA) - when the architecture is one qrt runs.
  qrt::Result<qrt::ModelConfig> arch_config = qrt::invalid_argument("no config");
  if (src.gguf_metadata) {
    arch_config = qrt::arch::config_from_gguf(qrt::arch::GgufMetadataView(*src.gguf_metadata));
  } else if (j.contains("config")) {
    arch_config = qrt::arch::config_from_hf(j["config"]);
  }
  if (!arch_config.ok() && (src.gguf_metadata || j.contains("config"))) {
    j["model_unsupported"] = arch_config.status().message();  // why qrt would not run it
  }
  if (arch_config.ok()) {
    j["model"] = model_json(*arch_config);
    const uint64_t per_token = qrt::kv_cache_bytes_per_token(*arch_config);
    const uint64_t per_token_f16 = qrt::kv_cache_bytes_per_token(*arch_config, 1, qrt::KvType::kF16);
    nlohmann::json memory = {
        {"weights", total}, {"kv_cache_per_token", per_token}, {"kv_cache_per_token_f16", per_token_f16}};
    if (arch_config->context_length > 0) {
      memory["trained_context"] = arch_config->context_length;
      memory["kv_cache_at_trained_context"] = per_token * static_cast<uint64_t>(arch_config->context_length);
    }
    j["memory"] = memory;
  }
  return j;
}

void print_text(const nlohmann::json& j) {
  if (j.contains("model")) std::printf("model:        %s\n", j["model"].dump().c_str());
  if (j.contains("model_unsupported"))
    std::printf("model:        not runnable by qrt: %s\n", j["model_unsupported"].get<std::string>().c_str());
  std::printf("source:       %s (%s)\n", j["source"].get<std::string>().c_str(), j["path"].get<std::string>().c_str());
  if (j.contains("architecture")) std::printf("architecture: %s\n", j["architecture"].get<std::string>().c_str());
  if (j.contains("metadata_keys")) std::printf("metadata:     %zu GGUF keys\n", j["metadata_keys"].get<size_t>());
  std::printf("tokenizer:    %s\n", j["tokenizer"].dump().c_str());
  std::printf("tensors:      %zu, %.3f MB\n", j["tensors"].size(), j["tensor_bytes"].get<double>() / 1e6);
  if (j.contains("memory")) {
    const nlohmann::json& m = j["memory"];
    std::printf("memory:       weights %.3f MB; KV cache %llu bytes per token of context (f16: %llu)",
                m["weights"].get<double>() / 1e6, m["kv_cache_per_token"].get<unsigned long long>(),
                m["kv_cache_per_token_f16"].get<unsigned long long>());
    if (m.contains("trained_context"))
      std::printf(", %.3f MB at the trained context of %lld tokens", m["kv_cache_at_trained_context"].get<double>() / 1e6,
                  m["trained_context"].get<long long>());
    std::printf("\n");
  }
  std::printf("\n");
  std::printf("%-56s %-10s %-22s %12s  %s\n", "name", "format", "shape", "bytes", "file");
  for (const auto& t : j["tensors"]) {
    std::printf("%-56s %-10s %-22s %12llu  %s\n", t["name"].get<std::string>().c_str(),
                t["format"].get<std::string>().c_str(), shape_text(t["shape"].get<std::vector<int64_t>>()).c_str(),
                static_cast<unsigned long long>(t["bytes"].get<uint64_t>()), t["file"].get<std::string>().c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"inspect-model: show what a model is (UQFF, GGUF, Ollama name:tag, or HF checkpoint)"};
  std::string model, dump, out;
  bool json = false, verify = false;
  app.add_option("model", model, "UQFF directory or shard, GGUF file, Ollama name:tag, or HF checkpoint directory")
      ->required();
  app.add_flag("--json", json, "print as JSON");
  app.add_flag("--verify", verify, "Ollama models: check every blob against its sha256 digest");
  app.add_option("--dump", dump, "tensor name (as stored in the file) to write dequantized");
  app.add_option("--out", out, "output file for --dump (little-endian float32, row-major)");
  CLI11_PARSE(app, argc, argv);
  if (!dump.empty() && out.empty()) return fail("--dump needs --out FILE");

  qrt::OpenOptions options;
  options.verify_digests = verify;
  auto src = qrt::open_model_source(model, options);
  if (!src.ok()) return fail(src.status().message());
  if (!dump.empty()) {
    auto it = src->tensors.find(dump);
    if (it == src->tensors.end()) return fail("no tensor named '" + dump + "' in " + model);
    const qrt::QuantTensor& t = it->second;
    std::vector<float> values(static_cast<size_t>(t.numel()));
    qrt::Status s = qrt::cpu::dequantize(t.format, t.view(), values.data());
    if (!s.ok()) return fail("cannot dequantize '" + dump + "': " + s.message());
    std::ofstream f(out, std::ios::binary);
    if (!f.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * 4)))
      return fail("cannot write " + out);
    return 0;
  }
  const nlohmann::json j = describe(*src);
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    print_text(j);
  }
  return 0;
}
