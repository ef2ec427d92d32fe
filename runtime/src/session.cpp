// qrt::Session: a context (KV cache and tokens) on a model; prompt prefill and token-by-token generation with
// sampling, stop strings and streaming.
#include <algorithm>
#include <chrono>

#include "runtime/src/logprobs.hpp"
#include "runtime/src/prompt_tokens.hpp"
#include "runtime/src/session_state.hpp"
#include "runtime/src/stream_text.hpp"
#include "kernels/cpu/sampler.hpp"

namespace qrt {
namespace {

using api_detail::SessionState;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void clear_context(SessionState& s) {
  s.sequence->reset();
  for (auto& peer : s.peer_sequences) peer->reset();
  s.tokens.clear();
  s.logits.clear();
}

// Whether this rank decides (samples, calls back): always on a single rank, rank 0 of a tensor-parallel model.
bool leads(const SessionState& s) { return !s.m->comm || s.m->comm->rank() == 0; }

// The same forward pass on every rank of an in-process tensor-parallel group, on the group's threads (rank 0,
// whose logits the session keeps, on the caller's). A failing rank cancels the group's collectives so that none
// waits for it; the group is then unusable and every later pass fails too.
Status forward_on_every_local_rank(SessionState& s, std::span<const int32_t> batch) {
  auto& m = *s.m;
  return api_detail::on_every_local_rank(m, [&](int r) -> Status {
    if (r == 0) return m.transformer->forward_keep_logits(*s.sequence, batch);
    const size_t p = static_cast<size_t>(r - 1);
    return m.peers[p].transformer->forward_keep_logits(*s.peer_sequences[p], batch);
  });
}

// Runs the tokens not yet in the KV cache through the model, a batch at a time, leaving the logits of the last
// one. A failure leaves the cache in an unknown state, so the context is cleared and the error says so. Under
// tensor parallelism every rank learns whether any rank failed, so that none goes on alone.
Status run_pending(SessionState& s) {
  auto& m = *s.m;
  std::lock_guard lock(m.device_mutex);
  while (s.sequence->length() < static_cast<int64_t>(s.tokens.size())) {
    const int64_t first = s.sequence->length();
    const int64_t count = std::min<int64_t>(m.options.prompt_batch, static_cast<int64_t>(s.tokens.size()) - first);
    const std::span<const int32_t> batch(s.tokens.data() + first, static_cast<size_t>(count));
    Status st = m.peers.empty() ? m.transformer->forward_keep_logits(*s.sequence, batch)
                                : forward_on_every_local_rank(s, batch);
    if (m.comm) st = m.comm->agree(st);
    if (!st.ok()) {
      clear_context(s);
      return st.with_context("running the model (the session's context was cleared)");
    }
  }
  return ok_status();
}

// The next token from the logits the last pass left on the device: sampled there when the backend can (only the
// id is copied back), else on the host. Both give the same id for the same draw (sample_with_uniform).
Result<int32_t> sample_next(SessionState& s, Sampler& sampler) {
  auto& m = *s.m;
  const SamplingParams& p = sampler.params();
  std::lock_guard lock(m.device_mutex);
  if (s.host_sampling) {
    QRT_TRY(m.transformer->download_last_logits(*s.sequence, &s.logits));
    return sampler.sample(s.logits, s.tokens);
  }
  SampleStep step;
  step.params = p;
  step.u01 = {p.temperature > 0.0f ? sampler.next_uniform() : 0.0};
  step.penalties = count_penalty_tokens(s.tokens, static_cast<size_t>(m.config.vocab_size), p);
  if (!step.penalties.empty()) step.penalty_offsets = {0, static_cast<int32_t>(step.penalties.size())};
  int32_t id = 0;
  Status st = m.transformer->sample_last(*s.sequence, step, &id);
  if (st.code() == ErrorCode::kUnsupported) {
    // No sample op: the host samples, with the draw already taken, and from now on through the sampler.
    s.host_sampling = true;
    QRT_TRY(m.transformer->download_last_logits(*s.sequence, &s.logits));
    std::vector<float> penalized = s.logits;
    apply_penalty_counts(penalized, step.penalties, p);
    SampleScratch scratch;
    return sample_with_uniform(penalized, p, step.u01[0], scratch);
  }
  QRT_TRY(st);
  return id;
}

// The log-probabilities of `id` at the step just sampled: the raw logits copied back (the sampler may have
// changed its own copy in place), then log-softmax on the host.
Result<TokenLogprobs> step_logprobs(SessionState& s, int32_t id, int top) {
  {
    std::lock_guard lock(s.m->device_mutex);
    QRT_TRY(s.m->transformer->download_last_logits(*s.sequence, &s.logits));
  }
  return api_detail::token_logprobs(s.logits, id, top);
}

}  // namespace

Session::Session(std::unique_ptr<SessionState> state) : state_(std::move(state)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

std::span<const int32_t> Session::tokens() const { return state_->tokens; }
int64_t Session::context_length() const { return state_->sequence->capacity(); }
const Timings& Session::timings() const { return state_->timings; }

MemoryUse Session::memory() const {
  SessionState& s = *state_;
  std::lock_guard lock(s.m->device_mutex);
  const MemoryStats stats = s.m->backend->memory_stats();
  MemoryUse m;
  m.weights = stats.weight_bytes;
  m.kv_cache = s.sequence->kv_cache_bytes();
  m.kv_cache_per_token = s.sequence->capacity() > 0 ? m.kv_cache / static_cast<uint64_t>(s.sequence->capacity()) : 0;
  m.scratch = s.sequence->scratch_bytes();
  m.peak = stats.weight_bytes + stats.activation_peak_bytes;
  return m;
}
const Model& Session::model() const { return state_->model; }

void Session::reset() {
  clear_context(*state_);
  const double load = state_->timings.load_seconds;
  state_->timings = Timings{};
  state_->timings.load_seconds = load;
}

Status Session::add_tokens(std::span<const int32_t> ids_in) {
  SessionState& s = *state_;
  std::span<const int32_t> ids = ids_in;
  std::vector<int32_t> shared;
  if (Communicator* comm = s.m->comm.get()) {
    // Every rank runs rank 0's tokens.
    uint64_t count = ids.size();
    QRT_TRY(comm->broadcast(&count, sizeof count, 0));
    if (count > static_cast<uint64_t>(s.sequence->capacity()))
      return out_of_range("prompt of " + std::to_string(count) + " tokens does not fit the context of " +
                          std::to_string(s.sequence->capacity()) + " tokens");
    shared.assign(ids.begin(), ids.end());
    shared.resize(count);
    QRT_TRY(comm->broadcast(shared.data(), count * sizeof(int32_t), 0));
    ids = shared;
  }
  if (ids.empty()) return ok_status();
  const int64_t capacity = s.sequence->capacity();
  const int64_t used = static_cast<int64_t>(s.tokens.size());
  if (used + static_cast<int64_t>(ids.size()) > capacity) {
    return out_of_range("prompt of " + std::to_string(ids.size()) + " tokens does not fit the context of " +
                        std::to_string(capacity) + " tokens" +
                        (used > 0 ? " (" + std::to_string(used) + " already in use)" : std::string()));
  }
  const int vocab = s.m->config.vocab_size;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab)
      return invalid_argument("prompt token " + std::to_string(i) + " has id " + std::to_string(ids[i]) +
                              ", outside the model's vocabulary of " + std::to_string(vocab));
  }
  const auto start = Clock::now();
  s.tokens.insert(s.tokens.end(), ids.begin(), ids.end());
  QRT_TRY(run_pending(s));
  s.timings.prompt_tokens += static_cast<int64_t>(ids.size());
  s.timings.prompt_seconds += seconds_since(start);
  return ok_status();
}

Status Session::add_prompt(std::string_view text, const PromptOptions& options) {
  SessionState& s = *state_;
  QRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, api_detail::text_prompt_ids(*s.m, text, options, s.tokens.empty()));
  return add_tokens(ids);
}

Status Session::add_chat(const std::vector<ChatMessage>& messages) {
  SessionState& s = *state_;
  if (!s.tokens.empty())
    return invalid_argument("add_chat renders a whole conversation and needs an empty session: call reset() first");
  QRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids, api_detail::chat_prompt_ids(s.model, *s.m, messages));
  return add_tokens(ids);
}

Result<GenerateResult> Session::generate(const GenerateOptions& options, const TokenCallback& callback) {
  SessionState& s = *state_;
  if (options.max_tokens < 0)
    return invalid_argument("max tokens must be >= 0, got " + std::to_string(options.max_tokens));
  QRT_ASSIGN_OR_RETURN(Sampler sampler, Sampler::create(options.sampling));
  if (s.tokens.empty()) return invalid_argument("nothing to continue: add a prompt to the session first");
  GenerateResult result;
  if (options.max_tokens == 0) return result;

  if (static_cast<int64_t>(s.tokens.size()) > s.sequence->capacity()) {
    result.stop_reason = StopReason::kContextFull;  // a previous generate filled the context
    return result;
  }
  const auto start = Clock::now();
  QRT_TRY(run_pending(s));  // the last token of a previous generate
  const Tokenizer& tok = *s.m->tokenizer;
  StreamText stream(options.stop);
  bool ended_by_end_of_generation = false;
  const bool leader = leads(s);
  Communicator* comm = s.m->comm.get();
  constexpr int32_t kGoOn = -1;
  for (int i = 0;; ++i) {
    // Rank 0 decides each step (the token, and whether and why generation stops) and sends the decision after its
    // callback; the other ranks follow it, so ranks given different options cannot part ways.
    struct Step {
      int32_t id = 0;
      int32_t stop = kGoOn;  // a StopReason, or kGoOn
    } step;
    if (leader) {
      QRT_ASSIGN_OR_RETURN(step.id, sample_next(s, sampler));
      if (options.stop_at_end_of_generation && tok.is_end_of_generation(step.id))
        step.stop = static_cast<int32_t>(StopReason::kEndOfGeneration);
    } else {
      QRT_TRY(comm->broadcast(&step, sizeof step, 0));
    }
    const int32_t id = step.id;
    if (step.stop != static_cast<int32_t>(StopReason::kEndOfGeneration)) {
      if (leader && options.logprobs >= 0) {
        QRT_ASSIGN_OR_RETURN(TokenLogprobs lp, step_logprobs(s, id, options.logprobs));
        if (options.on_logprobs) options.on_logprobs(lp);
        result.logprobs.push_back(std::move(lp));
      }
      s.tokens.push_back(id);
      result.tokens.push_back(id);
      // Control tokens (BOS, <|im_start|>, ...) are structure, not text: like llama.cpp's default, they are not
      // rendered (they are still in the ids).
      const bool control = tok.token_type(id) == TokenType::kControl;
      std::string text = stream.push(control ? std::string_view() : tok.token_to_piece(id));
      if (leader) {
        if (stream.stopped()) {
          step.stop = static_cast<int32_t>(StopReason::kStopString);
        } else if (i + 1 >= options.max_tokens) {
          step.stop = static_cast<int32_t>(StopReason::kMaxTokens);
        } else if (s.sequence->length() >= s.sequence->capacity()) {
          step.stop = static_cast<int32_t>(StopReason::kContextFull);  // no slot to run this token through
        }
      }
      const bool flush_now = step.stop == static_cast<int32_t>(StopReason::kMaxTokens) ||
                             step.stop == static_cast<int32_t>(StopReason::kContextFull);
      if (flush_now) text += stream.flush();
      result.text += text;
      if (leader && callback && !callback(id, text) && step.stop == kGoOn)
        step.stop = static_cast<int32_t>(StopReason::kCallback);
      if (step.stop == static_cast<int32_t>(StopReason::kCallback)) result.text += stream.flush();
    }
    if (leader && comm) QRT_TRY(comm->broadcast(&step, sizeof step, 0));
    if (step.stop == static_cast<int32_t>(StopReason::kEndOfGeneration)) ended_by_end_of_generation = true;
    if (step.stop != kGoOn) {
      result.stop_reason = static_cast<StopReason>(step.stop);
      break;
    }
    Status st = run_pending(s);
    if (!st.ok()) return st;
  }
  if (ended_by_end_of_generation) {
    const std::string rest = stream.flush();
    result.text += rest;
    if (leader && callback && !rest.empty()) callback(kNoToken, rest);
  }
  s.timings.generated_tokens += static_cast<int64_t>(result.tokens.size());
  s.timings.generation_seconds += seconds_since(start);
  return result;
}

}  // namespace qrt
