// Programmatic dependent launch (CudaBackend::set_programmatic_launch, QRT_CUDA_PDL; kernels/cuda/
// programmatic_launch.cuh) in a decode step with integer-dot, dense and staged float GEMVs, and in every
// architecture's (mixture-of-experts layers, latent attention, elementwise kernels): which kernels carry the
// attribute, that every thread of them waits for the previous grid before it exits (the SIMT layer counts the blocks
// where one did not), and that the logits are the same bits with and without it. The layer runs grids one after the
// other, so what it cannot show is an early read inside a kernel; the kernels wait first thing, before any access but
// their weights. Needs the layer's counters: runs under gpu-sim only.
#include <cstdlib>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "architectures.hpp"
#include "backend_pair.hpp"
#include "paged_batch.hpp"
#include "kernels/cuda/programmatic_launch.hpp"
#include "models/transformer.hpp"
#include "requantize.hpp"
#include "tiny_model.hpp"

#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

using ProgrammaticLaunch = test::BackendPair;

// The switch is the process's: a test that changes it puts back what it found (QRT_CUDA_PDL may have set it).
struct RestoreSwitch {
  bool was = kernels::programmatic_launch();
  ~RestoreSwitch() { kernels::set_programmatic_launch(was); }
};

#if defined(QRT_SIMT)
struct DecodeRun {
  std::vector<float> logits;      // the prompt's last token's, then each decode step's
  simt::StreamCounters last_step;  // the last decode step (a replay of the captured graph)
};

// A 2-layer llama.
ModelConfig dense_config() {
  ModelConfig c = test::tiny_llama_config();
  c.layers = 2;
  c.head_dim = 32;  // a head is whole activation blocks (the merge quantizes for the integer-dot GEMV)
  return c;
}

// Model c with its matrices in `format`: a 4-token prompt, then 3 decode steps through the captured graph.
DecodeRun decode(Backend& gpu, const ModelConfig& c, quant::FormatId format) {
  auto m = test::make_tiny_model(c);
  std::list<quant::QuantBuffers> storage;
  if (format != quant::FormatId::kF32) test::requantize(m, format, storage);
  DecodeRun run;
  auto model = Transformer::create(gpu, m.config, m.tensors, TransformerOptions{});
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return run;
  auto seq = (*model)->new_sequence(32);
  EXPECT_TRUE(seq.ok());
  if (!seq.ok()) return run;
  std::vector<int32_t> tokens = {1, 7, 9, 4};
  for (int step = 0; step < 4; ++step) {
    const simt::StreamCounters before = simt::device_counters(0);
    EXPECT_TRUE((*model)->forward_keep_logits(**seq, tokens).ok());
    std::vector<float> logits;
    EXPECT_TRUE((*model)->download_last_logits(**seq, &logits).ok());
    run.last_step = simt::device_counters(0) - before;
    run.logits.insert(run.logits.end(), logits.begin(), logits.end());
    tokens = {static_cast<int32_t>(3 + 2 * step)};
  }
  EXPECT_TRUE(gpu.synchronize().ok());
  return run;
}

struct BatchRun {
  std::vector<float> logits;       // both steps'
  simt::StreamCounters last_step;  // the second step (graphs off: every kernel a host launch)
};

// Model c in `format`: 3 paged sequences with prompts of 2, 5 and 8 tokens (paged_batch.hpp), then 2 batched decode
// steps.
BatchRun decode_batch(Backend& gpu, const ModelConfig& c, quant::FormatId format) {
  auto m = test::make_tiny_model(c);
  std::list<quant::QuantBuffers> storage;
  test::requantize(m, format, storage);
  BatchRun run;
  test::PagedBatch b;
  if (!test::start_paged_batch(gpu, m, 3, &b)) return run;
  DecodeBatch batch;
  for (int step = 0; step < 2; ++step) {
    const simt::StreamCounters before = simt::device_counters(0);
    std::vector<float> logits;
    EXPECT_TRUE(b.model->decode_batch(batch, b.seqs, b.tokens, &logits).ok());
    run.last_step = simt::device_counters(0) - before;
    run.logits.insert(run.logits.end(), logits.begin(), logits.end());
    for (int32_t& t : b.tokens) t += 2;
  }
  return run;
}
#endif

#if defined(QRT_SIMT)
// Model c in `format` decoded with ordinary launches, then with programmatic ones: every kernel of the captured step
// but the embedding lookup is programmatic, none of their threads exits without waiting, and the logits are the same
// bits.
void expect_programmatic_decode(CudaBackend& gpu, const ModelConfig& c, quant::FormatId format) {
  ASSERT_TRUE(gpu.set_programmatic_launch(false).ok());
  const DecodeRun plain = decode(gpu, c, format);
  ASSERT_FALSE(plain.logits.empty());
  EXPECT_EQ(plain.last_step.programmatic_launches, 0u) << "switched off";
  EXPECT_EQ(plain.last_step.graph_launches, 1u);

  const uint64_t unwaited_before = simt::programmatic_blocks_without_wait();
  ASSERT_TRUE(gpu.set_programmatic_launch(true).ok());
  const DecodeRun pdl = decode(gpu, c, format);
  EXPECT_EQ(simt::programmatic_blocks_without_wait() - unwaited_before, 0u)
      << "a kernel launched programmatically has threads that exit without waiting for the previous grid";

  const simt::StreamCounters& s = pdl.last_step;
  EXPECT_EQ(s.graph_kernel_nodes, plain.last_step.graph_kernel_nodes) << "the same kernels";
  EXPECT_EQ(s.programmatic_launches, s.graph_kernel_nodes - 1) << s.graph_kernel_nodes << " kernels in the graph";
  EXPECT_EQ(pdl.logits, plain.logits) << "the same bits with programmatic launches";
}
#endif

// A llama: per layer the projections, RoPE + KV write, split attention, merge, add + norm, the gated activation;
// then the last norm and the output projection. Q8_0: the integer-dot GEMV (its inputs quantized by the norms, the
// merge and silu); F32: the dense float GEMV; FP8: the staged float GEMV.
TEST_F(ProgrammaticLaunch, TheDecodeKernelsWaitAndChangeNoBit) {
#if !defined(QRT_SIMT)
  GTEST_SKIP() << "counting programmatic launches needs the SIMT layer's counters (label gpu-sim)";
#else
  const RestoreSwitch restore;
  for (const quant::FormatId format : {quant::FormatId::kQ8_0, quant::FormatId::kF32, quant::FormatId::kFP8}) {
    SCOPED_TRACE(quant::format_name(format));
    expect_programmatic_decode(*gpu_, dense_config(), format);
  }
#endif
}

// Every architecture's decode step (architectures.hpp) in Q8_0, and the mixture-of-experts ones in FP8 too: besides
// the kernels above, the elementwise ones (biases, soft caps, concatenations), the router's top-k (softmax, and
// DeepSeek's grouped sigmoid), the experts on the integer-dot GEMV and on the staged float GEMV, the weighted combine,
// latent attention and its merge.
TEST_F(ProgrammaticLaunch, EveryArchitecturesDecodeKernelsWaitAndChangeNoBit) {
#if !defined(QRT_SIMT)
  GTEST_SKIP() << "counting programmatic launches needs the SIMT layer's counters (label gpu-sim)";
#else
  const RestoreSwitch restore;
  for (const test::Architecture& a : test::architectures()) {
    for (const quant::FormatId format : {quant::FormatId::kQ8_0, quant::FormatId::kFP8}) {
      if (format == quant::FormatId::kFP8 && a.config.experts == 0) continue;
      SCOPED_TRACE(a.name + " " + std::string(quant::format_name(format)));
      expect_programmatic_decode(*gpu_, a.config, format);
    }
  }
#endif
}

// A batched decode step of a mixture-of-experts model on the int8 tensor cores (set_mma_gemm): x rearranged into
// tiles and the GEMM for the dense projections, the batch's slots grouped by expert for the experts.
TEST_F(ProgrammaticLaunch, BatchedDecodeOnTheTensorCoresWaitsAndChangesNoBit) {
#if !defined(QRT_SIMT)
  GTEST_SKIP() << "counting programmatic launches needs the SIMT layer's counters (label gpu-sim)";
#else
  const RestoreSwitch restore;
  auto created = CudaBackend::create(0);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  std::unique_ptr<CudaBackend> mma = std::move(*created);
  mma->set_mma_gemm(true);
  ModelConfig c;
  for (const test::Architecture& a : test::architectures())
    if (a.name == "qwen3moe") c = a.config;
  ASSERT_TRUE(mma->set_programmatic_launch(false).ok());
  const BatchRun plain = decode_batch(*mma, c, quant::FormatId::kQ8_0);
  ASSERT_FALSE(plain.logits.empty());
  const uint64_t unwaited_before = simt::programmatic_blocks_without_wait();
  ASSERT_TRUE(mma->set_programmatic_launch(true).ok());
  const BatchRun pdl = decode_batch(*mma, c, quant::FormatId::kQ8_0);
  EXPECT_EQ(simt::programmatic_blocks_without_wait() - unwaited_before, 0u);
  const simt::StreamCounters& s = pdl.last_step;
  EXPECT_EQ(s.kernel_launches, plain.last_step.kernel_launches);
  EXPECT_EQ(s.programmatic_launches, s.kernel_launches - 1) << s.kernel_launches << " kernels in the step";
  EXPECT_EQ(pdl.logits, plain.logits);
#endif
}

// QRT_CUDA_PDL=0|1 at creation sets the switch; anything else is refused by name; unset, creation turns it on from
// compute capability 9.0 (the layer reports 9.0).
TEST_F(ProgrammaticLaunch, TheEnvironmentSetsTheSwitch) {
  const RestoreSwitch restore;
  // The variable as the process had it (scripts/gpu-session runs these tests with QRT_CUDA_PDL=0), put back after.
  struct RestoreVariable {
    bool was_set = std::getenv("QRT_CUDA_PDL") != nullptr;
    std::string was = was_set ? std::getenv("QRT_CUDA_PDL") : "";
    ~RestoreVariable() {
      if (was_set) {
        setenv("QRT_CUDA_PDL", was.c_str(), 1);
      } else {
        unsetenv("QRT_CUDA_PDL");
      }
    }
  } const restore_variable;
  unsetenv("QRT_CUDA_PDL");
  kernels::set_programmatic_launch(false);
  auto by_default = CudaBackend::create(0);
  ASSERT_TRUE(by_default.ok()) << by_default.status().to_string();
  EXPECT_EQ(kernels::programmatic_launch(), (*by_default)->device_props().compute_major >= 9);
  setenv("QRT_CUDA_PDL", "1", 1);
  auto on = CudaBackend::create(0);
  unsetenv("QRT_CUDA_PDL");
  ASSERT_TRUE(on.ok()) << on.status().to_string();
  EXPECT_TRUE(kernels::programmatic_launch());
  setenv("QRT_CUDA_PDL", "0", 1);
  auto off = CudaBackend::create(0);
  unsetenv("QRT_CUDA_PDL");
  ASSERT_TRUE(off.ok()) << off.status().to_string();
  EXPECT_FALSE(kernels::programmatic_launch());
  setenv("QRT_CUDA_PDL", "on", 1);
  auto refused = CudaBackend::create(0);
  unsetenv("QRT_CUDA_PDL");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().to_string().find("QRT_CUDA_PDL=on: expected 0 or 1"), std::string::npos)
      << refused.status().to_string();
}

}  // namespace
}  // namespace qrt
