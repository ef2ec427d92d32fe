// qrt::Engine: continuous batching over a paged KV cache (qrt/engine.hpp).
//
// One thread runs the loop; each step:
//   1. cancellations: a queued request leaves the queue, a running one stops at this step;
//   2. admission, first come first served: the request at the head of the queue takes a free sequence when the pool
//      has the blocks for the rest of its context after the cached blocks of its prefix (they are reserved at once,
//      so its prompt chunks never find the pool full); one that could not fit even an empty pool fails;
//   3. one pass for everything that runs: each ready request takes its next token (sampled on the device after the
//      last pass, or on the host from its logits with its own sampler) and decides, as Session::generate decides,
//      whether it stops (end of generation, stop strings, max tokens, a full context, the callback); when the
//      continuing requests need more blocks than the pool has free, the most recently admitted requests are
//      preempted until they fit; then one Transformer::step_keep_logits runs every continuing token together with
//      up to prompt_chunk tokens of the prompts still running (admission order), so a long prompt neither waits for
//      the decoding requests nor stalls them. On a backend with a sample op the decode rows are sampled there in
//      groups of equal parameters (one id per row comes back instead of a row of logits).
#include "qrt/engine.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "kernels/cpu/sampler.hpp"
#include "qrt/log.hpp"
#include "runtime/src/engine_ranks.hpp"
#include "runtime/src/logprobs.hpp"
#include "runtime/src/model_impl.hpp"
#include "runtime/src/prompt_tokens.hpp"
#include "runtime/src/stream_text.hpp"

namespace qrt {

namespace {

// A request from submit() to on_done: what it asked for and, once admitted, its context and generation so far
// (kept while it waits after a preemption).
struct Request {
  Request(uint64_t request_id, EngineRequest r) : id(request_id), request(std::move(r)), stream(request.options.stop) {}
  uint64_t id = 0;
  EngineRequest request;
  StreamText stream;
  std::optional<Sampler> sampler;  // made at the first admission
  GenerateResult result;
  std::vector<int32_t> tokens;     // the context: the prompt, then the generated tokens; empty before admission
  int64_t prompt_tokens = 0;
  bool started = false;            // on_started has run
  bool cancelled = false;
  uint64_t admitted = 0;           // admission order: the latest admitted is preempted first
  // After its last pass: ready, with the logits [vocab] copied back (the host samples, and logprobs read them) and/or
  // the next token already sampled on the device (next_id >= 0). Not ready while its context is being run.
  bool ready = false;
  std::vector<float> logits;
  int32_t next_id = -1;
};

bool same_sampling(const SamplingParams& a, const SamplingParams& b) {  // the seed aside
  return a.temperature == b.temperature && a.top_k == b.top_k && a.top_p == b.top_p && a.min_p == b.min_p &&
         a.repetition_penalty == b.repetition_penalty && a.presence_penalty == b.presence_penalty &&
         a.frequency_penalty == b.frequency_penalty && a.penalty_last_n == b.penalty_last_n;
}

enum class Admission { kAdmitted, kNoRoom, kFailed };

}  // namespace

struct Engine::Impl {
  explicit Impl(const Model& handle, std::shared_ptr<api_detail::ModelImpl> impl)
      : model(handle), m(std::move(impl)) {}
  Model model;
  std::shared_ptr<api_detail::ModelImpl> m;
  EngineOptions options;
  int64_t context = 0, prompt_chunk = 0;
  // The pools, sequences and scratch of every rank, used and freed under m->device_mutex.
  std::unique_ptr<api_detail::EngineRanks> ranks;
  std::vector<std::unique_ptr<Request>> slots;  // per sequence: its request, or null when free
  uint64_t admissions = 0;
  bool device_sampling = false;  // the backend samples decode rows (Backend::supports_sample)

  mutable std::mutex mutex;  // guards what submit(), cancel() and counts() share with the loop
  std::condition_variable wake;
  std::deque<std::unique_ptr<Request>> waiting;
  std::vector<uint64_t> cancels;  // ids to stop at the next step
  bool stopping = false;
  uint64_t next_id = 1;
  EngineCounts counts;
  std::thread thread;

  Transformer& model_pass() { return ranks->model(); }
  KvPool& pool() { return ranks->pool(); }
  Sequence& seq(size_t slot) { return ranks->sequence(slot); }
  int occupied() const {
    return static_cast<int>(std::count_if(slots.begin(), slots.end(), [](const auto& r) { return r != nullptr; }));
  }
  void loop();
  void admit_waiting();
  // Tokenizes a first admission, then takes the prefix's cached blocks and reserves the rest; finishes the request
  // when it can never run (and returns kFailed: r is then null).
  Admission admit(size_t slot, std::unique_ptr<Request>& r);
  // One pass: the next token of every running request and chunks of the prompts still running, together.
  void step();
  // After a decode step of `order`'s requests: each one's next token sampled on the device (rows grouped by equal
  // sampling parameters, one sample op per group) and its logits copied back when it wants logprobs; without a
  // device sampler, every row's logits copied back for the host.
  Status take_step_results(const std::vector<size_t>& order);
  const SamplingParams& sampling(size_t slot) const { return slots[slot]->request.options.sampling; }
  // Samples and processes the slot's next token; true when the request goes on (its token is then the context's
  // last, to be run).
  bool advance(size_t slot);
  void preempt(size_t slot);
  void finish(size_t slot, Result<GenerateResult> result);
  void finish_unadmitted(std::unique_ptr<Request> r, Result<GenerateResult> result);
  void release_sequence(size_t slot) {
    std::lock_guard device(m->device_mutex);
    const Status reset = ranks->reset(slot);
    if (!reset.ok()) log_warn("engine: ", reset.to_string());  // host bookkeeping only: nothing to undo
  }
  void sync_pool_counts() {  // under `mutex`
    counts.kv_blocks_used = pool().held_blocks();
    counts.kv_blocks_cached = pool().cached_blocks();
    counts.reused_prompt_tokens = pool().reused_tokens();
  }
};

namespace {

// The pool and sequences `options` ask for on `model`, or why they cannot be made.
Result<api_detail::EngineShape> engine_shape(const Model& model, const api_detail::ModelImpl& m,
                                             const EngineOptions& options) {
  if (options.max_running < 1) return invalid_argument("engine: max_running must be at least 1");
  if (options.max_waiting < 0) return invalid_argument("engine: max_waiting must not be negative");
  if (options.context_length < 0 || options.prompt_chunk < 0)
    return invalid_argument("engine: context_length and prompt_chunk must not be negative");
  const int64_t block = options.block_size;
  if (block <= 0) return invalid_argument("engine: block_size must be positive");
  if (!(options.kv_cache_fraction >= 0.0 && options.kv_cache_fraction <= 1.0))
    return invalid_argument("engine: kv_cache_fraction " + std::to_string(options.kv_cache_fraction) +
                            " is not between 0 and 1");
  const int64_t context = options.context_length > 0 ? options.context_length : model.info().default_context;
  // Each rank of a split model holds its share of every block: the memory option is per rank (per GPU).
  const uint64_t token_bytes = kv_cache_bytes_per_token(m.config, model.info().tp_world, m.transformer->kv_type());
  const uint64_t block_bytes = token_bytes * static_cast<uint64_t>(block);
  const int64_t full_contexts = int64_t{options.max_running} * ((context + block - 1) / block);
  uint64_t pool_bytes = options.kv_cache_bytes;
  std::string what = "a KV cache of " + std::to_string(pool_bytes) + " bytes";
  // The least memory free on this process's ranks, and what the engine allocates besides the pool.
  auto smallest_free = [&]() -> Result<uint64_t> {
    uint64_t free_bytes = UINT64_MAX;
    QRT_ASSIGN_OR_RETURN(MemoryAvailable mem, m.backend->memory_available());
    free_bytes = std::min(free_bytes, mem.free_bytes);
    for (const api_detail::PeerRank& peer : m.peers) {
      QRT_ASSIGN_OR_RETURN(MemoryAvailable peer_mem, peer.backend->memory_available());
      free_bytes = std::min(free_bytes, peer_mem.free_bytes);
    }
    return free_bytes;
  };
  const int64_t prompt_chunk = options.prompt_chunk > 0 ? options.prompt_chunk : m.options.prompt_batch;
  const uint64_t overhead = m.transformer->paged_overhead_bytes(options.max_running, context, static_cast<int>(block),
                                                                options.max_running + prompt_chunk);
  if (pool_bytes == 0 && options.kv_cache_fraction == 0.0) {
    // Room for max_running full contexts, but never more than half the free memory: a long context times many
    // sequences would otherwise fail to allocate (or, on the CPU, be overcommitted and killed later).
    auto free_bytes = smallest_free();
    const uint64_t half = free_bytes.ok() ? *free_bytes / 2 : UINT64_MAX;
    const uint64_t cap = half > overhead ? half - overhead : 0;
    if (free_bytes.ok() && static_cast<double>(full_contexts) * static_cast<double>(block_bytes) > cap) {
      const int64_t blocks = static_cast<int64_t>(cap / block_bytes);
      if (blocks < 1)
        return invalid_argument("engine: half of the " + std::to_string(*free_bytes >> 20) + " MiB free on the " +
                                m.backend->name() + " backend holds no KV cache block of " + std::to_string(block) +
                                " tokens (" + std::to_string(block_bytes) + " bytes)");
      log_warn("engine: ", options.max_running, " full contexts of ", context, " tokens need ",
               (static_cast<uint64_t>(full_contexts) * block_bytes) >> 20, " MiB of KV cache; taking half the ",
               *free_bytes >> 20, " MiB free instead (", blocks * block, " tokens; preempting when they run out)");
      return api_detail::EngineShape{blocks, block, options.max_running, context};
    }
  }
  if (pool_bytes == 0 && options.kv_cache_fraction > 0.0) {
    QRT_ASSIGN_OR_RETURN(const uint64_t free_bytes, smallest_free());
    const auto share = static_cast<uint64_t>(options.kv_cache_fraction * static_cast<double>(free_bytes));
    pool_bytes = share > overhead ? share - overhead : 0;
    what = std::to_string(options.kv_cache_fraction) + " of the " + std::to_string(free_bytes >> 20) +
           " MiB free on the " + m.backend->name() + " backend, less " + std::to_string(overhead >> 20) +
           " MiB for the engine's sequences and scratch,";
  }
  const bool by_memory = options.kv_cache_bytes > 0 || options.kv_cache_fraction > 0.0;
  const int64_t blocks = by_memory ? static_cast<int64_t>(pool_bytes / block_bytes) : full_contexts;
  if (blocks < 1)
    return invalid_argument("engine: " + what + " holds no block of " + std::to_string(block) + " tokens (" +
                            std::to_string(block_bytes) + " bytes)");
  return api_detail::EngineShape{blocks, block, options.max_running, context};
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::start(const Model& model, const EngineOptions& options) {
  if (model.impl_->comm && model.impl_->comm->rank() != 0)
    return invalid_argument("engine: rank " + std::to_string(model.impl_->comm->rank()) +
                            " of an MPI launch follows rank 0's engine (Engine::follow)");
  auto impl = std::make_unique<Impl>(model, model.impl_);
  Impl& e = *impl;
  auto planned = engine_shape(model, *e.m, options);
  // The followers build what rank 0 describes; blocks = 0 tells them rank 0 gave up.
  api_detail::EngineShape shape = planned.ok() ? *planned : api_detail::EngineShape{};
  if (e.m->comm) QRT_TRY(e.m->comm->broadcast(&shape, sizeof shape, 0));
  if (!planned.ok()) return planned.status();
  e.options = options;
  e.context = shape.context;
  e.prompt_chunk = options.prompt_chunk > 0 ? options.prompt_chunk : e.m->options.prompt_batch;
  const int block = static_cast<int>(shape.block_size);
  {
    std::lock_guard device(e.m->device_mutex);
    auto ranks = api_detail::EngineRanks::create(*e.m, shape);
    Status built = ranks.status();
    if (e.m->comm) built = e.m->comm->agree(built);
    if (!built.ok()) return built;
    e.ranks = std::move(*ranks);
  }
  e.slots.resize(static_cast<size_t>(options.max_running));
  e.counts.sequences = options.max_running;
  e.counts.kv_cache_bytes = e.pool().bytes();
  e.counts.kv_blocks = e.pool().blocks();
  e.counts.kv_block_size = block;
  e.device_sampling = e.m->backend->supports_sample();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->loop(); });
  return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->stopping = true;
  }
  impl_->wake.notify_all();
  impl_->thread.join();
  // Device memory goes back to the backend under its lock; the MPI followers stop too.
  std::lock_guard device(impl_->m->device_mutex);
  impl_->ranks->stop();
  impl_->ranks.reset();
}

Status Engine::follow(const Model& model) { return api_detail::EngineRanks::follow(*model.impl_); }

Result<uint64_t> Engine::submit(EngineRequest request) {
  std::lock_guard lock(impl_->mutex);
  if (impl_->stopping) return invalid_argument("engine: stopping");
  // Requests that would wait once this one is queued: all queued and running ones beyond the sequences.
  const int would_wait =
      impl_->counts.running + static_cast<int>(impl_->waiting.size()) + 1 - impl_->options.max_running;
  if (would_wait > impl_->options.max_waiting)
    return out_of_range("engine: " + std::to_string(impl_->waiting.size()) + " requests wait already (max_waiting " +
                        std::to_string(impl_->options.max_waiting) + ")");
  const uint64_t id = impl_->next_id++;
  impl_->waiting.push_back(std::make_unique<Request>(id, std::move(request)));
  impl_->counts.waiting = static_cast<int>(impl_->waiting.size());
  impl_->wake.notify_all();
  return id;
}

void Engine::cancel(uint64_t id) {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->cancels.push_back(id);
  }
  impl_->wake.notify_all();
}

EngineCounts Engine::counts() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->counts;
}

int64_t Engine::context_length() const { return impl_->context; }

void Engine::Impl::loop() {
  for (;;) {
    std::vector<std::unique_ptr<Request>> dropped;
    std::vector<uint64_t> cancel_now;
    {
      std::unique_lock lock(mutex);
      wake.wait(lock, [&] {
        if (stopping || !cancels.empty()) return true;
        const bool can_admit = !waiting.empty() && counts.running < static_cast<int>(slots.size());
        return counts.running > 0 || can_admit;
      });
      if (stopping) break;
      cancel_now.swap(cancels);
      for (uint64_t id : cancel_now) {  // a queued request leaves the queue at once
        const auto it = std::find_if(waiting.begin(), waiting.end(), [&](const auto& r) { return r->id == id; });
        if (it == waiting.end()) continue;
        dropped.push_back(std::move(*it));
        waiting.erase(it);
      }
      counts.waiting = static_cast<int>(waiting.size());
    }
    for (auto& r : dropped) {  // callbacks run outside the lock: they may call counts() or submit()
      GenerateResult result = std::move(r->result);  // a preempted request keeps what it produced
      result.text += r->stream.flush();
      result.stop_reason = StopReason::kCallback;
      finish_unadmitted(std::move(r), std::move(result));
    }
    for (auto& r : slots)
      if (r && std::find(cancel_now.begin(), cancel_now.end(), r->id) != cancel_now.end()) r->cancelled = true;
    admit_waiting();
    step();
    std::lock_guard lock(mutex);
    sync_pool_counts();
  }
  // Stopping: every request still here learns it will not be served.
  const Status gone = invalid_argument("the engine was destroyed before the request finished");
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s]) finish(s, gone);
  while (!waiting.empty()) {
    std::unique_ptr<Request> r = std::move(waiting.front());
    waiting.pop_front();
    finish_unadmitted(std::move(r), gone);
  }
}

void Engine::Impl::admit_waiting() {
  for (size_t s = 0; s < slots.size(); ++s) {
    if (slots[s]) continue;
    std::unique_ptr<Request> r;
    {
      std::lock_guard lock(mutex);
      if (waiting.empty()) return;
      r = std::move(waiting.front());
      waiting.pop_front();
      counts.waiting = static_cast<int>(waiting.size());
    }
    switch (admit(s, r)) {
      case Admission::kAdmitted: {
        std::lock_guard lock(mutex);
        slots[s] = std::move(r);
        ++counts.running;
        sync_pool_counts();  // its blocks are reserved: a running request always shows its blocks
        continue;
      }
      case Admission::kFailed:
        continue;  // admit() has finished it
      case Admission::kNoRoom: {
        std::lock_guard lock(mutex);  // first come first served: nobody overtakes it
        waiting.push_front(std::move(r));
        counts.waiting = static_cast<int>(waiting.size());
        return;
      }
    }
  }
}

Admission Engine::Impl::admit(size_t slot, std::unique_ptr<Request>& request) {
  Request& r = *request;
  const auto fail = [&](Status why) {
    finish_unadmitted(std::move(request), std::move(why));
    return Admission::kFailed;
  };
  if (r.tokens.empty()) {  // the first admission
    const GenerateOptions& o = r.request.options;
    if (o.max_tokens < 0) return fail(invalid_argument("max tokens must be >= 0, got " + std::to_string(o.max_tokens)));
    auto sampler = Sampler::create(o.sampling);
    if (!sampler.ok()) return fail(sampler.status());
    auto ids = r.request.messages.empty() ? api_detail::text_prompt_ids(*m, r.request.prompt, PromptOptions{}, true)
                                          : api_detail::chat_prompt_ids(model, *m, r.request.messages);
    if (!ids.ok()) return fail(ids.status());
    if (ids->empty()) return fail(invalid_argument("nothing to continue: the prompt has no tokens"));
    if (static_cast<int64_t>(ids->size()) > context)
      return fail(out_of_range("prompt of " + std::to_string(ids->size()) + " tokens does not fit the context of " +
                               std::to_string(context) + " tokens"));
    r.sampler.emplace(std::move(*sampler));
    r.tokens = std::move(*ids);
    r.prompt_tokens = static_cast<int64_t>(r.tokens.size());
    std::lock_guard lock(mutex);
    counts.prompt_tokens += static_cast<uint64_t>(r.prompt_tokens);
  }
  const PrefixPlan plan = model_pass().plan_prefix(seq(slot), r.tokens);
  if (!plan.fits(pool())) {
    if (occupied() > 0) return Admission::kNoRoom;  // blocks come free as the running requests finish
    const int64_t blocks = plan.new_blocks + plan.reused_tokens / pool().block_size();
    return fail(out_of_range("a context of " + std::to_string(r.tokens.size()) + " tokens needs " +
                             std::to_string(blocks) + " KV cache blocks; the pool has " +
                             std::to_string(pool().blocks()) + " (raise the KV cache memory)"));
  }
  Status admitted;
  {
    std::lock_guard device(m->device_mutex);
    admitted = ranks->admit(slot, r.tokens);
    if (!admitted.ok()) (void)ranks->reset(slot);
  }
  if (!admitted.ok()) return fail(std::move(admitted));
  r.admitted = ++admissions;
  r.ready = false;
  return Admission::kAdmitted;
}

void Engine::Impl::step() {
  // Decode rows: every ready request takes its next token; those that go on need a row.
  std::vector<size_t> order;
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s] && slots[s]->ready && advance(s)) order.push_back(s);
  // Blocks for the decode tokens (prompts reserved theirs at admission): preempt the latest admitted requests until
  // the rest fit.
  const auto needed = [&] {
    int64_t n = 0;
    for (size_t s : order) n += model_pass().blocks_needed(seq(s), 1);
    return n;
  };
  while (!order.empty() && needed() > pool().free_blocks()) {
    size_t victim = slots.size();
    for (size_t s = 0; s < slots.size(); ++s)
      if (slots[s] && (victim == slots.size() || slots[s]->admitted > slots[victim]->admitted)) victim = s;
    order.erase(std::remove(order.begin(), order.end(), victim), order.end());
    if (occupied() == 1) {
      // Alone and still out of blocks: the pool is its whole context.
      Request& r = *slots[victim];
      r.result.text += r.stream.flush();
      r.result.stop_reason = StopReason::kContextFull;
      finish(victim, std::move(r.result));
      break;
    }
    preempt(victim);
  }
  // Decode rows with equal sampling parameters next to each other, first come first within a group.
  std::vector<size_t> grouped;
  for (size_t i = 0; i < order.size(); ++i) {
    if (std::find(grouped.begin(), grouped.end(), order[i]) != grouped.end()) continue;
    for (size_t j = i; j < order.size(); ++j)
      if (same_sampling(sampling(order[i]), sampling(order[j]))) grouped.push_back(order[j]);
  }
  const size_t decoding = grouped.size();
  std::vector<size_t> spans = grouped;
  std::vector<std::span<const int32_t>> tokens;
  for (size_t s : grouped) {
    tokens.push_back(std::span(slots[s]->tokens).last(1));
    slots[s]->ready = false;
  }
  // Prompt chunks in the same pass: up to prompt_chunk tokens of the requests still running their context, in
  // admission order.
  std::vector<size_t> prompts;
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s] && !slots[s]->ready && std::find(grouped.begin(), grouped.end(), s) == grouped.end())
      prompts.push_back(s);
  std::sort(prompts.begin(), prompts.end(),
            [&](size_t a, size_t b) { return slots[a]->admitted < slots[b]->admitted; });
  int64_t budget = prompt_chunk;
  for (size_t s : prompts) {
    if (budget <= 0) break;
    const std::vector<int32_t>& context = slots[s]->tokens;
    const int64_t done = seq(s).length(), n = std::min(budget, static_cast<int64_t>(context.size()) - done);
    spans.push_back(s);
    tokens.push_back(std::span(context).subspan(static_cast<size_t>(done), static_cast<size_t>(n)));
    budget -= n;
  }
  if (spans.empty()) return;
  Status st;
  {
    std::lock_guard device(m->device_mutex);
    st = ranks->step(spans, tokens);
  }
  {
    std::lock_guard lock(mutex);
    ++counts.passes;
    counts.steps += decoding > 0 ? 1 : 0;
    counts.largest_batch = std::max(counts.largest_batch, static_cast<int>(decoding));
  }
  if (st.ok()) st = take_step_results(grouped);
  for (size_t i = decoding; i < spans.size() && st.ok(); ++i) {
    const size_t s = spans[i];
    Request& r = *slots[s];
    if (seq(s).length() < static_cast<int64_t>(r.tokens.size())) continue;
    {
      std::lock_guard device(m->device_mutex);
      st = model_pass().download_batch_row(ranks->batch(), static_cast<int64_t>(i), &r.logits);
    }
    if (!st.ok()) break;
    r.ready = true;  // its context has run: the next step samples its first (or next) token
    if (!r.started) {
      r.started = true;
      if (r.request.on_started) r.request.on_started(r.prompt_tokens);
    }
    if (r.request.options.max_tokens <= 0) finish(s, std::move(r.result));
  }
  if (!st.ok())
    for (size_t s : spans)
      if (slots[s]) finish(s, st.with_context("running the model"));
}

Status Engine::Impl::take_step_results(const std::vector<size_t>& order) {
  std::lock_guard device(m->device_mutex);
  const size_t vocab = static_cast<size_t>(m->config.vocab_size);
  for (size_t g0 = 0, g1 = 0; g0 < order.size(); g0 = g1) {
    g1 = g0 + 1;
    while (g1 < order.size() && same_sampling(sampling(order[g0]), sampling(order[g1]))) ++g1;
    if (device_sampling) {
      // Session::generate's device step for each row: its own draw and penalty counts, the group's parameters.
      const SamplingParams& p = sampling(order[g0]);
      SampleStep step;
      step.params = p;
      std::vector<std::vector<PenaltyCount>> counts_of(g1 - g0);
      bool penalties = false;
      for (size_t k = g0; k < g1; ++k) {
        Request& r = *slots[order[k]];
        step.u01.push_back(p.temperature > 0.0f ? r.sampler->next_uniform() : 0.0);
        counts_of[k - g0] = count_penalty_tokens(r.tokens, vocab, p);
        penalties |= !counts_of[k - g0].empty();
      }
      if (penalties) {
        step.penalty_offsets.push_back(0);
        for (const auto& c : counts_of) {
          step.penalties.insert(step.penalties.end(), c.begin(), c.end());
          step.penalty_offsets.push_back(static_cast<int32_t>(step.penalties.size()));
        }
      }
      std::vector<int32_t> ids(g1 - g0);
      QRT_TRY(model_pass().sample_batch_rows(ranks->batch(), static_cast<int64_t>(g0), step, ids));
      for (size_t k = g0; k < g1; ++k) slots[order[k]]->next_id = ids[k - g0];
    }
    for (size_t k = g0; k < g1; ++k) {
      Request& r = *slots[order[k]];
      r.logits.clear();
      if (!device_sampling || r.request.options.logprobs >= 0)
        QRT_TRY(model_pass().download_batch_row(ranks->batch(), static_cast<int64_t>(k), &r.logits));
      r.ready = true;
    }
  }
  return ok_status();
}

bool Engine::Impl::advance(size_t slot) {
  Request& r = *slots[slot];
  const GenerateOptions& o = r.request.options;
  GenerateResult& res = r.result;
  if (r.cancelled) {
    res.text += r.stream.flush();
    res.stop_reason = StopReason::kCallback;
    finish(slot, std::move(res));
    return false;
  }
  const Tokenizer& tok = *m->tokenizer;
  const int32_t id = r.next_id >= 0 ? r.next_id : r.sampler->sample(r.logits, r.tokens);
  r.next_id = -1;
  if (o.stop_at_end_of_generation && tok.is_end_of_generation(id)) {
    const std::string rest = r.stream.flush();
    res.text += rest;
    if (r.request.on_token && !rest.empty()) r.request.on_token(kNoToken, rest);
    res.stop_reason = StopReason::kEndOfGeneration;
    finish(slot, std::move(res));
    return false;
  }
  if (o.logprobs >= 0) {
    TokenLogprobs lp = api_detail::token_logprobs(r.logits, id, o.logprobs);
    if (o.on_logprobs) o.on_logprobs(lp);
    res.logprobs.push_back(std::move(lp));
  }
  r.tokens.push_back(id);
  res.tokens.push_back(id);
  const bool control = tok.token_type(id) == TokenType::kControl;
  std::string text = r.stream.push(control ? std::string_view() : tok.token_to_piece(id));
  std::optional<StopReason> stop;
  if (r.stream.stopped()) {
    stop = StopReason::kStopString;
  } else if (static_cast<int>(res.tokens.size()) >= o.max_tokens) {
    stop = StopReason::kMaxTokens;
  } else if (seq(slot).length() >= context) {
    stop = StopReason::kContextFull;  // no slot to run this token through
  }
  if (stop == StopReason::kMaxTokens || stop == StopReason::kContextFull) text += r.stream.flush();
  res.text += text;
  if (r.request.on_token && !r.request.on_token(id, text) && !stop) {
    stop = StopReason::kCallback;
    res.text += r.stream.flush();
  }
  if (stop) {
    res.stop_reason = *stop;
    finish(slot, std::move(res));
    return false;
  }
  return true;
}

void Engine::Impl::preempt(size_t slot) {
  release_sequence(slot);
  std::unique_ptr<Request> r = std::move(slots[slot]);
  r->ready = false;  // its context runs again from the prompt when it is admitted again
  r->logits.clear();
  r->next_id = -1;
  std::lock_guard lock(mutex);
  --counts.running;
  ++counts.preemptions;
  waiting.push_front(std::move(r));
  counts.waiting = static_cast<int>(waiting.size());
  sync_pool_counts();
}

void Engine::Impl::finish(size_t slot, Result<GenerateResult> result) {
  release_sequence(slot);
  std::unique_ptr<Request> r = std::move(slots[slot]);
  {
    // Counted before on_done, so that whoever on_done wakes sees the sequence and its blocks free.
    std::lock_guard lock(mutex);
    --counts.running;
    ++counts.finished;
    counts.generated_tokens += result.ok() ? result->tokens.size() : 0;
    sync_pool_counts();
  }
  if (r->request.on_done) r->request.on_done(std::move(result));
}

void Engine::Impl::finish_unadmitted(std::unique_ptr<Request> r, Result<GenerateResult> result) {
  {
    std::lock_guard lock(mutex);
    ++counts.finished;
    counts.generated_tokens += result.ok() ? result->tokens.size() : 0;
  }
  if (r->request.on_done) r->request.on_done(std::move(result));
}

}  // namespace qrt
