// Batched decode as a serving engine runs it, for bench-model's --batch: B paged sequences in one KV cache pool,
// each holding its own prompt of random tokens, then decode steps in which every sequence gets one token
// (Transformer::decode_batch_keep_logits, one pass reading each weight matrix once for all B rows) and every row
// is sampled greedily (on the device where the backend samples, else from downloaded logits). What a step costs
// at batch B against batch 1 is the speed-up continuous batching can give at most, before scheduling and HTTP.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "models/transformer.hpp"

namespace qrt::bench {

struct BatchDecodeRuns {
  int batch = 0;
  int context = 0;             // prompt tokens of each sequence before the timed steps
  int steps = 0;               // decode steps per timed run
  std::vector<double> step_s;  // per run: seconds per step (the run's time / steps)
  // Per run: seconds per prompt (each sequence's prompt runs alone before the steps): a lone request's time to
  // first token, and what each request that arrives with others adds to theirs when prompts run one after another.
  std::vector<double> prompt_s;
};

// One entry per batch size, each timed `repetitions` times after one untimed warm-up run (first-use costs). A
// sequence's prompt is `context` tokens below `vocab` from `seed`; the pool holds every sequence's whole run.
Result<std::vector<BatchDecodeRuns>> bench_batch_decode(Transformer& model, const std::vector<int>& batches,
                                                        int context, int steps, int repetitions, int vocab,
                                                        uint64_t seed);

// The report: a table on stdout (batch, ms per step, aggregate and per-stream tokens/s, aggregate over batch 1's)
// and one JSON object per batch size with the raw step times.
void print_batch_decode_header();
void print_batch_decode(std::string_view format, const std::vector<BatchDecodeRuns>& runs);
std::vector<nlohmann::ordered_json> batch_decode_json(std::string_view format, KvType kv_type,
                                                      const std::vector<BatchDecodeRuns>& runs);

}  // namespace qrt::bench
