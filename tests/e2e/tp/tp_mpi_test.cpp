// Tensor parallelism across MPI ranks on the CPU backend (run under mpirun -np 2 and -np 4): every rank's logits
// equal the single-rank model's within 1e-5 relative, for random models of every architecture's features and
// several formats (MoE experts split and replicated) and for the real stories260K; through the public API, the
// split model reproduces stories260K's recorded greedy continuation and calls back on rank 0 only; the batching
// engine runs on rank 0 with the other ranks following its steps.
//
// Every rank runs every test and issues the same collectives in the same order; outcomes that decide whether a
// rank goes on are agreed first, so a failure never leaves the other ranks waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm_test_world.hpp"
#include "loader/gguf.hpp"
#include "models/arch/arch.hpp"
#include "models/arch/gguf_metadata_view.hpp"
#include "models/tensor_names.hpp"
#include "models/transformer.hpp"
#include "qrt/engine.hpp"
#include "qrt/runtime.hpp"
#include "backend/cpu_backend.hpp"
#include "stories_golden.hpp"
#include "test_support.hpp"
#include "tests/unit/tp/tp_test_models.hpp"

namespace qrt {
namespace {

Communicator& world() { return test::world_communicator(); }

// Logits of `tensors` split among the ranks, or the agreed error.
Result<std::vector<float>> split_logits(const ModelConfig& config, const TensorTable& tensors,
                                        const std::vector<int32_t>& prompt) {
  CpuBackend backend(&world());
  TransformerOptions options;
  options.tp = {world().rank(), world().world()};
  auto model = Transformer::create(backend, config, tensors, options);
  QRT_TRY(world().agree(model.status()));
  auto seq = (*model)->new_sequence(static_cast<int64_t>(prompt.size()));
  QRT_TRY(world().agree(seq.status()));
  std::vector<float> logits;
  QRT_TRY(world().agree((*model)->forward(**seq, prompt, LogitsFor::kAll, &logits)));
  return logits;
}

Result<std::vector<float>> single_logits(const ModelConfig& config, const TensorTable& tensors,
                                         const std::vector<int32_t>& prompt) {
  CpuBackend backend;
  QRT_ASSIGN_OR_RETURN(auto model, Transformer::create(backend, config, tensors));
  QRT_ASSIGN_OR_RETURN(auto seq, model->new_sequence(static_cast<int64_t>(prompt.size())));
  std::vector<float> logits;
  QRT_TRY(model->forward(*seq, prompt, LogitsFor::kAll, &logits));
  return logits;
}

TEST(MultiRank, RandomModelsMatchTheSingleRankModel) {
  for (const test::Case& c : test::cases()) {
    test::TinyModel m = test::build_case_model(c);  // the same seeds on every rank: the same model
    std::vector<float> reference;
    {
      // Failures here are the same on every rank (no collectives yet), so every rank leaves together.
      CpuBackend single;
      auto single_model = Transformer::create(single, m.config, m.tensors);
      ASSERT_TRUE(single_model.ok()) << c.name << ": " << single_model.status().to_string();
      const Status ran = test::run(**single_model, &reference);
      ASSERT_TRUE(ran.ok()) << c.name << ": " << ran.to_string();
    }
    // The same forward passes split among the ranks (prompt batch, then single steps).
    CpuBackend backend(&world());
    TransformerOptions options;
    options.tp = {world().rank(), world().world()};
    auto model = Transformer::create(backend, m.config, m.tensors, options);
    const Status built = world().agree(model.status());
    ASSERT_TRUE(built.ok()) << c.name << ": " << built.to_string();
    std::vector<float> got;
    const Status split_ran = world().agree(test::run(**model, &got));
    ASSERT_TRUE(split_ran.ok()) << c.name << ": " << split_ran.to_string();
    EXPECT_LT(test::max_rel_diff(got, reference), 1e-5) << c.name << " on rank " << world().rank();
  }
}

TEST(MultiRank, Stories260KLogitsMatchTheSingleRankModel) {
  QRT_REQUIRE_TEST_DATA(data);
  const test::StoriesGolden golden = test::read_stories_golden(data);
  ASSERT_FALSE(golden.prompt.empty());
  auto gguf = open_gguf((data / "stories260K/stories260K.gguf").string());
  ASSERT_TRUE(world().agree(gguf.status()).ok()) << gguf.status().to_string();
  auto config = arch::config_from_gguf(arch::GgufMetadataView(gguf->metadata()));
  ASSERT_TRUE(config.ok()) << config.status().to_string();
  auto canonical = names::canonicalize(gguf->tensors, names::NameScheme::kGguf);
  ASSERT_TRUE(canonical.ok()) << canonical.status().to_string();
  arch::apply_tensor_presence(canonical->tensors, &*config);
  // The prompt and the recorded continuation: logits of every position.
  std::vector<int32_t> tokens = golden.prompt;
  tokens.insert(tokens.end(), golden.generated.begin(), golden.generated.end());
  auto reference = single_logits(*config, canonical->tensors, tokens);
  ASSERT_TRUE(reference.ok()) << reference.status().to_string();
  auto split = split_logits(*config, canonical->tensors, tokens);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  EXPECT_LT(test::max_rel_diff(*split, *reference), 1e-5) << "rank " << world().rank();
}

TEST(MultiRank, PublicApiSplitsTheModelAndReproducesGoldenGreedy) {
  QRT_REQUIRE_TEST_DATA(data);
  const test::StoriesGolden golden = test::read_stories_golden(data);
  auto model = Model::open((data / "stories260K/stories260K.gguf").string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ(model->info().tp_world, world().world());
  EXPECT_EQ(model->info().tp_rank, world().rank());
  auto session = model->new_session();
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  // Only rank 0's prompt counts: the other ranks pass a different one, which must be ignored.
  std::vector<int32_t> prompt = golden.prompt;
  if (world().rank() != 0) prompt.assign(3, 7);
  ASSERT_TRUE(session->add_tokens(prompt).ok());
  GenerateOptions gen;
  gen.max_tokens = static_cast<int>(golden.generated.size());
  gen.stop_at_end_of_generation = false;
  // Rank 0 decides when generation stops: other ranks asking for fewer tokens still follow it.
  if (world().rank() != 0) gen.max_tokens = 3;
  int callbacks = 0;
  auto result = session->generate(gen, [&](int32_t, std::string_view) {
    ++callbacks;
    return true;
  });
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->tokens, golden.generated) << "rank " << world().rank();
  EXPECT_EQ(callbacks, world().rank() == 0 ? static_cast<int>(golden.generated.size()) : 0);
  // A prompt longer than the context is refused on every rank alike (rank 0's length decides).
  std::vector<int32_t> too_long(static_cast<size_t>(session->context_length()) + 1, 5);
  if (world().rank() != 0) too_long.assign(2, 5);
  EXPECT_FALSE(session->add_tokens(too_long).ok()) << "rank " << world().rank();
}

// The batching engine on a model split among the MPI ranks: rank 0 schedules, the others follow its steps
// (Engine::follow). Five requests on two sequences over a pool small enough to preempt give rank 0 what a session
// on the same split model gives each one alone.
TEST(MultiRank, EngineOnRankZeroAndFollowersServeTheSplitModel) {
  QRT_REQUIRE_TEST_DATA(data);
  auto model = Model::open((data / "stories260K/stories260K.gguf").string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  const std::vector<std::string> prompts = {"Once upon a time", "The little dog", "One day, a girl", "Tom and his mom",
                                            "A bird"};
  GenerateOptions gen;
  gen.max_tokens = 40;
  gen.stop_at_end_of_generation = false;
  std::vector<std::vector<int32_t>> served(prompts.size());
  if (world().rank() == 0) {
    EngineOptions eo;
    eo.max_running = 2;
    eo.context_length = 64;
    eo.block_size = 8;
    // 10 blocks of 8 tokens (this rank's share of them) for two requests of 45 tokens: one gets preempted.
    ModelConfig shape;
    shape.layers = model->info().layers;
    shape.heads = model->info().heads;
    shape.kv_heads = model->info().kv_heads;
    shape.hidden = model->info().hidden;
    eo.kv_cache_bytes = 10 * 8 * kv_cache_bytes_per_token(shape, world().world(), model->info().kv_type);
    auto engine = Engine::start(*model, eo);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    std::mutex m;
    std::condition_variable cv;
    size_t done = 0;
    // The first request's first token waits until every request is queued, so that two of them run together and
    // the pool overflows whatever the host's timing (on a loaded machine the first could otherwise finish alone).
    std::atomic<bool> all_submitted{false};
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest r;
      r.prompt = prompts[i];
      r.options = gen;
      if (i == 0) {
        r.on_token = [&all_submitted](int32_t, std::string_view) {
          for (int waited = 0; !all_submitted.load() && waited < 10000; ++waited)
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          return true;
        };
      }
      r.on_done = [&, i](Result<GenerateResult> res) {
        std::lock_guard lock(m);
        if (res.ok()) served[i] = res->tokens;
        ++done;
        cv.notify_all();
      };
      ASSERT_TRUE((*engine)->submit(std::move(r)).ok());
    }
    all_submitted = true;
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::minutes(2), [&] { return done == prompts.size(); }));
    EXPECT_EQ((*engine)->counts().kv_blocks, 10);
    EXPECT_GT((*engine)->counts().preemptions, 0u);
  } else {
    const Status followed = Engine::follow(*model);
    EXPECT_TRUE(followed.ok()) << followed.to_string();
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto session = model->new_session({.context_length = 64});
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE(session->add_prompt(prompts[i]).ok());
    auto alone = session->generate(gen);
    ASSERT_TRUE(alone.ok()) << alone.status().to_string();
    if (world().rank() == 0) {
      EXPECT_EQ(served[i], alone->tokens) << prompts[i];
    }
  }
}

}  // namespace
}  // namespace qrt
