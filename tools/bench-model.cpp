// bench-model: whole-model speed of a Llama-3-8B- or Qwen3-30B-A3B-shaped transformer with random weights, per weight
// format (the shapes and the random model: tools/bench_model/random_model.hpp).
//
// For each format it reports the load (upload) time, prefill tokens/s (one forward of --prompt tokens), decode
// tokens/s (--decode single-token forwards after the prompt), peak memory, and each decode figure as a fraction of
// its roofline: the weight bytes one decoded token must read divided by the measured copy bandwidth.
//
// Random weights are made on the fly, fast even at 8B: for each kind of tensor (q, k, v, o, gate, up, down or the
// stacked experts' gate, up, down, output, token_embd) one block of rows is filled with random normal values and
// quantized with the format's reference quantizer, and its packed bytes are repeated down the tensor row block after
// row block. For the
// formats whose parts store each row contiguously, row after row (GGML blocks, AFQ, MX, dense, block FP8), that is
// exactly the quantization of the tiled matrix; for HQQ, which groups across the whole tensor, it is still a legal
// tensor of random weights of the right magnitude, which is all a benchmark needs. Every layer's tensor of one
// kind points at the same host bytes (the device gets its own copy of each), so host memory holds one layer plus
// the embedding and output tables, and it is freed as soon as the upload is done.
//
// stdout gets one table; --json writes the same figures (and the raw timings) for bench/results/. Bad input ends
// with one "error: ..." line on stderr and exit status 1. See bench/NOTES-model.md.
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <list>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/formats.hpp"
#include "loader/quant_tensor.hpp"
#include "models/model_config.hpp"
#include "models/tensor_names.hpp"
#include "models/transformer.hpp"
#include "qrt/version.hpp"
#include "backend/cpu_backend.hpp"
#include "backend/cuda_device_stats.hpp"
#include "backend/make_cuda_backend.hpp"
#include "tools/bench_model/batch_decode.hpp"
#include "tools/bench_model/random_model.hpp"

namespace {

using qrt::Result;
using qrt::Status;
using qrt::quant::FormatId;
using qrt::quant::QuantBuffers;
using qrt::quant::QuantParams;
using Clock = std::chrono::steady_clock;
using qrt::bench::FormatPlan;
using qrt::bench::HostModel;
using qrt::bench::Shape;

int fail(const std::string& message) {
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "error: %s\n", line.c_str());
  return 1;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- memory and bandwidth ------------------------------------------------------------------------------------

// Linux keeps a resettable high-water mark of the resident set (VmHWM; writing 5 to clear_refs resets it), so each
// format gets its own peak. Where that is unavailable the process peak so far (getrusage) is reported instead.
bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  if (!f) return false;
  f << "5";
  f.flush();
  return static_cast<bool>(f);
}

uint64_t peak_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<uint64_t>(u.ru_maxrss) * 1024;
}

// Host memcpy bandwidth in bytes/s (read + write), median of several copies of a buffer far larger than any
// cache: the CPU backend's roofline.
double host_copy_bandwidth(uint64_t bytes, int repetitions) {
  std::vector<uint8_t> a(bytes, 0x5A), b(bytes, 0);
  std::vector<double> s;
  for (int i = 0; i < repetitions + 1; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    const double dt = seconds_since(t0);
    if (i > 0) s.push_back(dt);  // the first copy warms up
  }
  volatile uint8_t sink = b[bytes / 2];  // keep the copies observable
  (void)sink;
  return 2.0 * static_cast<double>(bytes) / median(s);
}

std::string host_cpu_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

// ---- one format ----------------------------------------------------------------------------------------------

struct Options {
  Shape shape;
  std::string device = "cpu";
  int device_index = 0;
  std::vector<int> prompts = {512};  // one prefill + decode run per value: the contexts decode is measured at
  int decode = 128, repetitions = 3, warmup = 1;
  uint64_t seed = 1;
  std::optional<qrt::KvType> kv_type;  // empty: the backend's preferred type
  std::vector<int> batches;            // batched decode runs (bench_model/batch_decode.hpp); empty: none
};

// The timed runs at one prompt length.
struct ContextRuns {
  int prompt = 0;
  std::vector<double> prefill_s, decode_s;
};

struct FormatResult {
  FormatPlan plan;
  uint64_t weight_bytes = 0, decode_bytes_per_token = 0;
  double generate_s = 0, load_s = 0;
  std::vector<ContextRuns> runs;  // one per --prompt value
  uint64_t peak_device_bytes = 0, peak_host_rss_bytes = 0;
  bool host_peak_is_per_format = false;
  qrt::KvType kv_type = qrt::KvType::kF32;  // the cache's element type
  // Operations (kernels, copies) the captured decode step runs per token from its one graph launch; 0 without graphs.
  uint64_t graph_operations_per_token = 0;
  std::vector<qrt::bench::BatchDecodeRuns> batch_runs;  // one per --batch value
};

int32_t argmax(const std::vector<float>& logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

Result<std::unique_ptr<qrt::Backend>> open_backend(const Options& o) {
  if (o.device == "cuda") return qrt::make_cuda_backend(o.device_index);
  return std::unique_ptr<qrt::Backend>(std::make_unique<qrt::CpuBackend>());
}

// Device memory in use now (CUDA; 0 on the CPU, whose memory is the process's resident set).
Result<uint64_t> device_used(const Options& o) {
  if (o.device != "cuda") return uint64_t{0};
  QRT_ASSIGN_OR_RETURN(qrt::CudaMemoryUse use, qrt::cuda_memory_use(o.device_index));
  return use.used_bytes;
}

// The prompt, then greedy decoding of o.decode tokens as run-model decodes: the logits stay on the device, the
// backend's sampler picks the token and only its id comes back (the prompt's logits are downloaded once, to check
// that they are finite).
Status prefill_and_decode(qrt::Transformer& model, qrt::Sequence& seq, const std::vector<int32_t>& prompt, int decode,
                          double* prefill_s, double* decode_s) {
  std::vector<float> logits;
  seq.reset();
  auto t0 = Clock::now();
  QRT_TRY(model.forward(seq, prompt, qrt::LogitsFor::kLast, &logits));
  *prefill_s = seconds_since(t0);
  for (float v : logits)
    if (!std::isfinite(v)) return qrt::internal_error("non-finite logits after the prompt");
  int32_t token = argmax(logits);
  qrt::SampleStep greedy;
  greedy.u01 = {0.5};
  t0 = Clock::now();
  for (int i = 0; i < decode; ++i) {
    QRT_TRY(model.forward_keep_logits(seq, std::span<const int32_t>(&token, 1)));
    QRT_TRY(model.sample_last(seq, greedy, &token));
    if (token < 0 || static_cast<size_t>(token) >= logits.size())
      return qrt::internal_error("decode step " + std::to_string(i) + " sampled id " + std::to_string(token) +
                                 ", outside the vocabulary");
  }
  *decode_s = seconds_since(t0);
  return qrt::ok_status();
}

Result<FormatResult> bench_format(const Options& o, const FormatPlan& plan) {
  const std::string fname(qrt::quant::format_name(plan.format));
  FormatResult r;
  r.plan = plan;
  r.host_peak_is_per_format = reset_peak_rss();
  QRT_ASSIGN_OR_RETURN(const uint64_t used_before, device_used(o));
  uint64_t used_peak = used_before;
  auto sample = [&]() -> Status {
    QRT_ASSIGN_OR_RETURN(const uint64_t used, device_used(o));
    used_peak = std::max(used_peak, used);
    return qrt::ok_status();
  };

  QRT_ASSIGN_OR_RETURN(std::unique_ptr<qrt::Backend> backend, open_backend(o));
  auto t0 = Clock::now();
  QRT_ASSIGN_OR_RETURN(HostModel host, qrt::bench::make_host_model(o.shape, plan, o.seed));
  r.generate_s = seconds_since(t0);
  r.weight_bytes = host.weight_bytes;
  r.decode_bytes_per_token = host.decode_bytes_per_token;
  std::fprintf(stderr, "%s: %.1f MiB of random weights made in %.2f s; loading\n", fname.c_str(),
               static_cast<double>(r.weight_bytes) / (1 << 20), r.generate_s);

  const int64_t capacity = int64_t{*std::max_element(o.prompts.begin(), o.prompts.end())} + o.decode;
  const qrt::ModelConfig config = qrt::bench::config_for(o.shape, capacity);
  t0 = Clock::now();
  qrt::TransformerOptions options;
  options.kv_type = o.kv_type;
  QRT_ASSIGN_OR_RETURN(std::unique_ptr<qrt::Transformer> model,
                       qrt::Transformer::create(*backend, config, host.tensors, options));
  r.kv_type = model->kv_type();
  QRT_TRY(backend->synchronize());
  r.load_s = seconds_since(t0);
  host = HostModel{};  // the device holds its own copy now
  QRT_TRY(sample());

  QRT_ASSIGN_OR_RETURN(std::unique_ptr<qrt::Sequence> seq, model->new_sequence(capacity));
  std::mt19937_64 rng(o.seed + 1000);
  std::uniform_int_distribution<int32_t> token(0, o.shape.vocab - 1);
  double prefill_s = 0, decode_s = 0;
  for (const int length : o.prompts) {
    std::vector<int32_t> prompt(static_cast<size_t>(length));
    for (int32_t& t : prompt) t = token(rng);
    // First-use costs (scratch buffers, library handles, the decode graph, caches), before each length's runs.
    for (int i = 0; i < o.warmup; ++i) {
      std::fprintf(stderr, "%s: warm-up, prompt %d\n", fname.c_str(), length);
      QRT_TRY(prefill_and_decode(*model, *seq, prompt, std::min(o.decode, 2), &prefill_s, &decode_s));
    }
    ContextRuns runs;
    runs.prompt = length;
    for (int i = 0; i < o.repetitions; ++i) {
      std::fprintf(stderr, "%s: prompt %d, run %d of %d\n", fname.c_str(), length, i + 1, o.repetitions);
      QRT_TRY(prefill_and_decode(*model, *seq, prompt, o.decode, &prefill_s, &decode_s));
      runs.prefill_s.push_back(prefill_s);
      runs.decode_s.push_back(decode_s);
      QRT_TRY(sample());
    }
    r.runs.push_back(std::move(runs));
  }
  r.graph_operations_per_token = model->decode_graph_operations(*seq);
  seq.reset();  // its cache, before the batched runs take theirs
  if (!o.batches.empty()) {
    std::fprintf(stderr, "%s: batched decode at %zu batch sizes\n", fname.c_str(), o.batches.size());
    QRT_ASSIGN_OR_RETURN(r.batch_runs, qrt::bench::bench_batch_decode(*model, o.batches, o.prompts[0], o.decode,
                                                                      o.repetitions, o.shape.vocab, o.seed + 2000));
    QRT_TRY(sample());
  }
  r.peak_device_bytes = used_peak - used_before;
  r.peak_host_rss_bytes = peak_rss_bytes();
  return r;
}

// ---- report --------------------------------------------------------------------------------------------------

struct Derived {
  double load_gb_s, prefill_tok_s, decode_tok_s, ms_per_token, roofline_fraction, roofline_fraction_with_kv;
  double decode_gb_s;  // the weight and K/V bytes of a decode step over its time
  uint64_t peak_bytes, kv_bytes_per_token;
};

// K and V bytes an average decode step of this run reads: every layer's rows for the keys it attends to (the
// prompt plus the tokens decoded so far, (decode + 1) / 2 of them on average), in the cache's element type.
uint64_t kv_bytes_per_token(const Options& o, int prompt, qrt::KvType type) {
  const double keys = prompt + (o.decode + 1) / 2.0;
  const double per_key =
      2.0 * o.shape.layers * static_cast<double>(qrt::kv_row_bytes(type, int64_t{o.shape.kv_heads} * o.shape.head_dim));
  return static_cast<uint64_t>(keys * per_key);
}

Derived derive(const Options& o, const FormatResult& r, const ContextRuns& run, double bandwidth) {
  Derived d{};
  d.load_gb_s = static_cast<double>(r.weight_bytes) / r.load_s * 1e-9;
  d.prefill_tok_s = run.prompt / median(run.prefill_s);
  const double decode_s = median(run.decode_s);
  d.decode_tok_s = o.decode / decode_s;
  d.ms_per_token = decode_s / o.decode * 1e3;
  // The time the token's weight bytes (and its K/V reads) take at the copy bandwidth, over the time it took.
  d.roofline_fraction = (static_cast<double>(r.decode_bytes_per_token) / bandwidth) / (d.ms_per_token * 1e-3);
  d.kv_bytes_per_token = kv_bytes_per_token(o, run.prompt, r.kv_type);
  d.roofline_fraction_with_kv =
      (static_cast<double>(r.decode_bytes_per_token + d.kv_bytes_per_token) / bandwidth) / (d.ms_per_token * 1e-3);
  d.decode_gb_s = static_cast<double>(r.decode_bytes_per_token + d.kv_bytes_per_token) / (d.ms_per_token * 1e-3) * 1e-9;
  d.peak_bytes = o.device == "cuda" ? r.peak_device_bytes : r.peak_host_rss_bytes;
  return d;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

void print_table(const Options& o, const std::vector<FormatResult>& results, double bandwidth) {
  const char* mem = o.device == "cuda" ? "peak dev MiB" : "peak RSS MiB";
  std::printf("%-9s %-9s %-4s %11s %8s %9s %7s %13s %12s %9s %9s %10s %9s %12s %10s\n", "format", "embd", "kv",
              "weights MiB", "load s", "load GB/s", "prompt", "prefill tok/s", "decode tok/s", "ms/token", "GB/s",
              "roofline %", "+ KV %", mem, "ops/token");
  for (const FormatResult& r : results)
    for (const ContextRuns& run : r.runs) {
      const Derived d = derive(o, r, run, bandwidth);
      // ops/token: "1 + n" = one graph launch running n device operations; "-" when decode runs op by op.
      const std::string ops =
          r.graph_operations_per_token > 0 ? "1+" + std::to_string(r.graph_operations_per_token) : "-";
      std::printf("%-9s %-9s %-4s %11.1f %8.4f %9.2f %7d %13.1f %12.2f %9.3f %9.1f %10.1f %9.1f %12.1f %10s\n",
                  std::string(qrt::quant::format_name(r.plan.format)).c_str(),
                  std::string(qrt::quant::format_name(r.plan.embedding_format)).c_str(),
                  std::string(qrt::kv_type_name(r.kv_type)).c_str(), static_cast<double>(r.weight_bytes) / (1 << 20),
                  r.load_s, d.load_gb_s, run.prompt, d.prefill_tok_s, d.decode_tok_s, d.ms_per_token, d.decode_gb_s,
                  d.roofline_fraction * 100.0, d.roofline_fraction_with_kv * 100.0,
                  static_cast<double>(d.peak_bytes) / (1 << 20), ops.c_str());
    }
  bool any_batches = false;
  for (const FormatResult& r : results) any_batches = any_batches || !r.batch_runs.empty();
  if (!any_batches) return;
  qrt::bench::print_batch_decode_header();
  for (const FormatResult& r : results)
    qrt::bench::print_batch_decode(qrt::quant::format_name(r.plan.format), r.batch_runs);
}

nlohmann::ordered_json to_json(const Options& o, const std::string& device_name, const std::string& commit,
                               const std::vector<FormatResult>& results, double bandwidth,
                               const std::string& bandwidth_source) {
  nlohmann::ordered_json j;
  j["tool"] = "bench-model";
  j["qrt_version"] = qrt::kVersion;
  j["commit"] = commit;
  j["date"] = utc_now();
  j["device"] = o.device == "cuda" ? "cuda:" + std::to_string(o.device_index) : "cpu";
  j["device_name"] = device_name;
  const Shape& s = o.shape;
  j["shape"] = {{"name", s.name},
                {"hidden", s.hidden},
                {"layers", s.layers},
                {"heads", s.heads},
                {"kv_heads", s.kv_heads},
                {"head_dim", s.head_dim},
                {"ffn", s.ffn},
                {"vocab", s.vocab},
                {"rope_theta", s.rope_theta},
                {"tied_embeddings", false},
                {"experts", s.experts},
                {"experts_used", s.experts_used},
                {"expert_ffn", s.expert_ffn}};
  // One length: a number (as before the sweep); several: the list, and each result says its own.
  if (o.prompts.size() == 1) {
    j["prompt_tokens"] = o.prompts[0];
  } else {
    j["prompt_tokens"] = o.prompts;
  }
  j["decode_tokens"] = o.decode;
  j["repetitions"] = o.repetitions;
  j["warmup"] = o.warmup;
  j["bandwidth_gb_per_s"] = bandwidth * 1e-9;
  j["bandwidth_source"] = bandwidth_source;
  j["peak_memory_kind"] = o.device == "cuda" ? "device memory in use (cudaMemGetInfo) above the level before loading"
                                             : "host peak resident set (VmHWM)";
  auto& list = j["results"] = nlohmann::ordered_json::array();
  for (const FormatResult& r : results)
    for (const ContextRuns& run : r.runs) {
      const Derived d = derive(o, r, run, bandwidth);
      nlohmann::ordered_json e;
      e["format"] = qrt::quant::format_name(r.plan.format);
      e["embedding_format"] = qrt::quant::format_name(r.plan.embedding_format);
      e["group_size"] = r.plan.params.group_size;
      e["scale_type"] = qrt::quant::scalar_type_name(r.plan.params.scale_type);
      e["prompt_tokens"] = run.prompt;
      e["weight_bytes"] = r.weight_bytes;
      e["decode_weight_bytes_per_token"] = r.decode_bytes_per_token;
      e["kv_type"] = qrt::kv_type_name(r.kv_type);
      e["decode_kv_bytes_per_token"] = d.kv_bytes_per_token;
      // The decode step's device operations started by its one graph launch per token (0: no graph).
      e["decode_graph_operations_per_token"] = r.graph_operations_per_token;
      e["generate_s"] = r.generate_s;
      e["load_s"] = r.load_s;
      e["load_gb_per_s"] = d.load_gb_s;
      e["prefill_tokens_per_s"] = d.prefill_tok_s;
      e["decode_tokens_per_s"] = d.decode_tok_s;
      e["decode_ms_per_token"] = d.ms_per_token;
      e["decode_gb_per_s"] = d.decode_gb_s;
      e["decode_roofline_fraction"] = d.roofline_fraction;
      e["decode_roofline_fraction_with_kv"] = d.roofline_fraction_with_kv;
      e["peak_memory_bytes"] = d.peak_bytes;
      e["peak_host_rss_bytes"] = r.peak_host_rss_bytes;
      e["host_peak_is_per_format"] = r.host_peak_is_per_format;
      if (o.device == "cuda") e["peak_device_bytes"] = r.peak_device_bytes;
      e["prefill_s"] = run.prefill_s;
      e["decode_s"] = run.decode_s;
      list.push_back(std::move(e));
    }
  // Batched decode: aggregate tokens/s of B sequences stepping together, and the ratio to one sequence's.
  auto& batched = j["batch_decode"] = nlohmann::ordered_json::array();
  for (const FormatResult& r : results)
    for (auto& e : qrt::bench::batch_decode_json(qrt::quant::format_name(r.plan.format), r.kv_type, r.batch_runs))
      batched.push_back(std::move(e));
  return j;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench-model: prefill and decode speed of a Llama-3-8B- or Qwen3-30B-A3B-shaped model with random "
               "weights"};
  app.set_version_flag("--version", std::string("qrt ") + qrt::kVersion);
  Options o;
  std::string shape_name = "llama3-8b", formats = "q4_k,q8_0,afq4,mxfp4,bf16", json_path, commit;
  int layers = 0;
  double bandwidth_gb_s = 0.0;
  app.add_option("--shape", shape_name, qrt::bench::known_shapes());
  app.add_option("--layers", layers, "override the shape's layer count")->check(CLI::Range(1, 1024));
  app.add_option("--formats", formats, "comma-separated weight formats (any format with a quantizer)");
  app.add_option("--device", o.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--device-index", o.device_index, "CUDA device index")->check(CLI::NonNegativeNumber);
  // Bounded so that a typo cannot ask for a KV cache and scratch of hundreds of GB or a run of days.
  app.add_option("--prompt", o.prompts,
                 "prompt tokens (one prefill forward); a comma-separated list runs each, e.g. 128,512,4096,16384 for "
                 "decode speed at those contexts")
      ->delimiter(',')
      ->check(CLI::Range(1, 32768));
  app.add_option("--decode", o.decode, "tokens decoded after the prompt")->check(CLI::Range(1, 32768));
  app.add_option("--repetitions", o.repetitions, "timed runs per format (the median is reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--warmup", o.warmup, "untimed runs per format before the timed ones")->check(CLI::Range(0, 100));
  app.add_option("--bandwidth", bandwidth_gb_s, "copy bandwidth in GB/s (read + write) instead of measuring it")
      ->check(CLI::PositiveNumber);
  app.add_option("--json", json_path, "write the results as JSON to this file");
  app.add_option("--commit", commit, "the qrt commit being measured, recorded in the JSON");
  app.add_option("--seed", o.seed, "random seed for the weights and the prompt");
  std::string kv_type;
  app.add_option("--kv-type", kv_type,
                 "KV cache element type: f32, f16, bf16, fp8 or q8_0 (default: f16 on cuda, f32 on cpu)");
  app.add_option("--batch", o.batches,
                 "also decode this many sequences together (comma-separated, e.g. 1,8,32), each after its own "
                 "prompt of the first --prompt length, in a paged KV cache: aggregate and per-stream tokens/s")
      ->delimiter(',')
      ->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);

  if (o.prompts.empty()) return fail("--prompt names no length");
  if (!kv_type.empty()) {
    o.kv_type = qrt::kv_type_from_name(kv_type);
    if (!o.kv_type) return fail("--kv-type " + kv_type + ": expected f32, f16, bf16, fp8 or q8_0");
  }
  auto shape = qrt::bench::shape_from_name(shape_name);
  if (!shape.ok()) return fail(shape.status().message());
  o.shape = *shape;
  if (layers > 0) o.shape.layers = layers;
  std::vector<FormatPlan> plans;
  for (const std::string& name : split_list(formats)) {
    auto plan = qrt::bench::plan_format(name, o.shape);
    if (!plan.ok()) return fail(plan.status().message());
    plans.push_back(*plan);
  }
  if (plans.empty()) return fail("--formats names no format");
  // A model that cannot fit is an error up front, not an allocation failure (or the OOM killer) later.
  uint64_t memory_bytes =
      static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<uint64_t>(sysconf(_SC_PAGE_SIZE));
  std::string memory_what = "host memory";
  if (o.device == "cuda") {
    auto use = qrt::cuda_memory_use(o.device_index);
    if (!use.ok()) return fail(use.status().message());
    memory_bytes = use->total_bytes;
    memory_what = "device memory";
  }
  for (const FormatPlan& plan : plans)
    if (plan.matrix_bytes > memory_bytes)
      return fail("format " + std::string(qrt::quant::format_name(plan.format)) + ": the " + o.shape.name +
                  " shape with " + std::to_string(o.shape.layers) + " layers needs " +
                  std::to_string(plan.matrix_bytes >> 20) + " MiB of weights, more than the " +
                  std::to_string(memory_bytes >> 20) + " MiB of " + memory_what + " (use --layers to take fewer)");

  std::string device_name = host_cpu_name();
  if (o.device == "cuda") {
    auto name = qrt::cuda_device_name(o.device_index);
    if (!name.ok()) return fail(name.status().message());
    device_name = *name;
  }
  double bandwidth = bandwidth_gb_s * 1e9;
  std::string bandwidth_source = "--bandwidth";
  if (bandwidth <= 0.0) {
    if (o.device == "cuda") {
      auto bw = qrt::cuda_copy_bandwidth(o.device_index, uint64_t{1} << 30, 9);
      if (!bw.ok()) return fail(bw.status().message());
      bandwidth = *bw;
      bandwidth_source = "device-to-device cudaMemcpy of 1 GiB, read + write, median of 9";
    } else {
      bandwidth = host_copy_bandwidth(uint64_t{256} << 20, 5);
      bandwidth_source = "host memcpy of 256 MiB, read + write, median of 5";
    }
  }

  std::vector<FormatResult> results;
  for (const FormatPlan& plan : plans) {
    auto r = bench_format(o, plan);
    if (!r.ok())
      return fail(r.status().with_context("format " + std::string(qrt::quant::format_name(plan.format))).message());
    results.push_back(std::move(*r));
  }

  const Shape& s = o.shape;
  const std::string mlp = s.experts > 0 ? std::to_string(s.experts_used) + " of " + std::to_string(s.experts) +
                                              " experts of " + std::to_string(s.expert_ffn)
                                        : "ffn " + std::to_string(s.ffn);
  std::printf("bench-model: %s shape (%d layers, hidden %d, %d/%d heads of %d, %s, vocab %d) on %s (%s)\n",
              s.name.c_str(), s.layers, s.hidden, s.heads, s.kv_heads, s.head_dim, mlp.c_str(), s.vocab,
              o.device == "cuda" ? ("cuda:" + std::to_string(o.device_index)).c_str() : "cpu", device_name.c_str());
  std::string prompts;
  for (const int p : o.prompts) prompts += (prompts.empty() ? "" : ",") + std::to_string(p);
  std::printf("prompt %s tokens, decode %d tokens, median of %d runs; bandwidth %.1f GB/s (%s)\n", prompts.c_str(),
              o.decode, o.repetitions, bandwidth * 1e-9, bandwidth_source.c_str());
  print_table(o, results, bandwidth);
  std::fflush(stdout);

  if (!json_path.empty()) {
    std::ofstream f(json_path);
    if (!f) return fail("cannot open " + json_path + " for writing");
    f << to_json(o, device_name, commit, results, bandwidth, bandwidth_source).dump(2) << "\n";
    if (!f) return fail("cannot write " + json_path);
  }
  return 0;
}
