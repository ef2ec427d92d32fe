// qrt::Engine: continuous batching over sessions of one model (qrt/engine.hpp).
//
// One thread runs the loop: admit waiting requests into free sessions (their prompts run one by one through the
// session's own prefill), sample each running request's next token on the host from the logits of its last step,
// decide per request whether it stops (as Session::generate decides: end of generation, stop strings, max tokens,
// a full context, the callback), then run every continuing request's token through one Transformer::decode_batch.
#include "qrt/engine.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "kernels/cpu/sampler.hpp"
#include "runtime/src/logprobs.hpp"
#include "runtime/src/session_state.hpp"
#include "runtime/src/stream_text.hpp"

namespace qrt {

namespace {

struct Queued {
  uint64_t id = 0;
  EngineRequest request;
};

// A request holding a session: its sampler, streamed-text state, the result so far and its next logits.
struct Running {
  uint64_t id = 0;
  EngineRequest request;
  std::optional<Sampler> sampler;
  StreamText stream;
  GenerateResult result;
  std::vector<float> logits;  // [vocab] of its last step
  bool cancelled = false;
  explicit Running(std::vector<std::string> stops) : stream(std::move(stops)) {}
};

}  // namespace

struct Engine::Impl {
  explicit Impl(const Model& handle) : model(handle) {}
  Model model;
  EngineOptions options;
  std::vector<Session> sessions;
  std::vector<std::unique_ptr<Running>> slots;  // per session: its request, or null when free
  std::unique_ptr<DecodeBatch> batch;

  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<Queued> waiting;
  std::vector<uint64_t> cancels;  // ids to stop at the next step
  bool stopping = false;
  uint64_t next_id = 1;
  EngineCounts counts;
  std::thread thread;

  api_detail::SessionState& state(size_t slot) { return Engine::state_of(sessions[slot]); }
  api_detail::ModelImpl& m() { return *state(0).m; }

  void loop();
  void admit(size_t slot, Queued q);
  // Samples and processes the slot's next token; true when the request goes on (its token is then in `tokens`).
  bool advance(size_t slot, std::vector<Sequence*>& seqs, std::vector<int32_t>& tokens);
  void finish(size_t slot, Result<GenerateResult> result);
};

Result<std::unique_ptr<Engine>> Engine::start(const Model& model, const EngineOptions& options) {
  if (options.max_running < 1) return invalid_argument("engine: max_running must be at least 1");
  if (options.max_waiting < 0) return invalid_argument("engine: max_waiting must not be negative");
  if (model.info().tp_world > 1)
    return unsupported("engine: batching a tensor-parallel model is not implemented; use sessions");
  auto impl = std::make_unique<Impl>(model);
  impl->options = options;
  SessionOptions so;
  so.context_length = options.context_length;
  for (int i = 0; i < options.max_running; ++i) {
    QRT_ASSIGN_OR_RETURN(Session s, model.new_session(so));
    impl->counts.kv_cache_bytes += s.memory().kv_cache;
    impl->sessions.push_back(std::move(s));
  }
  impl->slots.resize(impl->sessions.size());
  impl->batch = std::make_unique<DecodeBatch>();
  impl->counts.sequences = options.max_running;
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
  // The batch scratch goes back to the backend under its lock, before the sessions and the model.
  std::lock_guard device(impl_->m().device_mutex);
  impl_->batch.reset();
}

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
  impl_->waiting.push_back({id, std::move(request)});
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

int64_t Engine::context_length() const { return impl_->sessions.front().context_length(); }

void Engine::Impl::loop() {
  for (;;) {
    std::vector<Queued> admitted, dropped;
    std::vector<uint64_t> cancel_now;
    {
      std::unique_lock lock(mutex);
      wake.wait(lock, [&] {
        if (stopping || !cancels.empty()) return true;
        const bool any_running = counts.running > 0;
        const bool can_admit = !waiting.empty() && counts.running < static_cast<int>(slots.size());
        return any_running || can_admit;
      });
      if (stopping) break;
      cancel_now.swap(cancels);
      for (uint64_t id : cancel_now) {  // a queued request leaves the queue at once
        for (auto it = waiting.begin(); it != waiting.end(); ++it) {
          if (it->id == id) {
            dropped.push_back(std::move(*it));
            ++counts.finished;
            waiting.erase(it);
            break;
          }
        }
      }
      int free = static_cast<int>(slots.size()) - counts.running;
      while (free-- > 0 && !waiting.empty()) {
        admitted.push_back(std::move(waiting.front()));
        waiting.pop_front();
      }
      counts.waiting = static_cast<int>(waiting.size());
    }
    for (Queued& q : dropped) {  // callbacks run outside the lock: they may call counts() or submit()
      GenerateResult empty;
      empty.stop_reason = StopReason::kCallback;
      if (q.request.on_done) q.request.on_done(std::move(empty));
    }
    for (size_t s = 0; s < slots.size(); ++s)
      if (slots[s])
        for (uint64_t id : cancel_now) slots[s]->cancelled |= slots[s]->id == id;
    for (Queued& q : admitted) {
      size_t s = 0;
      while (slots[s]) ++s;
      admit(s, std::move(q));
    }

    std::vector<Sequence*> seqs;
    std::vector<int32_t> tokens;
    std::vector<size_t> order;
    for (size_t s = 0; s < slots.size(); ++s) {
      if (slots[s] && advance(s, seqs, tokens)) order.push_back(s);
    }
    if (seqs.empty()) continue;
    std::vector<float> logits;
    Status st;
    {
      std::lock_guard device(m().device_mutex);
      st = m().transformer->decode_batch(*batch, seqs, tokens, &logits);
    }
    {
      std::lock_guard lock(mutex);
      ++counts.steps;
      counts.largest_batch = std::max(counts.largest_batch, static_cast<int>(seqs.size()));
    }
    const size_t vocab = static_cast<size_t>(m().config.vocab_size);
    for (size_t k = 0; k < order.size(); ++k) {
      const size_t s = order[k];
      if (!st.ok()) {
        finish(s, st.with_context("decoding"));
        continue;
      }
      slots[s]->logits.assign(logits.begin() + static_cast<std::ptrdiff_t>(k * vocab),
                              logits.begin() + static_cast<std::ptrdiff_t>((k + 1) * vocab));
    }
  }
  // Stopping: every request still here learns it will not be served.
  const Status gone = invalid_argument("the engine was destroyed before the request finished");
  for (size_t s = 0; s < slots.size(); ++s)
    if (slots[s]) finish(s, gone);
  for (Queued& q : waiting)
    if (q.request.on_done) q.request.on_done(gone);
  waiting.clear();
}

void Engine::Impl::admit(size_t slot, Queued q) {
  Session& session = sessions[slot];
  session.reset();
  const Status fed = q.request.messages.empty() ? session.add_prompt(q.request.prompt)
                                                 : session.add_chat(q.request.messages);
  auto sampler = Sampler::create(q.request.options.sampling);
  if (!fed.ok() || !sampler.ok()) {
    {
      std::lock_guard lock(mutex);
      ++counts.finished;
    }
    if (q.request.on_done) q.request.on_done(!fed.ok() ? fed : sampler.status());
    return;
  }
  auto r = std::make_unique<Running>(q.request.options.stop);
  r->id = q.id;
  r->sampler.emplace(std::move(*sampler));
  api_detail::SessionState& st = state(slot);
  Status got;
  {
    std::lock_guard device(m().device_mutex);
    got = m().transformer->download_last_logits(*st.sequence, &r->logits);
  }
  const int64_t prompt_tokens = static_cast<int64_t>(st.tokens.size());
  r->request = std::move(q.request);
  {
    std::lock_guard lock(mutex);
    ++counts.running;
    counts.prompt_tokens += static_cast<uint64_t>(prompt_tokens);
  }
  slots[slot] = std::move(r);
  if (!got.ok()) return finish(slot, got);
  if (slots[slot]->request.on_started) slots[slot]->request.on_started(prompt_tokens);
  if (slots[slot]->request.options.max_tokens <= 0) finish(slot, std::move(slots[slot]->result));
}

bool Engine::Impl::advance(size_t slot, std::vector<Sequence*>& seqs, std::vector<int32_t>& tokens) {
  Running& r = *slots[slot];
  api_detail::SessionState& st = state(slot);
  const GenerateOptions& o = r.request.options;
  GenerateResult& res = r.result;
  if (r.cancelled) {
    res.text += r.stream.flush();
    res.stop_reason = StopReason::kCallback;
    finish(slot, std::move(res));
    return false;
  }
  const Tokenizer& tok = *st.m->tokenizer;
  const int32_t id = r.sampler->sample(r.logits, st.tokens);
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
  st.tokens.push_back(id);
  res.tokens.push_back(id);
  const bool control = tok.token_type(id) == TokenType::kControl;
  std::string text = r.stream.push(control ? std::string_view() : tok.token_to_piece(id));
  std::optional<StopReason> stop;
  if (r.stream.stopped()) {
    stop = StopReason::kStopString;
  } else if (static_cast<int>(res.tokens.size()) >= o.max_tokens) {
    stop = StopReason::kMaxTokens;
  } else if (st.sequence->length() >= st.sequence->capacity()) {
    stop = StopReason::kContextFull;
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
  seqs.push_back(st.sequence.get());
  tokens.push_back(id);
  return true;
}

void Engine::Impl::finish(size_t slot, Result<GenerateResult> result) {
  std::unique_ptr<Running> r = std::move(slots[slot]);
  {
    // Counted before on_done, so that whoever on_done wakes sees the sequence free.
    std::lock_guard lock(mutex);
    --counts.running;
    ++counts.finished;
    counts.generated_tokens += result.ok() ? result->tokens.size() : 0;
  }
  if (r->request.on_done) r->request.on_done(std::move(result));
}

}  // namespace qrt
