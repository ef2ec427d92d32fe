// qrt::Engine on the CUDA backend (stories260K): the decode rows of a step are sampled on the device, grouped by
// equal sampling parameters (greedy rows together, a seeded top-k group, a group with penalties), one id per row
// copied back; each request must still get the tokens Session::generate gives it alone on the same backend (which
// samples on the device through Transformer::sample_last), and logprobs within the fp16 GEMM's rounding.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "qrt/engine.hpp"
#include "stories_fixture.hpp"

namespace qrt {
namespace {

struct Done {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  Status status;
  GenerateResult result;
  bool wait() {
    std::unique_lock lock(m);
    return cv.wait_for(lock, std::chrono::minutes(10), [&] { return done; });
  }
};

class CudaEngine : public test::StoriesTest {};

TEST_F(CudaEngine, DeviceSampledRowsEqualSessionsAlone) {
  QRT_REQUIRE_GPU();
  ModelOptions mo;
  mo.device = Device::kCuda;
  auto model = Model::open(test::stories_gguf(data_), mo);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  struct Case {
    const char* prompt;
    float temperature;
    uint64_t seed;
    float presence;
    int logprobs;
  };
  const Case cases[] = {{"Once upon a time", 0, 0, 0, -1},  {"The little dog", 0.9f, 3, 0, -1},
                        {"One day, a girl", 0, 0, 0, 2},     {"Tom and his mom", 0.9f, 9, 0.5f, -1},
                        {"A bird", 0.9f, 11, 0, -1}};
  const auto options_of = [](const Case& c) {
    GenerateOptions o;
    o.max_tokens = 8;
    o.sampling.temperature = c.temperature;
    o.sampling.seed = c.seed;
    o.sampling.top_k = c.temperature > 0 ? 20 : 0;
    o.sampling.presence_penalty = c.presence;
    o.logprobs = c.logprobs;
    return o;
  };
  auto engine = Engine::start(*model, {.max_running = 5, .context_length = 64});
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  std::vector<std::unique_ptr<Done>> done;
  for (const Case& c : cases) {
    done.push_back(std::make_unique<Done>());
    Done* d = done.back().get();
    EngineRequest r;
    r.prompt = c.prompt;
    r.options = options_of(c);
    r.on_done = [d](Result<GenerateResult> res) {
      std::lock_guard lock(d->m);
      if (res.ok()) d->result = std::move(*res);
      else d->status = res.status();
      d->done = true;
      d->cv.notify_all();
    };
    ASSERT_TRUE((*engine)->submit(std::move(r)).ok());
  }
  for (size_t i = 0; i < std::size(cases); ++i) {
    ASSERT_TRUE(done[i]->wait());
    ASSERT_TRUE(done[i]->status.ok()) << done[i]->status.to_string();
    auto session = model->new_session({.context_length = 64});
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE(session->add_prompt(cases[i].prompt).ok());
    auto alone = session->generate(options_of(cases[i]));
    ASSERT_TRUE(alone.ok()) << alone.status().to_string();
    EXPECT_EQ(done[i]->result.tokens, alone->tokens) << cases[i].prompt;
    ASSERT_EQ(done[i]->result.logprobs.size(), alone->logprobs.size()) << cases[i].prompt;
    // The engine's first pass runs the five prompts together (25 rows: the fp16 GEMM), each session its own (at
    // most 8 rows: fp32 GEMVs), so the cached keys and values differ by fp16 roundings (measured: up to 1.3e-3).
    for (size_t k = 0; k < alone->logprobs.size(); ++k)
      EXPECT_NEAR(done[i]->result.logprobs[k].logprob, alone->logprobs[k].logprob, 5e-3) << cases[i].prompt;
  }
  EXPECT_EQ((*engine)->counts().largest_batch, 5);
}

}  // namespace
}  // namespace qrt
