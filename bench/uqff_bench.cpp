// Opening a 3-shard UQFF export (target: under 50 ms). The export is written once per process into a temp
// directory by the small safetensors writer below: a Llama-style model (32 layers, hidden 256, intermediate 768,
// GQA with 2 KV heads of 64, vocabulary 32000) quantized mostly to Q4K with the per-layer mix a UQFF file can hold
// (topology pins and fallbacks, spec/uqff.md §4): Q6K down_proj and lm_head, Q8_0, AFQ4 with BF16 scales, HQQ4,
// FP8, F8Q8, MXFP4 and Unquant BF16 layers. Entries are split evenly over three shards in stream order, so one
// layer's entries may straddle two shards, as the writer's size cap does; residual.safetensors holds the norms
// and the BF16 embedding, and config.json / tokenizer.json (32000 tokens) sit beside them. Payload bytes are a
// fixed pattern: opening reads headers and metadata entries, never payloads.
//
// BM_UqffOpenModel times open_model_source on the directory (detection, shard discovery, header parses, reader
// rules, per-layer tensors, residual, assets); BM_UqffShardsAndLayers only the shard parse and layer build.
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "loader/open_model.hpp"
#include "loader/uqff.hpp"

namespace {
namespace fs = std::filesystem;

struct Entry {
  std::string name;
  std::string dtype;  // safetensors dtype string
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <class T>
std::vector<uint8_t> le_bytes(const std::vector<T>& values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}
Entry u8_scalar(const std::string& name, uint8_t v) { return {name, "U8", {}, {v}}; }
Entry u32_scalar(const std::string& name, uint32_t v) { return {name, "U32", {}, le_bytes<uint32_t>({v})}; }
Entry f32_scalar(const std::string& name, float v) { return {name, "F32", {}, le_bytes<float>({v})}; }
Entry u32_vector(const std::string& name, const std::vector<int64_t>& dims) {
  std::vector<uint32_t> v(dims.begin(), dims.end());
  return {name, "U32", {static_cast<int64_t>(v.size())}, le_bytes(v)};
}
std::vector<uint8_t> pattern(uint64_t n, uint8_t seed) {
  std::vector<uint8_t> b(n);
  for (uint64_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(seed + i * 131);
  return b;
}

// Byte sizes of a tensor's parts in `format` for a logical [rows, cols] (leading dims folded into rows).
qrt::quant::PartSizes sizes_of(const char* format, int64_t rows, int64_t cols, int group = 0,
                               qrt::quant::ScalarType scale = qrt::quant::ScalarType::kF32) {
  qrt::quant::QuantParams p;
  p.group_size = group;
  p.scale_type = scale;
  auto s = qrt::cpu::part_sizes(*qrt::quant::format_from_name(format), rows, cols, p);
  return s.ok() ? *s : qrt::quant::PartSizes{};
}

// The entries of one module `key` of logical shape [out, in] in the named storage (spec/uqff.md §2.6).
void add_module(std::vector<Entry>& out, const std::string& key, const std::string& storage, int64_t rows,
                int64_t cols) {
  const std::string w = key + ".weight";
  const uint8_t seed = static_cast<uint8_t>(out.size());
  auto ggml = [&](const char* format, uint32_t code) {
    out.push_back(u8_scalar(w + ".format", 0));
    const uint64_t n = sizes_of(format, rows, cols).data;
    out.push_back({w, "U8", {static_cast<int64_t>(n)}, pattern(n, seed)});
    out.push_back(u32_scalar(w + ".dtype", code));
    out.push_back(u32_vector(w + ".shape", {rows, cols}));
  };
  if (storage == "q4k") return ggml("q4_k", 12);
  if (storage == "q6k") return ggml("q6_k", 14);
  if (storage == "q8_0") return ggml("q8_0", 8);
  if (storage == "bf16") {  // Unquant
    out.push_back(u8_scalar(w + ".format", 1));
    out.push_back({w, "BF16", {rows, cols}, pattern(static_cast<uint64_t>(rows * cols * 2), seed)});
  } else if (storage == "afq4") {
    const auto s = sizes_of("afq4", rows, cols, 64, qrt::quant::ScalarType::kBF16);
    out.push_back(u8_scalar(w + ".format", 4));
    out.push_back({w, "U32", {rows, cols / 8}, pattern(s.data, seed)});
    out.push_back({w + ".scales", "BF16", {rows, cols / 64}, pattern(s.scales, seed)});
    out.push_back({w + ".biases", "BF16", {rows, cols / 64}, pattern(s.biases, seed)});
    out.push_back(u8_scalar(w + ".bits", 4));
    out.push_back(u8_scalar(w + ".group_size", 64));
  } else if (storage == "hqq4") {
    const auto s = sizes_of("hqq4", rows, cols, 64);
    const int64_t groups = rows * cols / 64;
    out.push_back(u8_scalar(w + ".format", 2));
    out.push_back({w, "U8", {32, groups}, pattern(s.data, seed)});
    out.push_back({w + ".scales", "F32", {1, groups}, pattern(s.scales, seed)});
    out.push_back({w + ".zeros", "F32", {1, groups}, pattern(s.biases, seed)});
    out.push_back(u32_vector(w + ".shape", {rows, cols}));
    out.push_back(u8_scalar(w + ".bits", 4));
    out.push_back(u32_scalar(w + ".group_size", 64));
    out.push_back(u8_scalar(w + ".axis", 0));
    out.push_back(u32_scalar(w + ".optimization_steps", 10));
    out.push_back(u8_scalar(w + ".round_zeros", 0));
    out.push_back(u8_scalar(w + ".channel_wise", 1));
  } else if (storage == "fp8") {
    out.push_back(u8_scalar(w + ".format", 3));
    out.push_back({w, "F8_E4M3", {rows, cols}, pattern(static_cast<uint64_t>(rows * cols), seed)});
    out.push_back(f32_scalar(w + ".dequant_w_scale", 0.0125f));
    out.push_back(f32_scalar(w + ".dequant_x_scale", 0.0125f));
    out.push_back(f32_scalar(w + ".quant_scale", 80.0f));
    out.push_back(u32_scalar(w + ".dtype", 9));
  } else if (storage == "f8q8") {
    const uint64_t blocks = static_cast<uint64_t>(rows * cols + 31) / 32;
    out.push_back(u8_scalar(w + ".format", 5));
    out.push_back({w, "U8", {static_cast<int64_t>(33 * blocks)}, pattern(33 * blocks, seed)});
    out.push_back(u32_scalar(w + ".num_blocks", static_cast<uint32_t>(blocks)));
    out.push_back(u32_vector(w + ".shape", {rows, cols}));
  } else if (storage == "mxfp4") {
    out.push_back(u8_scalar(w + ".format", 6));
    out.push_back({w, "U8", {rows, cols / 2}, pattern(static_cast<uint64_t>(rows * cols / 2), seed)});
    out.push_back({w + ".scales", "U8", {rows, cols / 32}, pattern(static_cast<uint64_t>(rows * cols / 32), 127)});
  }
}

// A safetensors file: u64 header length, JSON header padded with spaces to 8 bytes, data buffer.
void write_safetensors(const fs::path& path, const std::vector<Entry>& entries) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"uqff.producer", "mistral.rs"}, {"uqff.version", "1.2.0"}};
  uint64_t offset = 0;
  for (const Entry& e : entries) {
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes.size()}}};
    offset += e.bytes.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = text.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const Entry& e : entries) out.write(reinterpret_cast<const char*>(e.bytes.data()), static_cast<std::streamsize>(e.bytes.size()));
}

// The per-layer storage: mostly Q4K with Q6K down_proj, and pinned layers in the other families.
std::string storage_for(int layer, const std::string& proj) {
  const bool attn = proj.size() == 6 && proj[1] == '_';  // q_proj k_proj v_proj o_proj
  if (layer == 0 && !attn) return "q8_0";
  if (layer == 1 && !attn) return "f8q8";
  if (layer == 2 && !attn) return "mxfp4";
  if (layer == 3 && attn) return "fp8";
  if (layer == 4 && attn) return "hqq4";
  if (layer == 5 && proj == "o_proj") return "bf16";
  if (layer >= 28) return "afq4";
  return proj == "down_proj" ? "q6k" : "q4k";
}

struct UqffExport {
  fs::path dir;
  size_t shard_entries = 0, residual_entries = 0;
  uint64_t bytes = 0;

  UqffExport() {
    std::string templ = (fs::temp_directory_path() / "qrt-uqff-bench-XXXXXX").string();
    if (!mkdtemp(templ.data())) return;
    dir = templ;
    constexpr int kLayers = 32, kHidden = 256, kKv = 128, kInter = 768, kVocab = 32000;
    std::vector<Entry> entries = {u32_scalar("uqff.version.major", 1), u32_scalar("uqff.version.minor", 2),
                                  u32_scalar("uqff.version.patch", 0)};
    std::vector<Entry> residual;
    for (int l = 0; l < kLayers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const struct { const char* name; int64_t rows, cols; } projs[] = {
          {"self_attn.q_proj", kHidden, kHidden}, {"self_attn.k_proj", kKv, kHidden},
          {"self_attn.v_proj", kKv, kHidden},     {"self_attn.o_proj", kHidden, kHidden},
          {"mlp.gate_proj", kInter, kHidden},     {"mlp.up_proj", kInter, kHidden},
          {"mlp.down_proj", kHidden, kInter}};
      for (const auto& pr : projs) {
        const std::string name = pr.name;
        add_module(entries, p + name, storage_for(l, name.substr(name.find('.') + 1)), pr.rows, pr.cols);
      }
      residual.push_back({p + "input_layernorm.weight", "BF16", {kHidden}, pattern(kHidden * 2, 1)});
      residual.push_back({p + "post_attention_layernorm.weight", "BF16", {kHidden}, pattern(kHidden * 2, 2)});
    }
    add_module(entries, "lm_head", "q6k", kVocab, kHidden);
    residual.push_back({"model.norm.weight", "BF16", {kHidden}, pattern(kHidden * 2, 3)});
    residual.push_back({"model.embed_tokens.weight", "BF16", {kVocab, kHidden}, pattern(uint64_t{kVocab} * kHidden * 2, 4)});
    // Three shards of about equal entry counts, in stream order.
    const size_t per_shard = (entries.size() + 2) / 3;
    for (size_t s = 0; s < 3; ++s) {
      const auto begin = entries.begin() + static_cast<ptrdiff_t>(std::min(entries.size(), s * per_shard));
      const auto end = entries.begin() + static_cast<ptrdiff_t>(std::min(entries.size(), (s + 1) * per_shard));
      write_safetensors(dir / ("q4k-" + std::to_string(s) + ".uqff"), std::vector<Entry>(begin, end));
    }
    write_safetensors(dir / "residual.safetensors", residual);
    shard_entries = entries.size();
    residual_entries = residual.size();
    std::ofstream(dir / "config.json") << nlohmann::json{{"architectures", nlohmann::json::array({"LlamaForCausalLM"})},
                                                         {"model_type", "llama"},
                                                         {"hidden_size", kHidden},
                                                         {"intermediate_size", kInter},
                                                         {"num_hidden_layers", kLayers},
                                                         {"num_attention_heads", 4},
                                                         {"num_key_value_heads", 2},
                                                         {"vocab_size", kVocab},
                                                         {"rms_norm_eps", 1e-5},
                                                         {"torch_dtype", "bfloat16"}}
                                                            .dump(2);
    nlohmann::json vocab = nlohmann::json::object();
    for (int i = 0; i < kVocab; ++i) vocab["tok" + std::to_string(i)] = i;
    std::ofstream(dir / "tokenizer.json") << nlohmann::json{{"version", "1.0"}, {"model", {{"type", "BPE"}, {"vocab", vocab}}}}.dump();
    for (const auto& f : fs::directory_iterator(dir)) bytes += f.file_size();
  }
  ~UqffExport() {
    std::error_code ec;
    if (!dir.empty()) fs::remove_all(dir, ec);
  }
};

const UqffExport& uqff_export() {
  static const UqffExport e;
  return e;
}

void report(benchmark::State& state, const UqffExport& e, const qrt::TensorTable& tensors) {
  std::set<qrt::quant::FormatId> formats;
  for (const auto& [name, t] : tensors) formats.insert(t.format);
  state.counters["entries"] = static_cast<double>(e.shard_entries + e.residual_entries);
  state.counters["tensors"] = static_cast<double>(tensors.size());
  state.counters["formats"] = static_cast<double>(formats.size());
  state.counters["dir_MB"] = static_cast<double>(e.bytes) / 1e6;
}

void BM_UqffOpenModel(benchmark::State& state) {
  const UqffExport& e = uqff_export();
  if (e.dir.empty()) return state.SkipWithError("cannot create a temp directory");
  qrt::TensorTable tensors;
  for (auto _ : state) {
    auto src = qrt::open_model_source(e.dir.string());
    if (!src.ok()) return state.SkipWithError(src.status().to_string().c_str());
    benchmark::DoNotOptimize(src->tensors.size());
    tensors = std::move(src->tensors);  // frees the previous table: one teardown per iteration, as without it
  }
  report(state, e, tensors);
}

void BM_UqffShardsAndLayers(benchmark::State& state) {
  const UqffExport& e = uqff_export();
  if (e.dir.empty()) return state.SkipWithError("cannot create a temp directory");
  std::vector<std::string> shards;
  for (int s = 0; s < 3; ++s) shards.push_back((e.dir / ("q4k-" + std::to_string(s) + ".uqff")).string());
  qrt::TensorTable tensors;
  for (auto _ : state) {
    auto opened = qrt::open_uqff_shards(shards);
    if (!opened.ok()) return state.SkipWithError(opened.status().to_string().c_str());
    auto table = qrt::uqff_tensors(*opened);
    if (!table.ok()) return state.SkipWithError(table.status().to_string().c_str());
    benchmark::DoNotOptimize(table->size());
    tensors = std::move(*table);
  }
  report(state, e, tensors);
}

}  // namespace

BENCHMARK(BM_UqffOpenModel)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_UqffShardsAndLayers)->Unit(benchmark::kMillisecond);
