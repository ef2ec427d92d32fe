// run-model: generate text from a model (UQFF export, GGUF file, Ollama name:tag, or HF checkpoint).
//
// stdout gets the continuation (not the prompt), flushed token by token, and a final newline; with --ids it gets
// "prompt_ids: ..." and "generated_ids: ..." lines instead. stderr gets the load time and the prompt and
// generation speeds. Bad input ends with one "error: ..." line and exit status 1.
//
// Under `mpirun -np N run-model ...` the model is split among the N ranks (tensor parallelism): every rank runs
// this same program, and rank 0 alone prints (errors are agreed among the ranks, so rank 0 has them all).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "qrt/runtime.hpp"
#include "tools/convert/progress.hpp"
#include "qrt/version.hpp"

namespace {

// Only rank 0 of a tensor-parallel job prints.
bool g_quiet = false;

int fail(const std::string& message) {
  if (g_quiet) return 1;
  std::string line = message;
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  std::fprintf(stderr, "error: %s\n", line.c_str());
  return 1;
}

int fail(const qrt::Status& status) { return fail(status.message()); }

void print_ids(const char* label, std::span<const int32_t> ids) {
  std::printf("%s:", label);
  for (int32_t id : ids) std::printf(" %d", id);
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"run-model: generate text with qrt from a quantized model"};
  app.set_version_flag("--version", std::string("qrt ") + qrt::kVersion);
  std::string model_path, prompt, system_prompt, device = "cpu";
  int max_tokens = 128, top_k = 0;
  int64_t context = 0;
  unsigned long long seed = 0;
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f;
  bool chat = false, ids = false, verbose = false;
  std::vector<std::string> stops;
  app.add_option("model", model_path, "UQFF directory or shard, GGUF file, Ollama name:tag, or HF checkpoint directory")
      ->required();
  app.add_option("-p,--prompt", prompt, "prompt text")->required();
  app.add_option("-n,--max-tokens", max_tokens, "tokens to generate")->check(CLI::PositiveNumber);
  app.add_option("--temp", temperature, "sampling temperature (0 = greedy)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", top_k, "keep the k most likely tokens (0 = off)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", top_p, "nucleus sampling threshold")->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--min-p", min_p, "drop tokens below min-p times the best probability")->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--seed", seed, "sampling seed");
  app.add_option("--stop", stops, "stop when the text contains this string (repeatable)");
  app.add_option("-c,--ctx-size", context, "context length in tokens (default: the model's, at most 4096)")
      ->check(CLI::PositiveNumber);
  app.add_flag("--chat", chat, "wrap the prompt in the model's chat template");
  app.add_option("--system", system_prompt, "system message for --chat");
  app.add_option("--device", device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--ids", ids, "print prompt and generated token ids instead of text");
  app.add_flag("--verbose", verbose, "also report memory by owner: weights, KV cache, scratch, peak");
  std::string kv_type;
  app.add_option("--kv-type", kv_type,
                 "KV cache element type: f32, f16, bf16, fp8 (E4M3) or q8_0 (GGML blocks of 32; default: f16 on "
                 "cuda, f32 on cpu)")
      ->check(CLI::IsMember({"f32", "f16", "bf16", "fp8", "q8_0"}));
  int tensor_parallel = 0;
  app.add_option("--tp", tensor_parallel,
                 "split the model among N ranks inside this process (threads; one GPU each with --device cuda)")
      ->check(CLI::Range(1, 64));
  bool no_progress = false;
  app.add_flag("-q,--quiet", no_progress, "no progress output while the model loads");
  CLI11_PARSE(app, argc, argv);
  if (!system_prompt.empty() && !chat) return fail("--system needs --chat");
  g_quiet = qrt::launcher_rank() != 0;

  qrt::ModelOptions options;
  auto parsed_device = qrt::device_from_name(device);
  if (!parsed_device.ok()) return fail(parsed_device.status());
  options.device = *parsed_device;
  options.context_length = context;
  options.tensor_parallel = tensor_parallel;
  if (!kv_type.empty()) options.kv_type = qrt::kv_type_from_name(kv_type);
  // A bar (or lines on a pipe) while the weights upload, for loads that take more than a second.
  std::unique_ptr<qrt::convert::Progress> progress;
  uint64_t reported = 0;
  if (!no_progress && !g_quiet)
    options.on_load_progress = [&](uint64_t done, uint64_t total) {
      if (!progress) progress = std::make_unique<qrt::convert::Progress>("loading", total);
      progress->add(done - reported);
      reported = done;
    };
  auto model = qrt::Model::open(model_path, options);
  if (progress) progress->finish(model.ok());
  if (!model.ok()) return fail(model.status());
  auto session = model->new_session();
  if (!session.ok()) return fail(session.status());

  qrt::Status fed;
  if (chat) {
    std::vector<qrt::ChatMessage> messages;
    if (!system_prompt.empty()) messages.push_back({"system", system_prompt});
    messages.push_back({"user", prompt});
    fed = session->add_chat(messages);
  } else {
    fed = session->add_prompt(prompt);
  }
  if (!fed.ok()) return fail(fed);
  const std::vector<int32_t> prompt_ids(session->tokens().begin(), session->tokens().end());

  qrt::GenerateOptions gen;
  gen.max_tokens = max_tokens;
  gen.sampling.temperature = temperature;
  gen.sampling.top_k = top_k;
  gen.sampling.top_p = top_p;
  gen.sampling.min_p = min_p;
  gen.sampling.seed = seed;
  gen.stop = stops;
  qrt::TokenCallback stream;
  if (!ids && !g_quiet) {
    stream = [](int32_t, std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
      return true;
    };
  }
  auto result = session->generate(gen, stream);
  if (!result.ok()) {
    if (!ids && !g_quiet) std::printf("\n");
    return fail(result.status());
  }
  if (g_quiet) return 0;
  if (ids) {
    print_ids("prompt_ids", prompt_ids);
    print_ids("generated_ids", result->tokens);
  } else {
    std::printf("\n");
  }
  std::fflush(stdout);

  const qrt::Timings& t = session->timings();
  const qrt::ModelInfo& info = model->info();
  std::fprintf(stderr, "load: %.3f s, %.2f GB/s (%.1f MB of weights; %s, %s, %s", t.load_seconds,
               t.load_seconds > 0 ? static_cast<double>(info.weight_bytes) / t.load_seconds * 1e-9 : 0.0,
               static_cast<double>(info.weight_bytes) * 1e-6, info.source_kind.c_str(), info.architecture.c_str(),
               info.device.c_str());
  if (info.tp_world > 1) std::fprintf(stderr, ", split among %d ranks", info.tp_world);
  std::fprintf(stderr, ")\n");
  std::fprintf(stderr, "prompt: %lld tokens in %.3f s, %.1f tokens/s\n", static_cast<long long>(t.prompt_tokens),
               t.prompt_seconds, t.prompt_tokens_per_second());
  std::fprintf(stderr, "generation: %lld tokens in %.3f s, %.1f tokens/s (stopped: %s)\n",
               static_cast<long long>(t.generated_tokens), t.generation_seconds, t.generation_tokens_per_second(),
               qrt::stop_reason_name(result->stop_reason));
  if (verbose) {
    const qrt::MemoryUse m = session->memory();
    std::fprintf(stderr,
                 "memory: weights %.3f MB, KV cache %.3f MB (%s, %lld tokens, %llu bytes each), scratch %.3f MB, "
                 "peak %.3f MB%s\n",
                 m.weights * 1e-6, m.kv_cache * 1e-6, std::string(qrt::kv_type_name(info.kv_type)).c_str(),
                 static_cast<long long>(session->context_length()),
                 static_cast<unsigned long long>(m.kv_cache_per_token), m.scratch * 1e-6, m.peak * 1e-6,
                 info.tp_world > 1 ? " (rank 0's share)" : "");
  }
  return 0;
}
