// What one decode step costs the host on the CUDA backend, counted by the SIMT layer (simt/simt.hpp): after the
// first step has been captured, one graph launch per token whatever the depth of the model (its kernels run inside
// the graph: their count per layer is stated and bounded), the sampling kernels, one real wait for the device, 4
// bytes copied back (the sampled id) and one small upload (token id, position, slot, key count, the draw). Op by
// op (TransformerOptions::graphs off) the same step launches every kernel from the host. Needs the layer's
// counters, so it runs under gpu-sim only.
#include <cstdio>
#include <list>
#include <memory>
#include <vector>

#include "backend_pair.hpp"
#include "paged_batch.hpp"
#include "requantize.hpp"
#include "models/transformer.hpp"
#include "tiny_model.hpp"

#if defined(QRT_SIMT)
#include "simt/simt.hpp"
#endif

namespace qrt {
namespace {

using HostCosts = test::BackendPair;

#if defined(QRT_SIMT)
// Runs a 4-token prompt, then measures one decode step (forward keeping the logits on the device, then sampling).
// `format`: the model's matrices (Q8_0 takes the integer-dot GEMV, whose projections sharing an input are one
// launch; F32 the float GEMV, one launch per projection).
simt::StreamCounters decode_step_cost(Backend& gpu, int layers, int steps_before, bool graphs = true,
                                      uint64_t* graph_operations = nullptr,
                                      quant::FormatId format = quant::FormatId::kF32) {
  ModelConfig c = test::tiny_llama_config();
  c.layers = layers;
  if (format != quant::FormatId::kF32) c.head_dim = 32;  // a head is whole activation blocks (the merge quantizes)
  auto m = test::make_tiny_model(c);
  std::list<quant::QuantBuffers> storage;
  if (format != quant::FormatId::kF32) test::requantize(m, format, storage);
  TransformerOptions options;
  options.graphs = graphs;
  auto model = Transformer::create(gpu, m.config, m.tensors, options);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  if (!model.ok()) return {};
  auto seq = (*model)->new_sequence(32);
  EXPECT_TRUE(seq.ok());
  const std::vector<int32_t> prompt = {1, 7, 9, 4};
  EXPECT_TRUE((*model)->forward_keep_logits(**seq, prompt).ok());
  SampleStep step;  // greedy
  step.u01 = {0.5};
  int32_t id = 0;
  EXPECT_TRUE((*model)->sample_last(**seq, step, &id).ok());
  // One step first: it captures the graph (a one-time cost, not what every token pays).
  for (int i = 0; i < 1 + steps_before; ++i) {
    EXPECT_TRUE((*model)->forward_keep_logits(**seq, std::span(&id, 1)).ok());
    EXPECT_TRUE((*model)->sample_last(**seq, step, &id).ok());
  }
  EXPECT_TRUE(gpu.synchronize().ok());
  const simt::StreamCounters before = simt::device_counters(0);
  EXPECT_TRUE((*model)->forward_keep_logits(**seq, std::span(&id, 1)).ok());
  EXPECT_TRUE((*model)->sample_last(**seq, step, &id).ok());
  if (graph_operations != nullptr) *graph_operations = (*model)->decode_graph_operations(**seq);
  return simt::device_counters(0) - before;
}
#endif

TEST_F(HostCosts, OneDecodeStep) {
#if !defined(QRT_SIMT)
  GTEST_SKIP() << "counting launches needs the SIMT layer's counters (label gpu-sim)";
#else
  const simt::StreamCounters one = decode_step_cost(*gpu_, 1, 0);
  uint64_t two_operations = 0;  // what the captured graph says it holds (bench-model's launches per token)
  const simt::StreamCounters two = decode_step_cost(*gpu_, 2, 0, true, &two_operations);
  const simt::StreamCounters two_later = decode_step_cost(*gpu_, 2, 9);
  const simt::StreamCounters three = decode_step_cost(*gpu_, 3, 0);
  const uint64_t per_layer = two.graph_kernel_nodes - one.graph_kernel_nodes;
  const uint64_t outside_layers = one.graph_kernel_nodes - per_layer;
  std::printf("[ costs    ] decode step: %llu graph launch of %llu kernels per layer + %llu (embedding, first norm, "
              "output), %llu kernels launched by the host (sampling), %llu calls that wait for the device, "
              "%llu bytes back, %llu bytes up in %llu copies\n",
              static_cast<unsigned long long>(one.graph_launches), static_cast<unsigned long long>(per_layer),
              static_cast<unsigned long long>(outside_layers), static_cast<unsigned long long>(one.kernel_launches),
              static_cast<unsigned long long>(one.host_sync_calls),
              static_cast<unsigned long long>(one.memcpy_device_to_host_bytes),
              static_cast<unsigned long long>(one.memcpy_host_to_device_bytes),
              static_cast<unsigned long long>(one.memcpy_host_to_device));
  for (const auto* c : {&one, &two, &two_later, &three}) {
    EXPECT_EQ(c->graph_launches, 1u) << "one graph launch per token";
    EXPECT_EQ(c->kernel_launches, one.kernel_launches) << "the host launches no kernel per layer";
    EXPECT_EQ(c->memcpy_device_to_device, 0u);
  }
  EXPECT_EQ(three.graph_kernel_nodes - two.graph_kernel_nodes, per_layer) << "every layer runs alike";
  EXPECT_EQ(two_operations, two.graph_kernel_nodes) << "the graph's operations are the kernels one launch ran";
  EXPECT_EQ(two_later.graph_kernel_nodes, two.graph_kernel_nodes) << "a later step runs as many kernels";
  // q/k/v (one launch), rope + KV write, attention (split, merge), o, add + norm, gate/up (one launch), silu, down,
  // add + the next norm: 10 kernels per layer with F32 weights (rope of q and k is fused with the KV write, the
  // residual adds with the norms after them; the model's first norm runs before the layers). Further fusion brings
  // it down; it must not grow.
  EXPECT_LE(per_layer, 10u);
  // With Q8_0 weights the integer-dot GEMV runs q, k and v as one launch and gate and up as another, and every
  // GEMV input is quantized by the kernel that writes it (the norms, the attention's merge, silu): 10.
  const uint64_t q8_per_layer =
      decode_step_cost(*gpu_, 2, 0, true, nullptr, quant::FormatId::kQ8_0).graph_kernel_nodes -
      decode_step_cost(*gpu_, 1, 0, true, nullptr, quant::FormatId::kQ8_0).graph_kernel_nodes;
  std::printf("[ costs    ] decode step with Q8_0 weights: %llu kernels per layer\n",
              static_cast<unsigned long long>(q8_per_layer));
  EXPECT_LE(q8_per_layer, 10u);
  EXPECT_LE(one.kernel_launches, 2u) << "sampling only";
  // One real wait (for the sampled id; the staging ring's event checks find their copies done). At most: the
  // device may have finished by itself before the host asked (it runs queued work after a delay).
  EXPECT_LE(one.host_syncs, 1u) << "decode waits for the device once: the sampled id";
  EXPECT_EQ(one.memcpy_device_to_host_bytes, sizeof(int32_t)) << "only the id comes back";
  EXPECT_LE(one.memcpy_host_to_device, 2u) << "the step block and the draw";
  EXPECT_LE(one.memcpy_host_to_device_bytes, 64u) << "the token id, its position, slot, key count, the draw";

  // Op by op: the same kernels, each launched by the host.
  const simt::StreamCounters eager_one = decode_step_cost(*gpu_, 1, 0, false);
  const simt::StreamCounters eager_two = decode_step_cost(*gpu_, 2, 0, false);
  EXPECT_EQ(eager_one.graph_launches, 0u);
  EXPECT_EQ(eager_two.kernel_launches - eager_one.kernel_launches, per_layer);
  EXPECT_EQ(eager_one.kernel_launches, one.graph_kernel_nodes + one.kernel_launches);
#endif
}

#if defined(QRT_SIMT)
// Kernels the host launches for one batched decode step (decode_batch_keep_logits, graphs off: a replayed graph
// launches none of its kernels from the host) of `sequences` paged sequences of one pool, after prompts of
// different lengths and one step that sizes the batch's buffers.
// `format` other than F32: a 256-wide model (whole steps of every integer kernel) with its matrices in it.
uint64_t batched_step_launches(Backend& gpu, int layers, int sequences,
                               quant::FormatId format = quant::FormatId::kF32) {
  ModelConfig c = test::tiny_llama_config();
  c.layers = layers;
  if (format != quant::FormatId::kF32) {
    c.hidden = 256;
    c.head_dim = 64;
    c.ffn = 512;
  }
  auto m = test::make_tiny_model(c);
  std::list<quant::QuantBuffers> storage;
  if (format != quant::FormatId::kF32) test::requantize(m, format, storage);
  test::PagedBatch b;
  if (!test::start_paged_batch(gpu, m, sequences, &b)) return 0;
  DecodeBatch batch;
  EXPECT_TRUE(b.model->decode_batch_keep_logits(batch, b.seqs, b.tokens).ok());
  EXPECT_TRUE(gpu.synchronize().ok());
  const simt::StreamCounters before = simt::device_counters(0);
  EXPECT_TRUE(b.model->decode_batch_keep_logits(batch, b.seqs, b.tokens).ok());
  return (simt::device_counters(0) - before).kernel_launches;
}
#endif

// A batched decode step runs RoPE + the KV write and attention once per layer for all its sequences (one pool,
// Backend::attention_batch), not once per sequence: the kernels per layer do not grow with the batch.
TEST_F(HostCosts, BatchedDecodeStepLaunchesPerLayerNotPerSequence) {
#if !defined(QRT_SIMT)
  GTEST_SKIP() << "counting launches needs the SIMT layer's counters (label gpu-sim)";
#else
  const uint64_t two = batched_step_launches(*gpu_, 2, 2) - batched_step_launches(*gpu_, 1, 2);
  const uint64_t five = batched_step_launches(*gpu_, 2, 5) - batched_step_launches(*gpu_, 1, 5);
  std::printf("[ costs    ] batched decode step: %llu kernels per layer for 2 sequences, %llu for 5\n",
              static_cast<unsigned long long>(two), static_cast<unsigned long long>(five));
  EXPECT_GT(two, 0u) << "the step's kernels are launched by the host";
  EXPECT_EQ(five, two) << "kernels per layer must not grow with the sequences in the step";
  EXPECT_LE(two, 10u) << "the one-sequence step's kernels per layer (OneDecodeStep)";
#endif
}

// The int8 tensor-core GEMM (set_mma_gemm) in a batched decode step of Q8_0 weights: each projection is its own
// GEMM (the integer-dot GEMV runs q/k/v and gate/up as one launch each: +3) and each of the layer's four inputs is
// rearranged once for it (+4), so a layer runs 17 kernels instead of 10; still the same for 2 and 5 sequences.
// (Producers writing the rearranged tiles themselves and one launch per shared input would bring it back to 10.)
TEST_F(HostCosts, BatchedDecodeOnTheTensorCoresLaunchesPerLayer) {
#if !defined(QRT_SIMT)
  GTEST_SKIP() << "counting launches needs the SIMT layer's counters (label gpu-sim)";
#else
  auto created = CudaBackend::create(0);
  ASSERT_TRUE(created.ok()) << created.status().to_string();
  std::unique_ptr<CudaBackend> mma = std::move(*created);
  mma->set_mma_gemm(true);
  const quant::FormatId q8 = quant::FormatId::kQ8_0;
  const uint64_t gemv = batched_step_launches(*gpu_, 2, 2, q8) - batched_step_launches(*gpu_, 1, 2, q8);
  const uint64_t two = batched_step_launches(*mma, 2, 2, q8) - batched_step_launches(*mma, 1, 2, q8);
  const uint64_t five = batched_step_launches(*mma, 2, 5, q8) - batched_step_launches(*mma, 1, 5, q8);
  std::printf("[ costs    ] batched decode step, q8_0: %llu kernels per layer with the integer-dot GEMV, %llu on the "
              "tensor cores (2 sequences), %llu (5)\n",
              static_cast<unsigned long long>(gemv), static_cast<unsigned long long>(two),
              static_cast<unsigned long long>(five));
  EXPECT_EQ(gemv, 10u);
  EXPECT_EQ(two, 17u) << "q, k, v and gate, up as separate GEMMs (+3), four rearranged inputs (+4)";
  EXPECT_EQ(five, two);
  EXPECT_TRUE(mma->synchronize().ok());
#endif
}

}  // namespace
}  // namespace qrt
