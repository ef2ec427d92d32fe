// qrt_model_forward: runs qrt's transformer (CPU backend) on a model described by a safetensors file plus a
// Hugging Face config.json or a JSON object of GGUF metadata keys, and writes the logits of every position, so
// that test_model_forward.py can compare them with its numpy reference forward.
//
//   qrt_model_forward (--weights w.safetensors (--hf-config config.json | --gguf-metadata md.json) | --model PATH)
//       --tokens 3,1,4 [--positions 0,1,2] [--chunks 2,1] [--format q8_0] [--tensor-format blk.0.attn_q=f16]
//       [--dump-weights dq.safetensors] [--print-config cfg.json] --logits out.f32
//
// --model reads a model qrt opens by path (a UQFF export set, a Hugging Face checkpoint) with its own config.json.
// --format quantizes every matrix (2-D and 3-D tensors) with qrt's reference quantizer (cpu::quantize) where
// its row length fits the format; --tensor-format overrides one canonical tensor (and must fit). The weights
// the forward pass actually used are written, dequantized to f32 under their canonical names, by
// --dump-weights, so the reference sees exactly the same numbers. The chunks are consecutive forward() calls
// on one sequence (prompt as a batch, then token by token through the KV cache).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "loader/open_model.hpp"
#include "loader/safetensors.hpp"
#include "models/arch/arch.hpp"
#include "models/arch/gguf_metadata_view.hpp"
#include "models/tensor_names.hpp"
#include "models/transformer.hpp"
#include "backend/cpu_backend.hpp"

namespace {

using namespace qrt;

Result<std::vector<int32_t>> parse_ints(const std::string& s, const char* what) {
  std::vector<int32_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size()) throw std::invalid_argument(item);
      out.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return invalid_argument(std::string(what) + ": \"" + item + "\" is not an integer");
    }
  }
  return out;
}

Result<nlohmann::json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) return io_error("cannot open " + path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return format_error(path + ": not valid JSON");
  return j;
}

// Writes f32 tensors as a safetensors file: u64 header length, JSON header, data.
Status write_safetensors_f32(const std::string& path, const std::map<std::string, std::pair<std::vector<int64_t>,
                                                                                            std::vector<float>>>& t) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, entry] : t) {
    const uint64_t bytes = entry.second.size() * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", entry.first}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  while (h.size() % 8 != 0) h.push_back(' ');
  std::ofstream out(path, std::ios::binary);
  if (!out) return io_error("cannot write " + path);
  const uint64_t n = h.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  for (const auto& [name, entry] : t)
    out.write(reinterpret_cast<const char*>(entry.second.data()),
              static_cast<std::streamsize>(entry.second.size() * sizeof(float)));
  return out ? ok_status() : io_error("short write to " + path);
}

// A stacked [experts, out, in] tensor is `experts` independently packed [out, in] matrices, one after another in
// each part (formats such as HQQ group across a whole matrix, so the stack is not one big matrix).
int64_t matrix_count(const QuantTensor& t) { return t.shape.size() == 3 ? t.shape[0] : 1; }

quant::QuantView matrix_view(const QuantTensor& t, int64_t m, const quant::PartSizes& per_matrix) {
  quant::QuantView v = t.view();
  v.rows /= matrix_count(t);
  v.data += m * per_matrix.data;
  if (v.scales) v.scales += m * per_matrix.scales;
  if (v.biases) v.biases += m * per_matrix.biases;
  return v;
}

Result<std::vector<float>> dequantize_tensor(const QuantTensor& t) {
  const int64_t n = matrix_count(t), rows = t.rows() / n;
  QRT_ASSIGN_OR_RETURN(quant::PartSizes per_matrix, cpu::part_sizes(t.format, rows, t.cols(), t.params));
  std::vector<float> values(static_cast<size_t>(t.numel()));
  for (int64_t m = 0; m < n; ++m)
    QRT_TRY(cpu::dequantize(t.format, matrix_view(t, m, per_matrix), values.data() + m * rows * t.cols()));
  return values;
}

Result<quant::QuantBuffers> quantize_tensor(quant::FormatId format, const std::vector<float>& values,
                                            const QuantTensor& t, const quant::QuantParams& params) {
  const int64_t n = matrix_count(t), rows = t.rows() / n;
  quant::QuantBuffers all;
  for (int64_t m = 0; m < n; ++m) {
    QRT_ASSIGN_OR_RETURN(quant::QuantBuffers b,
                         cpu::quantize(format, values.data() + m * rows * t.cols(), rows, t.cols(), params));
    all.data.insert(all.data.end(), b.data.begin(), b.data.end());
    all.scales.insert(all.scales.end(), b.scales.begin(), b.scales.end());
    all.biases.insert(all.biases.end(), b.biases.begin(), b.biases.end());
  }
  return all;
}

nlohmann::json config_json(const ModelConfig& c) {
  return {
      {"architecture", c.architecture},
      {"vocab_size", c.vocab_size},
      {"hidden", c.hidden},
      {"layers", c.layers},
      {"heads", c.heads},
      {"kv_heads", c.kv_heads},
      {"head_dim", c.head_dim},
      {"ffn", c.ffn},
      {"norm_eps", c.norm_eps},
      {"rope_layout", c.rope.layout == RopeLayout::kInterleaved ? "interleaved" : "half_split"},
      {"rope_theta", c.rope.theta},
      {"rope_rot_dim", c.rope.rot_dim},
      {"rope_scaling", static_cast<int>(c.rope.scaling)},
      {"rope_factor", c.rope.factor},
      {"rope_attn_factor", c.rope.attn_factor},
      {"qk_norm", c.qk_norm},
      {"attention_bias", c.attention_bias},
      {"attention_out_bias", c.attention_out_bias},
      {"mlp_bias", c.mlp_bias},
      {"tied_embeddings", c.tied_embeddings},
      {"sliding_window", c.sliding_window},
      {"experts", c.experts},
      {"experts_used", c.experts_used},
      {"expert_ffn", c.expert_ffn},
      {"normalize_topk", c.normalize_topk},
      {"sliding_window_pattern", c.sliding_window_pattern},
      {"rope_local_theta", c.rope_local_theta},
      {"embedding_scale", c.embedding_scale},
      {"norm_weight_offset", c.norm_weight_offset},
      {"post_norms", c.post_norms},
      {"attention_scale", c.attention_scale},
      {"attn_softcap", c.attn_softcap},
      {"final_softcap", c.final_softcap},
      {"activation", c.activation == Activation::kGeluTanh        ? "gelu_tanh"
                     : c.activation == Activation::kSwigluClamped ? "swiglu_clamped"
                                                                  : "silu"},
      {"swiglu_limit", c.swiglu_limit},
      {"attention_sinks", c.attention_sinks},
      {"router_bias", c.router_bias},
      {"expert_bias", c.expert_bias},
      {"rope_yarn_truncate", c.rope.yarn_truncate},
      {"router_sigmoid", c.router_sigmoid},
      {"expert_choice_bias", c.expert_choice_bias},
      {"expert_groups", c.expert_groups},
      {"expert_groups_used", c.expert_groups_used},
      {"group_score_top2", c.group_score_top2},
      {"routed_scale", c.routed_scale},
      {"shared_expert_ffn", c.shared_expert_ffn},
      {"leading_dense_layers", c.leading_dense_layers},
      {"q_lora_rank", c.q_lora_rank},
      {"kv_lora_rank", c.kv_lora_rank},
      {"qk_nope_dim", c.qk_nope_dim},
      {"qk_rope_dim", c.qk_rope_dim},
      {"v_head_dim", c.v_head_dim},
      {"latent_norm_eps", c.latent_norm_eps},
  };
}

Status run(int argc, char** argv, int* exit_code) {
  CLI::App app{"qrt_model_forward: logits of qrt's CPU transformer for the model oracle test"};
  std::string weights, hf_config, gguf_metadata, tokens_arg, positions_arg, chunks_arg, default_format, dump_path,
      logits_path, config_out;
  std::vector<std::string> tensor_formats;
  int64_t capacity = 0;
  int group_size = 0;
  std::string model_path;
  app.add_option("--weights", weights, "safetensors file");
  app.add_option("--model", model_path, "a model path qrt opens (UQFF export, HF checkpoint), instead of --weights");
  app.add_option("--hf-config", hf_config, "Hugging Face config.json");
  app.add_option("--gguf-metadata", gguf_metadata, "JSON object of GGUF metadata keys");
  app.add_option("--tokens", tokens_arg, "comma-separated token ids")->required();
  app.add_option("--positions", positions_arg, "comma-separated positions (default 0, 1, ...)");
  app.add_option("--chunks", chunks_arg, "comma-separated forward() sizes (default: one call)");
  app.add_option("--format", default_format, "format for every matrix that fits it");
  app.add_option("--tensor-format", tensor_formats, "canonical_name=format");
  app.add_option("--dump-weights", dump_path, "write the weights used, dequantized, as f32 safetensors");
  app.add_option("--print-config", config_out, "write the ModelConfig as JSON");
  app.add_option("--logits", logits_path, "output: f32 [tokens, vocab]")->required();
  app.add_option("--capacity", capacity, "sequence capacity (default: the token count)");
  app.add_option("--group-size", group_size, "group size for group-scaled formats (AFQ, HQQ, ...)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return ok_status();
  }
  if (weights.empty() == model_path.empty()) return invalid_argument("give exactly one of --weights, --model");
  if (!weights.empty() && hf_config.empty() == gguf_metadata.empty())
    return invalid_argument("give exactly one of --hf-config, --gguf-metadata");

  // Weights and config.
  TensorTable file_tensors;
  SafetensorsFile file;
  ModelSource source;
  nlohmann::json hf_json;
  if (!model_path.empty()) {
    QRT_ASSIGN_OR_RETURN(source, open_model_source(model_path));
    if (source.hf_config_json.empty() && !source.gguf_metadata)
      return unsupported("--model " + model_path + ": neither config.json nor GGUF metadata");
    if (!source.hf_config_json.empty()) {
      hf_json = nlohmann::json::parse(source.hf_config_json, nullptr, false);
      if (hf_json.is_discarded()) return format_error(model_path + ": config.json is not valid JSON");
    }
    file_tensors = source.tensors;
  } else {
    QRT_ASSIGN_OR_RETURN(file, read_safetensors(weights));
    for (const SafetensorsEntry& e : file.entries) {
      QRT_ASSIGN_OR_RETURN(QuantTensor t, dense_quant_tensor(e, weights));
      file_tensors.emplace(e.name, std::move(t));
    }
  }
  ModelConfig config;
  names::CanonicalTensors canonical;
  if (source.gguf_metadata) {  // --model on a GGUF file
    QRT_ASSIGN_OR_RETURN(config, arch::config_from_gguf(arch::GgufMetadataView(*source.gguf_metadata)));
    QRT_ASSIGN_OR_RETURN(canonical, names::canonicalize(file_tensors, names::NameScheme::kGguf));
    arch::apply_tensor_presence(canonical.tensors, &config);
  } else if (!hf_config.empty() || !model_path.empty()) {
    if (!hf_config.empty()) {
      QRT_ASSIGN_OR_RETURN(hf_json, read_json(hf_config));
    }
    QRT_ASSIGN_OR_RETURN(config, arch::config_from_hf(hf_json));
    QRT_ASSIGN_OR_RETURN(canonical, names::canonicalize(file_tensors, names::NameScheme::kHuggingFace));
  } else {
    QRT_ASSIGN_OR_RETURN(nlohmann::json j, read_json(gguf_metadata));
    arch::JsonMetadataView md(j);
    QRT_ASSIGN_OR_RETURN(config, arch::config_from_gguf(md));
    QRT_ASSIGN_OR_RETURN(canonical, names::canonicalize(file_tensors, names::NameScheme::kGguf));
    arch::apply_tensor_presence(canonical.tensors, &config);
  }
  for (const std::string& name : canonical.ignored) std::fprintf(stderr, "note: ignoring tensor %s\n", name.c_str());

  // Requantize: every matrix to --format where it fits, named tensors to --tensor-format.
  std::map<std::string, quant::FormatId> overrides;
  for (const std::string& tf : tensor_formats) {
    const size_t eq = tf.find('=');
    if (eq == std::string::npos) return invalid_argument("--tensor-format " + tf + ": expected name=format");
    auto id = quant::format_from_name(tf.substr(eq + 1));
    if (!id) return invalid_argument("--tensor-format " + tf + ": unknown format");
    if (!canonical.tensors.count(tf.substr(0, eq))) return invalid_argument("--tensor-format " + tf + ": no such tensor");
    overrides[tf.substr(0, eq)] = *id;
  }
  std::optional<quant::FormatId> fallback;
  if (!default_format.empty()) {
    fallback = quant::format_from_name(default_format);
    if (!fallback) return invalid_argument("--format " + default_format + ": unknown format");
  }
  std::vector<std::unique_ptr<quant::QuantBuffers>> quantized;
  for (auto& [name, t] : canonical.tensors) {
    const bool explicit_format = overrides.count(name) != 0;
    if (!explicit_format && (!fallback || t.shape.size() < 2)) continue;
    const quant::FormatId target = explicit_format ? overrides[name] : *fallback;
    if (target == t.format) continue;
    QRT_ASSIGN_OR_RETURN(std::vector<float> values, dequantize_tensor(t));
    quant::QuantParams params;
    params.group_size = group_size;
    auto q = quantize_tensor(target, values, t, params);
    if (!q.ok()) {
      if (explicit_format) return q.status().with_context("quantizing " + name);
      std::fprintf(stderr, "note: %s stays %s (%s)\n", name.c_str(), std::string(quant::format_name(t.format)).c_str(),
                   q.status().message().c_str());
      continue;
    }
    quantized.push_back(std::make_unique<quant::QuantBuffers>(std::move(q).value()));
    const quant::QuantBuffers& b = *quantized.back();
    t.format = target;
    t.params = params;
    t.data = {b.data.data(), b.data.size()};
    t.scales = {b.scales.empty() ? nullptr : b.scales.data(), b.scales.size()};
    t.biases = {b.biases.empty() ? nullptr : b.biases.data(), b.biases.size()};
  }
  if (!dump_path.empty()) {
    std::map<std::string, std::pair<std::vector<int64_t>, std::vector<float>>> dump;
    for (const auto& [name, t] : canonical.tensors) {
      QRT_ASSIGN_OR_RETURN(std::vector<float> values, dequantize_tensor(t));
      dump[name] = {t.shape, std::move(values)};
    }
    QRT_TRY(write_safetensors_f32(dump_path, dump));
  }
  if (!config_out.empty()) {
    nlohmann::json j = config_json(config);
    for (const auto& [name, t] : canonical.tensors) j["tensor_formats"][name] = std::string(quant::format_name(t.format));
    std::ofstream out(config_out);
    out << j.dump(2) << "\n";
    if (!out) return io_error("cannot write " + config_out);
  }

  // Forward, chunk by chunk.
  QRT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, parse_ints(tokens_arg, "--tokens"));
  std::vector<int32_t> positions;
  if (!positions_arg.empty()) {
    QRT_ASSIGN_OR_RETURN(positions, parse_ints(positions_arg, "--positions"));
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) positions.push_back(static_cast<int32_t>(i));
  }
  std::vector<int32_t> chunks{static_cast<int32_t>(tokens.size())};
  if (!chunks_arg.empty()) {
    QRT_ASSIGN_OR_RETURN(chunks, parse_ints(chunks_arg, "--chunks"));
  }
  if (positions.size() != tokens.size()) return invalid_argument("--positions must match --tokens");
  CpuBackend backend;
  std::vector<float> all_logits;
  {
    QRT_ASSIGN_OR_RETURN(auto model, Transformer::create(backend, config, canonical.tensors));
    QRT_ASSIGN_OR_RETURN(auto seq, model->new_sequence(capacity > 0 ? capacity : static_cast<int64_t>(tokens.size())));
    size_t done = 0;
    for (int32_t n : chunks) {
      if (n <= 0 || done + static_cast<size_t>(n) > tokens.size())
        return invalid_argument("--chunks must be positive and sum to the token count");
      std::vector<float> logits;
      QRT_TRY(model->forward(*seq, std::span(tokens).subspan(done, static_cast<size_t>(n)),
                             std::span(positions).subspan(done, static_cast<size_t>(n)), LogitsFor::kAll, &logits));
      all_logits.insert(all_logits.end(), logits.begin(), logits.end());
      done += static_cast<size_t>(n);
    }
    if (done != tokens.size()) return invalid_argument("--chunks must sum to the token count");
  }
  if (backend.live_allocations() != 0 || backend.live_weights() != 0)
    return internal_error("device memory leaked: " + std::to_string(backend.live_allocations()) + " buffers, " +
                          std::to_string(backend.live_weights()) + " weights");
  std::ofstream out(logits_path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(all_logits.data()),
            static_cast<std::streamsize>(all_logits.size() * sizeof(float)));
  if (!out) return io_error("cannot write " + logits_path);
  return ok_status();
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  qrt::Status s = run(argc, argv, &exit_code);
  if (!s.ok()) {
    std::fprintf(stderr, "qrt_model_forward: %s\n", s.to_string().c_str());
    return 1;
  }
  return exit_code;
}
