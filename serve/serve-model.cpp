// serve-model: an OpenAI-compatible HTTP server for one model (UQFF, GGUF, Ollama name:tag or HF checkpoint).
//
//   serve-model MODEL [--host H] [--port P] [--device cpu|cuda] [--max-seqs N] [--ctx-size T] [--kv-cache-mem MIB]
//               [--kv-cache-fraction F] [--api-key K]
//
// The KV cache is one pool of blocks made at start, so the memory a server needs is taken before the first request:
// --kv-cache-mem MiB, or --kv-cache-fraction of the memory free after loading (as vLLM's --gpu-memory-utilization,
// but of the free memory, so other users of the GPU keep theirs). The default on cuda is 0.9 of the free device
// memory; on cpu it is room for --max-seqs full contexts of --ctx-size tokens, at most half the available RAM (a
// pool's pages become resident as blocks are used, so a share of all RAM is only taken when asked). Requests are
// admitted first come first served (qrt::Engine) while the pool has blocks for their prompts; prompts run in chunks between
// the batched decode steps, prompts that start like an earlier one reuse its cached blocks, and when the pool runs
// out the latest request is preempted and recomputed later. Logs go to stderr: one line when listening
// ("serve-model: listening on http://HOST:PORT ..."), one per request. SIGINT/SIGTERM stop it.
//
// Tensor parallelism: --tp N splits the model among N ranks in this process; under mpirun every rank loads its
// share, rank 0 serves HTTP and schedules, and the other ranks follow its steps (qrt::Engine::follow).
#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "qrt/kv_type.hpp"
#include "qrt/runtime.hpp"
#include "serve/http_server.hpp"
#include "qrt/engine.hpp"

namespace {

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop = true; }

int fail(const qrt::Status& s) {
  std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
  return 1;
}

// The name clients put in "model": the file or folder name without a GGUF extension, or an Ollama name as given.
std::string default_served_name(const std::string& path) {
  std::filesystem::path p(path);
  while (!p.empty() && !p.has_filename()) p = p.parent_path();  // "dir/" names the folder
  std::string name = p.filename().string();
  if (p.extension() == ".gguf") name = p.stem().string();
  return name.empty() ? path : name;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"serve-model: serve a model over the OpenAI HTTP API (chat and text completions, SSE streaming)"};
  std::string model_path, host = "127.0.0.1", device = "cpu", api_key, served_name, kv_type;
  int port = 8080, max_seqs = 4, max_waiting = 64, block_size = 16;
  int64_t context = 0, prompt_chunk = 0;
  int tensor_parallel = 0;
  double kv_cache_mib = 0;
  double kv_cache_fraction = 0;
  app.add_option("model", model_path, "UQFF directory or shard, GGUF file, Ollama name:tag, or HF checkpoint directory")
      ->required();
  app.add_option("--host", host, "address to listen on (0.0.0.0: every interface)");
  app.add_option("--port", port, "port to listen on (0: any free port, printed when listening)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--device", device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--max-seqs", max_seqs, "requests decoded together")->check(CLI::Range(1, 1024));
  app.add_option("--max-waiting", max_waiting, "requests that may wait for a sequence before 503 answers")
      ->check(CLI::Range(0, 100000));
  app.add_option("-c,--ctx-size", context, "context length per sequence in tokens (default: the model's, at most 4096)")
      ->check(CLI::PositiveNumber);
  auto* mem_option =
      app.add_option("--kv-cache-mem", kv_cache_mib,
                     "KV cache pool in MiB (per rank), shared by all requests (default: see --kv-cache-fraction)")
          ->check(CLI::PositiveNumber);
  app.add_option("--kv-cache-fraction", kv_cache_fraction,
                 "share of the memory free after loading that the KV cache pool takes (default: 0.9 on cuda; on cpu "
                 "room for --max-seqs full contexts, at most half the available RAM)")
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1]") & CLI::PositiveNumber)
      ->excludes(mem_option);
  app.add_option("--block-size", block_size, "tokens per KV cache block (a power of two)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--prompt-chunk", prompt_chunk, "prompt tokens run per step between decode steps (default 512)")
      ->check(CLI::PositiveNumber);
  app.add_option("--kv-type", kv_type,
                 "KV cache element type: f32, f16, bf16, fp8 (E4M3) or q8_0 (GGML blocks of 32; default: f16 on "
                 "cuda, f32 on cpu)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "fp8", "q8_0"}));
  app.add_option("--tp", tensor_parallel, "split the model among N ranks in this process (one GPU each on cuda)")
      ->check(CLI::Range(0, 64));
  app.add_option("--api-key", api_key, "require \"Authorization: Bearer KEY\" on /v1/ routes (or QRT_API_KEY)");
  app.add_option("--served-model-name", served_name, "the model name clients use (default: the file or folder name)");
  CLI11_PARSE(app, argc, argv);
  if (api_key.empty()) {
    if (const char* env = std::getenv("QRT_API_KEY")) api_key = env;
  }
  // Under mpirun every rank loads its share of the model; rank 0 serves HTTP and runs the engine, the others
  // follow its steps. Errors agreed by all ranks are printed once, by rank 0.
  const bool leader = qrt::launcher_rank() == 0;
  const auto fail_once = [&](const qrt::Status& s) { return leader ? fail(s) : 1; };

  qrt::ModelOptions options;
  auto parsed_device = qrt::device_from_name(device);
  if (!parsed_device.ok()) return fail_once(parsed_device.status());
  options.device = *parsed_device;
  options.context_length = context;
  options.tensor_parallel = tensor_parallel;
  if (!kv_type.empty()) options.kv_type = qrt::kv_type_from_name(kv_type);
  auto model = qrt::Model::open(model_path, options);
  if (!model.ok()) return fail_once(model.status());
  if (model->info().tp_rank != 0) {
    const qrt::Status followed = qrt::Engine::follow(*model);
    return followed.ok() ? 0 : 1;  // rank 0 reports why
  }

  qrt::EngineOptions engine_options;
  engine_options.max_running = max_seqs;
  engine_options.max_waiting = max_waiting;
  engine_options.context_length = context;
  engine_options.kv_cache_bytes = static_cast<uint64_t>(kv_cache_mib * 1024.0 * 1024.0);
  engine_options.kv_cache_fraction = kv_cache_fraction > 0 ? kv_cache_fraction
                                     : kv_cache_mib > 0    ? 0.0
                                     : options.device == qrt::Device::kCuda ? 0.9
                                                                             : 0.0;
  engine_options.block_size = block_size;
  engine_options.prompt_chunk = prompt_chunk;
  auto engine = qrt::Engine::start(*model, engine_options);
  if (!engine.ok()) return fail(engine.status());
  const qrt::EngineCounts counts = (*engine)->counts();

  qrt::serve::ServerOptions server_options;
  server_options.host = host;
  server_options.port = port;
  server_options.api_key = api_key;
  server_options.served_model = served_name.empty() ? default_served_name(model_path) : served_name;
  server_options.max_waiting = max_waiting;
  qrt::serve::HttpServer server(*model, **engine, server_options);
  auto bound = server.bind();
  if (!bound.ok()) return fail(bound.status());

  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::thread watcher([&server] {
    while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    server.stop();
  });
  const int world = model->info().tp_world;
  const std::string split = world > 1 ? ", split among " + std::to_string(world) + " ranks" : std::string();
  std::fprintf(stderr,
               "serve-model: listening on http://%s:%d (model %s on %s%s, %d sequences of up to %lld tokens, KV cache "
               "%.1f MiB%s in %lld blocks of %d tokens)\n",
               host.c_str(), *bound, server_options.served_model.c_str(), model->info().device.c_str(), split.c_str(),
               max_seqs, static_cast<long long>((*engine)->context_length()),
               static_cast<double>(counts.kv_cache_bytes) / (1024.0 * 1024.0), world > 1 ? " per rank" : "",
               static_cast<long long>(counts.kv_blocks), counts.kv_block_size);
  std::fflush(stderr);
  const qrt::Status served = server.serve();
  g_stop = true;
  watcher.join();
  if (!served.ok()) return fail(served);
  std::fprintf(stderr, "serve-model: stopped\n");
  return 0;
}
