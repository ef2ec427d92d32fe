#include "tools/convert/uqff_export.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "models/gpt_oss_experts.hpp"
#include "models/tensor_names.hpp"
#include "models/tokenizer/regex.hpp"
#include "qrt/version.hpp"
#include "tools/convert/parallel.hpp"
#include "tools/convert/progress.hpp"
#include "tools/convert/safetensors_writer.hpp"
#include "tools/convert/uqff_layers.hpp"

namespace qrt::convert {
namespace {

namespace fs = std::filesystem;
using quant::FormatId;

constexpr const char* kUqffVersion = "1.2.0";

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A tracked module of the checkpoint: its weight (or the experts that stack into it) and bias.
struct Module {
  const QuantTensor* weight = nullptr;
  std::map<int, const QuantTensor*> experts;
  const QuantTensor* bias = nullptr;
  QuantTensor stacked;  // the experts' weights as one [E, out, in] tensor (bytes in `storage`)
  std::shared_ptr<std::vector<uint8_t>> storage;
  const QuantTensor& source() const { return weight != nullptr ? *weight : stacked; }
};

// Stacks per-expert weights expert-major into one tensor, as mistral.rs does before quantizing.
Status stack_experts(const std::string& key, Module& m) {
  if (m.weight != nullptr) return format_error(key + ": present both stacked and per expert");
  const QuantTensor& first = *m.experts.begin()->second;
  const int experts = static_cast<int>(m.experts.size());
  if (m.experts.begin()->first != 0 || m.experts.rbegin()->first != experts - 1)
    return format_error(key + ": the per-expert weights are not numbered 0.." + std::to_string(experts - 1));
  m.storage = std::make_shared<std::vector<uint8_t>>();
  for (const auto& [e, t] : m.experts) {
    if (t->format != first.format || t->shape != first.shape || t->shape.size() != 2)
      return format_error(key + ": expert " + std::to_string(e) + " (" + t->name + ") differs in type or shape " +
                          "from expert 0, or is not 2-D");
    m.storage->insert(m.storage->end(), t->data.data, t->data.data + t->data.size);
  }
  m.stacked = first;
  m.stacked.name = key + ".weight (stacked from " + std::to_string(experts) + " experts)";
  m.stacked.shape = {experts, first.shape[0], first.shape[1]};
  m.stacked.data = ByteSpan{m.storage->data(), m.storage->size()};
  return ok_status();
}

nlohmann::json without_quantization_config(nlohmann::json j) {
  if (j.is_object()) {
    j.erase("quantization_config");
    for (auto& [k, v] : j.items()) v = without_quantization_config(v);
  } else if (j.is_array()) {
    for (auto& v : j) v = without_quantization_config(v);
  }
  return j;
}

Status write_text(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  return out ? ok_status() : io_error("writing " + p.string() + " failed");
}

void stamp(SafetensorsWriter& w) {
  w.set_metadata("uqff.producer", "qrt");
  w.set_metadata("uqff.version", kUqffVersion);
  w.set_metadata("uqff.producer.qrt.version", qrt::kVersion);
}

}  // namespace

std::pair<std::string, int> uqff_module_of(const std::string& name) {
  if (!ends_with(name, ".weight")) return {"", -1};
  const std::string base = name.substr(0, name.size() - 7);
  if (base == "lm_head" || base == "language_model.lm_head") return {base, -1};
  // A multimodal Gemma 3 keeps its text model's layers under language_model. (or model.language_model.): the same
  // modules, under their own names.
  std::string layers;
  for (const char* p : {"model.layers.", "language_model.model.layers.", "model.language_model.layers."})
    if (base.rfind(p, 0) == 0) layers = p;
  if (layers.empty()) return {"", -1};
  const size_t dot = base.find('.', layers.size());
  if (dot == std::string::npos) return {"", -1};
  const std::string layer = base.substr(layers.size(), dot - layers.size());
  if (layer.empty() || layer.find_first_not_of("0123456789") != std::string::npos) return {"", -1};
  const std::string rest = base.substr(dot + 1), prefix = base.substr(0, dot + 1);
  // Phi-3's fused qkv_proj and gate_up_proj are one module each in mistral.rs, quantized whole; DeepSeek's low-rank
  // q and kv projections and shared experts are modules too (mistral.rs' deepseek2 / deepseek3 ISQ layers).
  for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
                        "mlp.up_proj", "mlp.down_proj", "self_attn.qkv_proj", "mlp.gate_up_proj", "self_attn.q_a_proj",
                        "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa", "self_attn.kv_b_proj",
                        "mlp.shared_experts.gate_proj", "mlp.shared_experts.up_proj", "mlp.shared_experts.down_proj"})
    if (rest == m) return {base, -1};
  // Experts: "<experts>.E.<proj>", stacked under "<experts>.<gate|up|down>_proj".
  struct Experts {
    const char* prefix;
    const char* proj;
    const char* stacked;
  };
  for (const Experts& e :
       {Experts{"mlp.experts.", "gate_proj", "gate_proj"}, Experts{"mlp.experts.", "up_proj", "up_proj"},
        Experts{"mlp.experts.", "down_proj", "down_proj"}, Experts{"block_sparse_moe.experts.", "w1", "gate_proj"},
        Experts{"block_sparse_moe.experts.", "w3", "up_proj"},
        Experts{"block_sparse_moe.experts.", "w2", "down_proj"}}) {
    const std::string p = e.prefix;
    if (rest.rfind(p, 0) != 0) continue;
    const std::string tail = rest.substr(p.size());
    if (tail == e.stacked) return {base, -1};  // already stacked (a UQFF or GGUF source)
    const size_t d = tail.find('.');
    if (d == std::string::npos || d == 0 || tail.substr(d + 1) != e.proj) continue;
    const std::string index = tail.substr(0, d);
    if (index.find_first_not_of("0123456789") != std::string::npos || index.size() > 6) continue;
    return {prefix + p + e.stacked, std::stoi(index)};
  }
  return {"", -1};
}

Result<UqffExportReport::Output> write_uqff_set(const std::string& dir_path, const std::string& stem,
                                                const std::string& quant, const std::vector<UqffModule>& modules,
                                                uint64_t shard_bytes, const std::function<void(uint64_t)>& on_bytes) {
  const fs::path dir(dir_path);
  UqffExportReport::Output out;
  out.quant = quant;
  SafetensorsWriter shard;
  auto start_shard = [&] {
    shard = SafetensorsWriter();
    stamp(shard);
    if (out.shards.empty()) {  // the version scalars lead shard 0 (spec §2.3)
      shard.add_u32("uqff.version.major", 1);
      shard.add_u32("uqff.version.minor", 2);
      shard.add_u32("uqff.version.patch", 0);
    }
  };
  auto flush = [&]() -> Status {
    const std::string file = stem + "-" + std::to_string(out.shards.size()) + ".uqff";
    QRT_TRY(shard.write((dir / file).string(), on_bytes));
    out.bytes += shard.data_bytes();
    out.shards.push_back(file);
    start_shard();
    return ok_status();
  };
  start_shard();
  bool fresh = true;  // the current shard holds no layer yet
  for (const UqffModule& m : modules) {
    if (!fresh && shard.data_bytes() + uqff_layer_bytes(*m.layer) > shard_bytes) QRT_TRY(flush());
    QRT_TRY(add_uqff_layer(shard, m.key, *m.layer, m.bias));
    fresh = false;
    if (!m.layer->fallback.empty()) out.fallbacks.push_back(m.key + ": " + m.layer->fallback);
    if (shard.data_bytes() >= shard_bytes) {
      QRT_TRY(flush());
      fresh = true;
    }
  }
  if (!fresh || out.shards.empty()) QRT_TRY(flush());
  return out;
}

Status write_uqff_residual(const std::string& dir_path, const std::vector<const QuantTensor*>& residual) {
  SafetensorsWriter res;
  stamp(res);
  for (const QuantTensor* t : residual) {
    quant::ScalarType dtype;
    switch (t->format) {
      case FormatId::kF32:
        dtype = quant::ScalarType::kF32;
        break;
      case FormatId::kF16:
        dtype = quant::ScalarType::kF16;
        break;
      case FormatId::kBF16:
        dtype = quant::ScalarType::kBF16;
        break;
      default:
        return unsupported(t->name + ": a " + std::string(quant::format_name(t->format)) +
                           " tensor outside the tracked modules (only dense ones are copied to residual.safetensors)");
    }
    res.add_view(t->name, dtype, t->shape, t->data);
  }
  return res.write((fs::path(dir_path) / "residual.safetensors").string());
}

Status write_uqff_report(const std::string& dir_path, const UqffExportReport& report) {
  nlohmann::ordered_json j;
  j["schema"] = 1;
  j["producer"] = "qrt";
  j["producer_version"] = qrt::kVersion;
  j["uqff_version"] = kUqffVersion;
  j["outputs"] = nlohmann::ordered_json::array();
  for (const auto& out : report.outputs)
    j["outputs"].push_back({{"quant", out.quant},
                            {"shards", out.shards},
                            {"bytes", out.bytes},
                            {"fallbacks", out.fallbacks},
                            {"fallback_count", out.fallbacks.size()}});
  return write_text(fs::path(dir_path) / "uqff_report.json", j.dump(2) + "\n");
}

Result<UqffExportReport> write_uqff_export(const ModelSource& source, const std::string& dir_path,
                                           const UqffExportOptions& options) {
  if (source.kind != SourceKind::kHfCheckpoint)
    return unsupported("quantize-model reads Hugging Face checkpoints (config.json + safetensors); " + source.path +
                       " is not one");
  if (options.types.empty()) return invalid_argument("no output type");
  if (options.types.size() > 1 && !options.stem.empty())
    return invalid_argument("a shard stem names a single output; several types take their names as stems");
  const fs::path dir(dir_path);

  // ---- what goes where --------------------------------------------------------------------------------------
  // gpt-oss keeps each layer's experts as fused parameters (gate and up interleaved; dense ones [E, in, out], MXFP4
  // ones as _blocks/_scales): restacked into the expert modules <experts>.{gate,up,down}_proj [E, out, in] with
  // [E, out] biases, the keys spec/uqff.md §2.7 (d) gives every MoE.
  names::CanonicalTensors gpt_oss;
  QRT_ASSIGN_OR_RETURN(const std::set<std::string> fused, names::canonical_gpt_oss_experts(source.tensors, &gpt_oss));
  std::map<std::string, QuantTensor> restacked;
  for (const auto& [canonical, t] : gpt_oss.tensors) {
    const auto hf = names::hf_from_canonical(canonical, "gpt-oss");
    if (!hf) return format_error(t.name + ": no UQFF name for " + canonical);
    restacked.emplace(*hf, t);
  }
  std::vector<std::pair<const std::string*, const QuantTensor*>> tensors;
  for (const auto& [name, t] : source.tensors)
    if (!fused.count(name)) tensors.emplace_back(&name, &t);
  for (const auto& [name, t] : restacked) tensors.emplace_back(&name, &t);
  std::map<std::string, Module> modules;
  std::vector<const QuantTensor*> residual;
  for (const auto& [name_ptr, t_ptr] : tensors) {
    const std::string& name = *name_ptr;
    const QuantTensor& t = *t_ptr;
    const auto [key, expert] = uqff_module_of(name);
    if (!key.empty()) {
      Module& m = modules[key];
      if (expert >= 0) {
        m.experts[expert] = &t;
      } else {
        m.weight = &t;
      }
      continue;
    }
    if (ends_with(name, ".bias")) {
      const auto [bias_key, bias_expert] = uqff_module_of(name.substr(0, name.size() - 5) + ".weight");
      if (!bias_key.empty()) {
        if (bias_expert >= 0) return unsupported(name + ": per-expert biases are not written to UQFF by qrt yet");
        modules[bias_key].bias = &t;
        continue;
      }
    }
    residual.push_back(&t);
  }
  for (auto& [key, m] : modules) {
    if (!m.experts.empty()) QRT_TRY(stack_experts(key, m));
    if (m.weight == nullptr && m.experts.empty()) return format_error(key + ": a bias without its weight");
  }

  // ---- the type of every (output, module) -------------------------------------------------------------------
  QRT_ASSIGN_OR_RETURN(const TypeOverrides overrides, TypeOverrides::compile(options.overrides));
  // A module already in MXFP4 (openai's gpt-oss experts) keeps its blocks unless an override names a type for it,
  // as mistral.rs stores packed sources: requantizing 4-bit codes would only add error.
  struct Task {
    size_t output;
    const std::string* key;
    const Module* module;
    FormatId format;
    bool copy = false;
  };
  auto task_for = [&](size_t output, const std::string& key, const Module& m, FormatId type) -> Result<Task> {
    QRT_ASSIGN_OR_RETURN(std::optional<FormatId> pinned, overrides.match(key + ".weight"));
    if (pinned) return Task{output, &key, &m, *pinned};
    if (m.source().format == FormatId::kMXFP4) return Task{output, &key, &m, FormatId::kMXFP4, true};
    return Task{output, &key, &m, key == "lm_head" && options.promote_output ? promoted_for_output(type) : type};
  };
  std::vector<Task> tasks;
  uint64_t estimate = 0, source_bytes = 0;
  for (size_t o = 0; o < options.types.size(); ++o)
    for (const auto& [key, m] : modules) {
      QRT_ASSIGN_OR_RETURN(const Task task, task_for(o, key, m, options.types[o]));
      tasks.push_back(task);
      const FormatId f = task.format;
      const QuantTensor& s = m.source();
      const quant::Family family = quant::format_info(f).family;
      if (s.shape.size() == 3 &&
          (family == quant::Family::kHqq || family == quant::Family::kFp8 || family == quant::Family::kF8q8))
        return unsupported(key + ": " + uqff_type_name(f) + " cannot hold a stack of expert weights (mistral.rs " +
                           "gathers experts only from GGML and AFQ stacks); choose another type for it, e.g. " +
                           "--override 'experts'=q8_0");
      auto sizes = cpu::part_sizes(f, s.rows(), s.cols(), {.group_size = 64, .scale_type = quant::ScalarType::kF32});
      estimate += sizes.ok() ? sizes->data + sizes->scales + sizes->biases : s.bytes();
      source_bytes += s.bytes();
    }
  uint64_t residual_bytes = 0;
  for (const QuantTensor* t : residual) residual_bytes += t->bytes();
  if (options.check_space) QRT_TRY(options.check_space(estimate + residual_bytes + (uint64_t{1} << 20)));

  // ---- quantize, on `threads` threads ---------------------------------------------------------------------------
  std::vector<Result<UqffLayer>> layers;
  std::atomic<int> weighted{0};
  {
    Progress progress("quantizing", source_bytes, options.quiet ? Progress::Mode::kQuiet : Progress::Mode::kAuto);
    layers = parallel_results<UqffLayer>(
        tasks.size(), options.threads,
        [&](size_t i) -> Result<UqffLayer> {
          const QuantTensor& s = tasks[i].module->source();
          if (tasks[i].copy) {
            UqffLayer kept;
            kept.tensor = s;
            kept.tensor.name = *tasks[i].key + ".weight";
            kept.tag = UqffTag::kMxfp4;
            return kept;
          }
          const std::vector<float>* importance = nullptr;
          if (options.importance != nullptr) {
            const auto canonical = names::canonical_from_hf(*tasks[i].key + ".weight");
            const int64_t experts = s.shape.size() == 3 ? s.shape[0] : 1;
            if (canonical) {
              auto found = options.importance->for_tensor(canonical->name + ".weight", s.cols(), experts);
              if (!found.ok()) return found.status();
              importance = *found;
              if (importance != nullptr) ++weighted;
            }
          }
          return quantize_uqff_layer(s, tasks[i].format, *tasks[i].key, importance);
        },
        [&](size_t i) { progress.add(tasks[i].module->source().bytes()); });
  }
  for (const auto& l : layers)
    if (!l.ok()) return l.status();
  if (options.importance != nullptr && weighted == 0)
    return invalid_argument(options.importance->path + " has no importance for any module of this model (its names "
                            "are GGUF names like " + options.importance->entries.begin()->first + ")");

  // ---- shards, per output; residual.safetensors --------------------------------------------------------------
  UqffExportReport report;
  report.source_bytes = source_bytes;
  report.residual_bytes = residual_bytes;
  for (size_t o = 0; o < options.types.size(); ++o) {
    const std::string quant = uqff_type_name(options.types[o]);
    std::vector<UqffModule> set;
    for (size_t i = 0; i < tasks.size(); ++i)
      if (tasks[i].output == o) set.push_back({*tasks[i].key, &*layers[i], tasks[i].module->bias});
    QRT_ASSIGN_OR_RETURN(
        UqffExportReport::Output out,
        write_uqff_set(dir_path, options.stem.empty() ? quant : options.stem, quant, set, options.shard_bytes));
    report.outputs.push_back(std::move(out));
  }
  QRT_TRY(write_uqff_residual(dir_path, residual));

  nlohmann::json config = nlohmann::json::parse(source.hf_config_json, nullptr, false);
  if (config.is_discarded()) return format_error(source.path + "/config.json: not valid JSON");
  QRT_TRY(write_text(dir / "config.json", without_quantization_config(std::move(config)).dump(2) + "\n"));
  const fs::path src_dir(source.path);
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json",
                           "special_tokens_map.json", "processor_config.json", "preprocessor_config.json"}) {
    std::error_code ec;
    if (!fs::is_regular_file(src_dir / name, ec)) continue;
    // Copied by content, so the export's files get the writer's permissions, not a read-only source's.
    std::ifstream in(src_dir / name, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in && !in.eof()) return io_error("reading " + (src_dir / name).string());
    QRT_TRY(write_text(dir / name, text));
  }

  QRT_TRY(write_uqff_report(dir_path, report));
  return report;
}

}  // namespace qrt::convert
