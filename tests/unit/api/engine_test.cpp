// qrt::Engine on stories260K: requests decoded together give what each gives alone through Session::generate
// (greedy and seeded sampling, stop strings, max tokens, logprobs), more requests than sequences wait and are served
// in turn, streamed text joins to the result, cancellation from either side, a full queue, a prompt too long for
// the context, and an engine destroyed with requests pending. The paged KV cache: preemption and recomputation
// when the pool is short, reuse of cached prompt prefixes, prompts in chunks between decode steps, and the pool's
// limits reported as errors or kContextFull.
#include <sys/sysinfo.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "qrt/engine.hpp"
#include "stories_fixture.hpp"

namespace qrt {
namespace {

// Collects one request's callbacks; wait() blocks until on_done.
struct Outcome {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  Status status;
  GenerateResult result;
  std::string streamed;
  int64_t started_with = -1;
  bool token_before_start = false;

  EngineRequest request(std::string prompt, GenerateOptions o) {
    EngineRequest r;
    r.prompt = std::move(prompt);
    r.options = std::move(o);
    r.on_started = [this](int64_t n) { started_with = n; };
    r.on_token = [this](int32_t, std::string_view text) {
      token_before_start |= started_with < 0;
      streamed += text;
      return true;
    };
    r.on_done = [this](Result<GenerateResult> res) {
      std::lock_guard lock(m);
      if (res.ok()) result = std::move(*res);
      else status = res.status();
      done = true;
      cv.notify_all();
    };
    return r;
  }
  bool wait() {
    std::unique_lock lock(m);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return done; });
  }
};

GenerateOptions options(int max_tokens, float temperature = 0, uint64_t seed = 0) {
  GenerateOptions o;
  o.max_tokens = max_tokens;
  o.sampling.temperature = temperature;
  o.sampling.seed = seed;
  return o;
}

class EngineStories : public test::StoriesTest {
 protected:
  void SetUp() override {
    test::StoriesTest::SetUp();
    if (IsSkipped()) return;
    auto m = Model::open(test::stories_gguf(data_));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_.emplace(std::move(*m));
  }
  GenerateResult alone(const std::string& prompt, const GenerateOptions& o) {
    auto s = model_->new_session();
    EXPECT_TRUE(s.ok());
    EXPECT_TRUE(s->add_prompt(prompt).ok());
    auto r = s->generate(o);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : GenerateResult{};
  }
  std::optional<Model> model_;
};

TEST_F(EngineStories, RequestsTogetherGiveWhatEachGivesAlone) {
  struct Case {
    std::string prompt;
    GenerateOptions o;
  };
  std::vector<Case> cases = {
      {"Once upon a time", options(40)},
      {"The little dog", options(25)},
      {"One day, a girl", options(33, 0.8f, 7)},
      {"Tom and his mom", options(50)},
      {"A bird", options(12, 1.2f, 3)},
      {"It was a sunny day", options(30)},
  };
  cases[3].o.stop = {"."};
  cases[5].o.logprobs = 2;
  auto engine = Engine::start(*model_, {.max_running = 3});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::vector<std::unique_ptr<Outcome>> outcomes;
  for (const Case& c : cases) {
    outcomes.push_back(std::make_unique<Outcome>());
    ASSERT_TRUE((*engine)->submit(outcomes.back()->request(c.prompt, c.o)).ok());
  }
  for (size_t i = 0; i < cases.size(); ++i) {
    Outcome& out = *outcomes[i];
    ASSERT_TRUE(out.wait()) << "request " << i;
    ASSERT_TRUE(out.status.ok()) << out.status.to_string();
    const GenerateResult want = alone(cases[i].prompt, cases[i].o);
    EXPECT_EQ(out.result.tokens, want.tokens) << "request " << i;
    EXPECT_EQ(out.result.text, want.text) << "request " << i;
    EXPECT_EQ(out.result.stop_reason, want.stop_reason) << "request " << i;
    EXPECT_EQ(out.streamed, out.result.text) << "request " << i;
    EXPECT_GT(out.started_with, 0);
    EXPECT_FALSE(out.token_before_start);
    ASSERT_EQ(out.result.logprobs.size(), want.logprobs.size());
    for (size_t k = 0; k < want.logprobs.size(); ++k) {
      EXPECT_EQ(out.result.logprobs[k].token, want.logprobs[k].token);
      EXPECT_NEAR(out.result.logprobs[k].logprob, want.logprobs[k].logprob, 1e-6);
    }
  }
  EXPECT_EQ(outcomes[3]->result.stop_reason, StopReason::kStopString);
  const EngineCounts c = (*engine)->counts();
  EXPECT_EQ(c.finished, cases.size());
  EXPECT_EQ(c.running, 0);
  EXPECT_EQ(c.largest_batch, 3);  // three sequences, all busy at the start
  uint64_t tokens = 0;
  for (auto& o : outcomes) tokens += o->result.tokens.size();
  EXPECT_EQ(c.generated_tokens, tokens);
  EXPECT_LT(c.steps, tokens) << "steps decode several requests at once";
  EXPECT_GT(c.kv_cache_bytes, 0u);
}

TEST_F(EngineStories, CancellationQueueLimitsAndErrors) {
  auto engine = Engine::start(*model_, {.max_running = 1, .max_waiting = 1, .context_length = 64});
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ((*engine)->context_length(), 64);
  // A callback that returns false ends its request with kCallback; the text so far is kept.
  Outcome stopper;
  EngineRequest r = stopper.request("Once upon a time", options(40));
  int calls = 0;
  r.on_token = [&](int32_t, std::string_view) { return ++calls < 5; };
  ASSERT_TRUE((*engine)->submit(std::move(r)).ok());
  ASSERT_TRUE(stopper.wait());
  EXPECT_EQ(stopper.result.stop_reason, StopReason::kCallback);
  EXPECT_EQ(stopper.result.tokens.size(), 5u);

  // One long request runs, one waits, a third is refused; cancelling both lets them end.
  Outcome running, queued;
  auto a = (*engine)->submit(running.request("Once upon a time", options(60)));
  ASSERT_TRUE(a.ok());
  auto b = (*engine)->submit(queued.request("The dog", options(10)));
  ASSERT_TRUE(b.ok());
  Outcome refused;
  auto c = (*engine)->submit(refused.request("The cat", options(10)));
  if (!c.ok()) {
    EXPECT_EQ(c.status().code(), ErrorCode::kOutOfRange);
  }
  (*engine)->cancel(*a);
  ASSERT_TRUE(running.wait());
  EXPECT_TRUE(running.status.ok());
  ASSERT_TRUE(queued.wait());
  EXPECT_EQ(queued.result.tokens.size(), 10u);  // served once the first left
  if (c.ok()) {
    ASSERT_TRUE(refused.wait());
  }

  // A queued request cancelled before it starts ends at once, with no tokens.
  Outcome holder, dropped;
  auto h = (*engine)->submit(holder.request("Once upon a time", options(60)));
  auto d = (*engine)->submit(dropped.request("The dog", options(10)));
  ASSERT_TRUE(h.ok() && d.ok());
  (*engine)->cancel(*d);
  ASSERT_TRUE(dropped.wait());
  EXPECT_TRUE(dropped.status.ok());
  EXPECT_EQ(dropped.result.stop_reason, StopReason::kCallback);
  EXPECT_TRUE(dropped.result.tokens.empty());
  (*engine)->cancel(*h);
  ASSERT_TRUE(holder.wait());

  // A prompt longer than the context fails alone; the engine goes on.
  Outcome too_long, after;
  std::string prompt;
  for (int i = 0; i < 200; ++i) prompt += "tree ";
  ASSERT_TRUE((*engine)->submit(too_long.request(prompt, options(5))).ok());
  ASSERT_TRUE((*engine)->submit(after.request("Once upon a time", options(5))).ok());
  ASSERT_TRUE(too_long.wait());
  EXPECT_EQ(too_long.status.code(), ErrorCode::kOutOfRange) << too_long.status.to_string();
  ASSERT_TRUE(after.wait());
  EXPECT_EQ(after.result.tokens, test::first_n(golden_.generated, 5));
}

// Bytes of `blocks` KV cache blocks of `block_size` tokens of this model (from an engine's own report).
uint64_t pool_bytes(const Model& model, int block_size, int64_t blocks) {
  auto probe = Engine::start(model, {.max_running = 1, .context_length = 64, .block_size = block_size});
  EXPECT_TRUE(probe.ok());
  if (!probe.ok()) return 0;
  const EngineCounts c = (*probe)->counts();
  return c.kv_cache_bytes / static_cast<uint64_t>(c.kv_blocks) * static_cast<uint64_t>(blocks);
}

// A pool too small for all requests at once: the latest admitted ones are preempted (their blocks freed) and
// recomputed later from their prompt and the tokens they had produced, and every request still gets exactly what
// it gets alone (greedy and seeded sampling: the sampler's state survives the preemption).
TEST_F(EngineStories, PreemptedRequestsRecomputeAndGiveWhatTheyGiveAlone) {
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "One day, a girl", "Tom and his mom",
                                            "A bird", "It was a sunny day"};
  EngineOptions eo{.max_running = 4, .context_length = 128, .block_size = 4};
  eo.kv_cache_bytes = pool_bytes(*model_, 4, 48);  // 192 tokens for 4 requests of up to ~70
  auto engine = Engine::start(*model_, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  EXPECT_EQ((*engine)->counts().kv_blocks, 48);
  std::vector<std::unique_ptr<Outcome>> outcomes;
  std::vector<GenerateOptions> opts;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerateOptions o = options(60, i % 2 == 1 ? 0.9f : 0.0f, 11 + i);
    o.stop_at_end_of_generation = false;  // every request runs its 60 tokens, so that the pool fills
    opts.push_back(o);
    outcomes.push_back(std::make_unique<Outcome>());
    ASSERT_TRUE((*engine)->submit(outcomes.back()->request(prompts[i], o)).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    Outcome& out = *outcomes[i];
    ASSERT_TRUE(out.wait()) << "request " << i;
    ASSERT_TRUE(out.status.ok()) << out.status.to_string();
    const GenerateResult want = alone(prompts[i], opts[i]);
    EXPECT_EQ(out.result.tokens, want.tokens) << "request " << i;
    EXPECT_EQ(out.result.text, want.text) << "request " << i;
    EXPECT_EQ(out.streamed, out.result.text) << "request " << i << ": preemption must not repeat streamed text";
  }
  const EngineCounts c = (*engine)->counts();
  EXPECT_GT(c.preemptions, 0u);
  EXPECT_EQ(c.running, 0);
  EXPECT_EQ(c.kv_blocks_used, 0) << "every block is back in the pool";
}

// Prompt prefixes: a second request whose prompt starts like the first one's takes the first one's cached blocks
// (also after the first has finished) and still gets what it gets alone.
TEST_F(EngineStories, RepeatedPromptPrefixesReuseCachedBlocks) {
  auto engine = Engine::start(*model_, {.max_running = 2, .context_length = 256, .block_size = 8});
  ASSERT_TRUE(engine.ok());
  std::string shared = "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun.";
  Outcome first, second;
  ASSERT_TRUE((*engine)->submit(first.request(shared, options(20))).ok());
  ASSERT_TRUE(first.wait());
  const EngineCounts after_first = (*engine)->counts();
  EXPECT_EQ(after_first.kv_blocks_used, 0);
  EXPECT_GT(after_first.kv_blocks_cached, 0);
  const std::string longer = shared + " One day, she saw a big";
  ASSERT_TRUE((*engine)->submit(second.request(longer, options(20))).ok());
  ASSERT_TRUE(second.wait());
  const EngineCounts c = (*engine)->counts();
  EXPECT_GE(c.reused_prompt_tokens, static_cast<uint64_t>(first.started_with / 8 * 8 - 8));
  EXPECT_GT(c.reused_prompt_tokens, 0u);
  EXPECT_EQ(second.result.tokens, alone(longer, options(20)).tokens);
}

// Chunked prompts: while a long prompt runs in chunks of 8 tokens, a request already decoding keeps getting tokens,
// the chunks running in the same passes as its decode steps.
TEST_F(EngineStories, LongPromptRunsInChunksBetweenDecodeSteps) {
  auto engine = Engine::start(*model_, {.max_running = 2, .context_length = 512, .prompt_chunk = 8});
  ASSERT_TRUE(engine.ok());
  std::atomic<int> a_tokens{0}, a_tokens_at_b_start{-1}, a_tokens_at_b_submit{-1};
  Outcome a, b;
  GenerateOptions long_run = options(200);
  long_run.stop_at_end_of_generation = false;
  EngineRequest ra = a.request("Once upon a time", long_run);
  ra.on_token = [&](int32_t, std::string_view) { return ++a_tokens < 1000; };
  ASSERT_TRUE((*engine)->submit(std::move(ra)).ok());
  while (a_tokens < 3) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "The dog ran to the park. ";
  EngineRequest rb = b.request(prompt, options(5));
  rb.on_started = [&](int64_t n) {
    a_tokens_at_b_start = a_tokens.load();
    b.started_with = n;
  };
  a_tokens_at_b_submit = a_tokens.load();
  ASSERT_TRUE((*engine)->submit(std::move(rb)).ok());
  ASSERT_TRUE(b.wait());
  ASSERT_TRUE(a.wait());
  EXPECT_GT(b.started_with, 200);
  // At least one decode step per chunk of B's prompt (the submission may land in the middle of a step).
  EXPECT_GE(a_tokens_at_b_start - a_tokens_at_b_submit, b.started_with / 8 - 2)
      << "A decoded while B's prompt of " << b.started_with << " tokens ran";
  EXPECT_EQ(a.result.tokens.size(), 200u);
  // B's chunks rode in A's decode passes: fewer passes than decode steps plus chunks.
  const EngineCounts c = (*engine)->counts();
  const uint64_t chunks = static_cast<uint64_t>(b.started_with / 8);
  EXPECT_LT(c.passes + chunks / 2, c.steps + chunks) << c.passes << " passes, " << c.steps << " decode steps";
}

// The pool bounds what runs: a context that needs more blocks than the whole pool fails alone with a message
// naming the KV cache, and a request that fills the pool while running alone stops with kContextFull.
TEST_F(EngineStories, PoolLimitsAreReportedNotCrashed) {
  EngineOptions eo{.max_running = 2, .context_length = 256, .block_size = 4};
  eo.kv_cache_bytes = pool_bytes(*model_, 4, 4);  // 16 tokens
  auto engine = Engine::start(*model_, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  Outcome too_big, fills;
  std::string prompt;
  for (int i = 0; i < 10; ++i) prompt += "tree ";
  ASSERT_TRUE((*engine)->submit(too_big.request(prompt, options(5))).ok());
  ASSERT_TRUE(too_big.wait());
  EXPECT_EQ(too_big.status.code(), ErrorCode::kOutOfRange);
  EXPECT_NE(too_big.status.message().find("KV cache blocks"), std::string::npos) << too_big.status.to_string();
  GenerateOptions o = options(40);
  o.stop_at_end_of_generation = false;
  ASSERT_TRUE((*engine)->submit(fills.request("Once upon a time", o)).ok());
  ASSERT_TRUE(fills.wait());
  ASSERT_TRUE(fills.status.ok()) << fills.status.to_string();
  EXPECT_EQ(fills.result.stop_reason, StopReason::kContextFull);
  EXPECT_EQ(static_cast<int64_t>(fills.result.tokens.size()) + fills.started_with, 17)
      << "16 tokens in the pool, and the last one sampled";
  EXPECT_EQ(fills.result.tokens, test::first_n(alone("Once upon a time", o).tokens, fills.result.tokens.size()));
  EXPECT_EQ(Engine::start(*model_, {.block_size = 12}).status().code(), ErrorCode::kInvalidArgument);
}

// kv_cache_fraction sizes the pool from the memory free at start (available RAM on the CPU backend): a small share
// gives a pool of whole blocks no larger than that share of the RAM (sysinfo, not the backend's /proc/meminfo
// reading), which serves requests; a share outside (0, 1] or one too small for a block is refused by name.
TEST_F(EngineStories, PoolCanTakeAShareOfTheFreeMemory) {
  struct sysinfo si {};
  ASSERT_EQ(sysinfo(&si), 0);
  const double ram = static_cast<double>(si.totalram) * si.mem_unit;
  EngineOptions eo{.max_running = 2, .context_length = 256};
  eo.kv_cache_fraction = 1e-3;
  auto engine = Engine::start(*model_, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const EngineCounts c = (*engine)->counts();
  const uint64_t block_bytes = pool_bytes(*model_, 16, 1);
  EXPECT_GT(c.kv_blocks, 0);
  EXPECT_EQ(c.kv_cache_bytes, static_cast<uint64_t>(c.kv_blocks) * block_bytes);
  EXPECT_LE(static_cast<double>(c.kv_cache_bytes), 1e-3 * ram);
  // At least the share of the RAM free now less the engine's own buffers, with room for what others allocate.
  EXPECT_GE(static_cast<double>(c.kv_cache_bytes), 0.5e-3 * static_cast<double>(si.freeram) * si.mem_unit - 4e6);
  Outcome o;
  ASSERT_TRUE((*engine)->submit(o.request("Once upon a time", options(8))).ok());
  ASSERT_TRUE(o.wait());
  ASSERT_TRUE(o.status.ok()) << o.status.to_string();
  EXPECT_EQ(o.result.tokens, alone("Once upon a time", options(8)).tokens);
  engine->reset();
  for (double bad : {-0.5, 1.5}) {
    eo.kv_cache_fraction = bad;
    const Status s = Engine::start(*model_, eo).status();
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(s.message().find("kv_cache_fraction"), std::string::npos) << s.to_string();
  }
  eo.kv_cache_fraction = 1e-15;
  const Status tiny = Engine::start(*model_, eo).status();
  EXPECT_EQ(tiny.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(tiny.message().find("MiB free on the cpu backend"), std::string::npos) << tiny.to_string();
  EXPECT_NE(tiny.message().find("holds no block"), std::string::npos) << tiny.to_string();
}

// Without a size the pool has room for max_running full contexts, but at most half the free memory: two contexts
// of 2^26 tokens (some 80 GiB each for this model) get a pool that fits instead of a failed allocation, and it
// serves (the pool's pages are never touched beyond what the request uses).
TEST_F(EngineStories, DefaultPoolTakesAtMostHalfTheFreeMemory) {
  struct sysinfo si {};
  ASSERT_EQ(sysinfo(&si), 0);
  const int64_t context = int64_t{1} << 26;
  auto engine = Engine::start(*model_, {.max_running = 2, .context_length = context});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const EngineCounts c = (*engine)->counts();
  EXPECT_GT(c.kv_blocks, 0);
  EXPECT_LT(c.kv_blocks * c.kv_block_size, 2 * context);
  EXPECT_LE(static_cast<double>(c.kv_cache_bytes), 0.5 * static_cast<double>(si.totalram) * si.mem_unit);
  Outcome o;
  ASSERT_TRUE((*engine)->submit(o.request("Once upon a time", options(8))).ok());
  ASSERT_TRUE(o.wait());
  ASSERT_TRUE(o.status.ok()) << o.status.to_string();
  EXPECT_EQ(o.result.tokens, alone("Once upon a time", options(8)).tokens);
  // A context that fits is given whole, as before.
  auto small = Engine::start(*model_, {.max_running = 2, .context_length = 256});
  ASSERT_TRUE(small.ok());
  EXPECT_EQ((*small)->counts().kv_blocks, 2 * 256 / 16);
}

// A model split among two ranks inside the process (threads): every engine command runs on both ranks, their pools
// stay in step through preemption, and each request gets what a session on the same split model gives it alone.
TEST_F(EngineStories, InProcessTensorParallelRanksStepTogether) {
  ModelOptions mo;
  mo.tensor_parallel = 2;
  auto split = Model::open(test::stories_gguf(data_), mo);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  ASSERT_EQ(split->info().tp_world, 2);
  EngineOptions eo{.max_running = 3, .context_length = 128, .block_size = 8};
  auto probe = Engine::start(*split, {.max_running = 1, .context_length = 64, .block_size = 8});
  ASSERT_TRUE(probe.ok()) << probe.status().to_string();
  const uint64_t block_bytes = (*probe)->counts().kv_cache_bytes / static_cast<uint64_t>((*probe)->counts().kv_blocks);
  probe->reset();
  eo.kv_cache_bytes = 16 * block_bytes;  // three requests of ~65 tokens need 27 blocks: preemption
  auto engine = Engine::start(*split, eo);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "One day, a girl", "A bird"};
  GenerateOptions o = options(60, 0.7f, 5);
  o.stop_at_end_of_generation = false;
  std::vector<std::unique_ptr<Outcome>> outcomes;
  for (const std::string& p : prompts) {
    outcomes.push_back(std::make_unique<Outcome>());
    ASSERT_TRUE((*engine)->submit(outcomes.back()->request(p, o)).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(outcomes[i]->wait());
    ASSERT_TRUE(outcomes[i]->status.ok()) << outcomes[i]->status.to_string();
    auto s = split->new_session();
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE(s->add_prompt(prompts[i]).ok());
    auto alone = s->generate(o);
    ASSERT_TRUE(alone.ok());
    EXPECT_EQ(outcomes[i]->result.tokens, alone->tokens) << prompts[i];
  }
  EXPECT_GT((*engine)->counts().preemptions, 0u);
  EXPECT_EQ((*engine)->counts().kv_blocks_used, 0);
}

TEST_F(EngineStories, DestroyedWithRequestsPendingTellsThem) {
  Outcome a, b;
  {
    auto engine = Engine::start(*model_, {.max_running = 1, .context_length = 512});
    ASSERT_TRUE(engine.ok());
    ASSERT_TRUE((*engine)->submit(a.request("Once upon a time", options(400))).ok());
    ASSERT_TRUE((*engine)->submit(b.request("The dog", options(400))).ok());
  }
  ASSERT_TRUE(a.wait() && b.wait());
  EXPECT_FALSE(b.status.ok());  // never started
  EXPECT_TRUE(!a.status.ok() || a.result.tokens.size() <= 400u);
}

}  // namespace
}  // namespace qrt
