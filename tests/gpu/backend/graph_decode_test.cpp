// Decode steps as one captured graph (TransformerOptions::graphs) against the same model issuing every op by
// itself, on the same CUDA backend: the logits must be identical bit for bit at every step, through everything that
// changes between replays (token, position, slot, key count), a prompt chunk that regrows the scratch buffers
// (the graph holds their old addresses, so it must be captured again), a sliding window, MoE routing, and a
// sequence that is reset and filled again; and decode_batch's steps over a paged pool, one graph per batch shape.
// Under the SIMT layer the graph launches are also counted.
#include <cmath>
#include <memory>
#include <set>
#include <span>
#include <vector>

#include "architectures.hpp"
#include "backend_pair.hpp"
#include "models/transformer.hpp"
#include "tiny_model.hpp"

#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

using GraphDecode = test::BackendPair;

struct Model {
  std::unique_ptr<Transformer> transformer;
  std::unique_ptr<Sequence> seq;
};

Model make(Backend& backend, const test::TinyModel& m, bool graphs) {
  TransformerOptions options;
  options.graphs = graphs;
  auto t = Transformer::create(backend, m.config, m.tensors, options);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  if (!t.ok()) return {};
  auto seq = (*t)->new_sequence(48);
  EXPECT_TRUE(seq.ok());
  return {std::move(*t), seq.ok() ? std::move(*seq) : nullptr};
}

TEST_F(GraphDecode, StepsEqualOpByOpBitForBit) {
  for (const test::Architecture& arch : test::architectures()) {
    // Gemma 3 brings the window (mistral's), the second RoPE table, the embedding scale and post-norms; qwen2 the
    // biases, qwen3moe the experts, deepseek3 the latent cache and the per-head projections. (llama 3's RoPE
    // differs from llama's only in the table's values.)
    if (arch.name != "gemma3" && arch.name != "qwen2" && arch.name != "qwen3moe" && arch.name != "deepseek3") continue;
    SCOPED_TRACE(arch.name);
    const test::TinyModel m = test::make_tiny_model(arch.config);
    Model graph = make(*gpu_, m, true), eager = make(*gpu_, m, false);
    ASSERT_TRUE(graph.seq && eager.seq);
    // Token chunks in order: a one-token prompt (the first capture sees the smallest scratch), decode steps, a
    // 6-token chunk (scratch regrows: captured again), more decode steps.
    const std::vector<std::vector<int32_t>> chunks = {{5},  {17}, {42}, {8},  {8}, {29}, {1, 44, 12, 3, 9, 30},
                                                      {44}, {12}, {7},  {46}, {2}, {19}, {23}};
#if defined(QRT_SIMT)
    const simt::StreamCounters before = simt::device_counters(0);
#endif
    for (int pass = 0; pass < 2; ++pass) {  // the second pass after resetting both sequences
      int step = 0;
      for (const std::vector<int32_t>& chunk : chunks) {
        std::vector<float> want, got;
        const Status e = eager.transformer->forward(*eager.seq, chunk, LogitsFor::kLast, &want);
        ASSERT_TRUE(e.ok()) << e.to_string();
        const Status s = graph.transformer->forward(*graph.seq, chunk, LogitsFor::kLast, &got);
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_EQ(got.size(), want.size());
        for (float v : want) ASSERT_TRUE(std::isfinite(v));
        EXPECT_EQ(got, want) << "pass " << pass << ", chunk " << step << " (" << chunk.size() << " tokens)";
        ++step;
      }
      EXPECT_EQ(graph.seq->length(), eager.seq->length());
      graph.seq->reset();
      eager.seq->reset();
    }
#if defined(QRT_SIMT)
    // 13 one-token chunks per pass, each a graph launch in the graph model (the eager one launches none).
    EXPECT_EQ((simt::device_counters(0) - before).graph_launches, 26u);
#endif
  }
}

// Sampling on the device after a replayed step (the graph leaves the logits where sample_last reads them).
TEST_F(GraphDecode, GreedyGenerationEqualsOpByOp) {
  const test::TinyModel m = test::make_tiny_model(test::architectures().front().config);
  Model graph = make(*gpu_, m, true), eager = make(*gpu_, m, false);
  ASSERT_TRUE(graph.seq && eager.seq);
  const std::vector<int32_t> prompt = {3, 17, 42, 8};
  std::vector<int32_t> ids[2];
  Model* models[2] = {&graph, &eager};
  for (int i = 0; i < 2; ++i) {
    Model& model = *models[i];
    ASSERT_TRUE(model.transformer->forward_keep_logits(*model.seq, prompt).ok());
    SampleStep step;
    step.u01 = {0.5};
    for (int t = 0; t < 20; ++t) {
      int32_t id = -1;
      ASSERT_TRUE(model.transformer->sample_last(*model.seq, step, &id).ok());
      ids[i].push_back(id);
      ASSERT_TRUE(model.transformer->forward_keep_logits(*model.seq, std::span(&id, 1)).ok());
    }
  }
  EXPECT_EQ(ids[0], ids[1]);
  EXPECT_GT(std::set<int32_t>(ids[0].begin(), ids[0].end()).size(), 1u) << "the ids should not all be the same";
}

// decode_batch over sequences of one paged pool: one captured graph per batch size and (power-of-two) table width,
// replayed by one launch per step, bit for bit the op-by-op steps; a batch of another size gets its own graph, and
// the sequences' tables growing past a width re-capture.
TEST_F(GraphDecode, BatchedDecodeStepsReplayOneGraphPerBatchShape) {
  const test::TinyModel m = test::make_tiny_model(test::architectures().front().config);
  struct Batched {
    std::unique_ptr<Transformer> transformer;
    std::unique_ptr<KvPool> pool;
    std::vector<std::unique_ptr<Sequence>> seqs;
    DecodeBatch batch;
  };
  Batched runs[2];
  for (int i = 0; i < 2; ++i) {
    TransformerOptions options;
    options.graphs = i == 0;
    auto t = Transformer::create(*gpu_, m.config, m.tensors, options);
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    runs[i].transformer = std::move(*t);
    auto pool = runs[i].transformer->new_kv_pool(64, 4);
    ASSERT_TRUE(pool.ok());
    runs[i].pool = std::move(*pool);
    for (int s = 0; s < 4; ++s) {
      auto seq = runs[i].transformer->new_sequence(*runs[i].pool, 48);
      ASSERT_TRUE(seq.ok());
      // Prompts of 2, 5, 3 and 6 tokens: the sequences hold different numbers of blocks.
      std::vector<int32_t> prompt;
      for (int k = 0; k < (s % 2 == 0 ? 2 + s / 2 : 5 + s / 2); ++k) prompt.push_back((7 * s + 3 * k + 1) % 50);
      std::vector<float> ignored;
      ASSERT_TRUE(runs[i].transformer->forward(**seq, prompt, LogitsFor::kLast, &ignored).ok());
      runs[i].seqs.push_back(std::move(*seq));
    }
  }
#if defined(QRT_SIMT)
  const simt::StreamCounters before = simt::device_counters(0);
#endif
  int steps = 0;
  for (int step = 0; step < 9; ++step) {
    const int batch = step >= 3 && step < 5 ? 3 : 4;  // a smaller batch in the middle
    std::vector<float> logits[2];
    for (int i = 0; i < 2; ++i) {
      std::vector<Sequence*> seqs;
      std::vector<int32_t> tokens;
      for (int s = 0; s < batch; ++s) {
        seqs.push_back(runs[i].seqs[static_cast<size_t>(s)].get());
        tokens.push_back((11 * step + 5 * s + 2) % 50);
      }
      const Status st = runs[i].transformer->decode_batch(runs[i].batch, seqs, tokens, &logits[i]);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    for (float v : logits[1]) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(logits[0], logits[1]) << "step " << step << ", batch of " << batch;
    ++steps;
  }
  EXPECT_EQ(runs[0].batch.graph_steps(), static_cast<uint64_t>(steps)) << "every step one launch";
  EXPECT_EQ(runs[1].batch.graph_steps(), 0u);
  // Batches of 4 and 3 over tables of 2 blocks, then (the table buffer grown: every graph dropped) of 4 blocks as the
  // sequences pass 8 tokens: a handful of captures for 9 steps.
  EXPECT_GE(runs[0].batch.step_captures(), 3u);
  EXPECT_LE(runs[0].batch.step_captures(), 5u);
#if defined(QRT_SIMT)
  EXPECT_EQ((simt::device_counters(0) - before).graph_launches, static_cast<uint64_t>(steps));
#endif
}

}  // namespace
}  // namespace qrt
