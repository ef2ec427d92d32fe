#include "tools/bench_model/batch_decode.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>

namespace qrt::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kBlockSize = 16;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Aggregate tokens/s of each run's batch (median step), and batch 1's when it was measured (else 0).
double aggregate_of(const BatchDecodeRuns& b) { return b.batch / median(b.step_s); }
double batch_one_aggregate(const std::vector<BatchDecodeRuns>& runs) {
  for (const BatchDecodeRuns& b : runs)
    if (b.batch == 1) return aggregate_of(b);
  return 0.0;
}

int32_t argmax(const std::vector<float>& logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The next token of every row of the step just run.
Status next_tokens(Transformer& model, DecodeBatch& batch, bool device_sampling, std::vector<int32_t>* tokens) {
  if (device_sampling) {
    SampleStep greedy;  // temperature 0
    greedy.u01.assign(tokens->size(), 0.5);
    return model.sample_batch_rows(batch, 0, greedy, *tokens);
  }
  std::vector<float> logits;
  for (size_t i = 0; i < tokens->size(); ++i) {
    QRT_TRY(model.download_batch_row(batch, static_cast<int64_t>(i), &logits));
    (*tokens)[i] = argmax(logits);
  }
  return ok_status();
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Prompts run one sequence at a time, then `steps` batched steps; returns seconds per prompt and per step (the
// logits copy of each prompt and the ids of each step end on the host, so both are complete).
Result<std::pair<double, double>> one_run(Transformer& model, std::vector<std::unique_ptr<Sequence>>& seqs,
                                          DecodeBatch& batch, const std::vector<std::vector<int32_t>>& prompts,
                                          int steps, bool device_sampling) {
  std::vector<Sequence*> rows;
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  auto t0 = Clock::now();
  for (size_t i = 0; i < seqs.size(); ++i) {
    seqs[i]->reset();
    QRT_TRY(model.forward(*seqs[i], prompts[i], LogitsFor::kLast, &logits));
    rows.push_back(seqs[i].get());
    tokens.push_back(argmax(logits));
  }
  const double prompt_s = seconds_since(t0) / static_cast<double>(seqs.size());
  t0 = Clock::now();
  for (int s = 0; s < steps; ++s) {
    QRT_TRY(model.decode_batch_keep_logits(batch, rows, tokens));
    QRT_TRY(next_tokens(model, batch, device_sampling, &tokens));
  }
  return std::pair{prompt_s, seconds_since(t0) / steps};
}

}  // namespace

Result<std::vector<BatchDecodeRuns>> bench_batch_decode(Transformer& model, const std::vector<int>& batches,
                                                        int context, int steps, int repetitions, int vocab,
                                                        uint64_t seed) {
  std::vector<BatchDecodeRuns> out;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, vocab - 1);
  for (const int b : batches) {
    if (b < 1) return invalid_argument("batch size " + std::to_string(b) + " is not positive");
    const int64_t capacity = int64_t{context} + steps;
    const int64_t blocks_per_seq = (capacity + kBlockSize - 1) / kBlockSize;
    QRT_ASSIGN_OR_RETURN(std::unique_ptr<KvPool> pool, model.new_kv_pool(b * blocks_per_seq, kBlockSize));
    std::vector<std::unique_ptr<Sequence>> seqs;
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < b; ++i) {
      QRT_ASSIGN_OR_RETURN(std::unique_ptr<Sequence> seq, model.new_sequence(*pool, capacity));
      seqs.push_back(std::move(seq));
      std::vector<int32_t> prompt(static_cast<size_t>(context));
      for (int32_t& t : prompt) t = token(rng);
      prompts.push_back(std::move(prompt));
    }
    DecodeBatch batch;
    // Device sampling where the backend has it (as the engine samples), else the rows' logits come back.
    bool device_sampling = true;
    BatchDecodeRuns runs{b, context, steps, {}, {}};
    for (int r = 0; r < repetitions + 1; ++r) {
      auto s = one_run(model, seqs, batch, prompts, steps, device_sampling);
      if (!s.ok() && s.status().code() == ErrorCode::kUnsupported && device_sampling) {
        device_sampling = false;  // the CPU backend has no sample op
        s = one_run(model, seqs, batch, prompts, steps, device_sampling);
      }
      if (!s.ok()) return s.status().with_context("batched decode of " + std::to_string(b) + " sequences");
      if (r > 0) {  // run 0 warms up
        runs.prompt_s.push_back(s->first);
        runs.step_s.push_back(s->second);
      }
    }
    seqs.clear();  // before their pool
    out.push_back(std::move(runs));
  }
  return out;
}

void print_batch_decode_header() {
  std::printf("\nbatched decode (every sequence one token per step, one pass for all):\n");
  std::printf("%-9s %7s %7s %12s %10s %16s %17s %10s\n", "format", "batch", "prompt", "ms/prompt", "ms/step",
              "aggregate tok/s", "per-stream tok/s", "x batch 1");
}

void print_batch_decode(std::string_view format, const std::vector<BatchDecodeRuns>& runs) {
  const double one = batch_one_aggregate(runs);
  for (const BatchDecodeRuns& b : runs) {
    const double step = median(b.step_s), aggregate = aggregate_of(b);
    char ratio[32] = "-";
    if (one > 0.0) std::snprintf(ratio, sizeof ratio, "%.2f", aggregate / one);
    std::printf("%-9s %7d %7d %12.3f %10.3f %16.1f %17.1f %10s\n", std::string(format).c_str(), b.batch, b.context,
                median(b.prompt_s) * 1e3, step * 1e3, aggregate, 1.0 / step, ratio);
  }
}

std::vector<nlohmann::ordered_json> batch_decode_json(std::string_view format, KvType kv_type,
                                                      const std::vector<BatchDecodeRuns>& runs) {
  const double one = batch_one_aggregate(runs);
  std::vector<nlohmann::ordered_json> out;
  for (const BatchDecodeRuns& b : runs) {
    nlohmann::ordered_json e;
    e["format"] = format;
    e["kv_type"] = kv_type_name(kv_type);
    e["batch"] = b.batch;
    e["prompt_tokens"] = b.context;
    e["steps"] = b.steps;
    e["prompt_s"] = b.prompt_s;
    e["step_s"] = b.step_s;
    e["aggregate_tokens_per_s"] = aggregate_of(b);
    e["per_stream_tokens_per_s"] = 1.0 / median(b.step_s);
    if (one > 0.0) e["aggregate_vs_batch_1"] = aggregate_of(b) / one;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace qrt::bench
