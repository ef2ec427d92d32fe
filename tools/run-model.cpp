// run-model: generate text from a model (UQFF export, GGUF file, Ollama name:tag, or HF checkpoint).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "qrt/version.hpp"

int main(int argc, char** argv) {
  CLI::App app{"run-model: generate text with qrt from a quantized model"};
  app.set_version_flag("--version", std::string("qrt ") + qrt::kVersion);
  std::string model, prompt, system_prompt, device = "cpu";
  int max_tokens = 128, top_k = 0;
  unsigned long long seed = 0;
  float temperature = 0.0f, top_p = 1.0f, min_p = 0.0f;
  bool chat = false, ids = false;
  app.add_option("model", model, "UQFF directory or shard, GGUF file, Ollama name:tag, or HF checkpoint directory")
      ->required();
  app.add_option("-p,--prompt", prompt, "prompt text")->required();
  app.add_option("-n,--max-tokens", max_tokens, "tokens to generate")->check(CLI::PositiveNumber);
  app.add_option("--temp", temperature, "sampling temperature (0 = greedy)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-k", top_k, "keep the k most likely tokens (0 = off)")->check(CLI::NonNegativeNumber);
  app.add_option("--top-p", top_p, "nucleus sampling threshold")->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--min-p", min_p, "drop tokens below min-p times the best probability")->check(CLI::Range(0.0f, 1.0f));
  app.add_option("--seed", seed, "sampling seed");
  app.add_flag("--chat", chat, "wrap the prompt in the model's chat template");
  app.add_option("--system", system_prompt, "system message for --chat");
  app.add_option("--device", device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_flag("--ids", ids, "print prompt and generated token ids instead of text");
  CLI11_PARSE(app, argc, argv);

  std::fprintf(stderr, "error: text generation is not implemented in this build of qrt yet\n");
  return 2;
}
