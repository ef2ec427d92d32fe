// What one decode step costs the host on the CUDA backend, counted by the SIMT layer (simt/simt.hpp): kernel
// launches per layer (the same for every layer and every step: nothing grows with the sequence), one real wait for
// the device and 4 bytes copied back (the sampled id) per token, and only the token id and position uploaded.
// These are the figures the GPU speed work (CUDA graphs: one graph launch per step) must bring down; today's are
// printed. Needs the layer's counters, so it runs under gpu-sim only.
#include <cstdio>

#include "backend_pair.hpp"
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
simt::StreamCounters decode_step_cost(Backend& gpu, int layers, int steps_before) {
  ModelConfig c = test::tiny_llama_config();
  c.layers = layers;
  auto m = test::make_tiny_model(c);
  auto model = Transformer::create(gpu, m.config, m.tensors);
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
  for (int i = 0; i < steps_before; ++i) {
    EXPECT_TRUE((*model)->forward_keep_logits(**seq, std::span(&id, 1)).ok());
    EXPECT_TRUE((*model)->sample_last(**seq, step, &id).ok());
  }
  EXPECT_TRUE(gpu.synchronize().ok());
  const simt::StreamCounters before = simt::device_counters(0);
  EXPECT_TRUE((*model)->forward_keep_logits(**seq, std::span(&id, 1)).ok());
  EXPECT_TRUE((*model)->sample_last(**seq, step, &id).ok());
  return simt::device_counters(0) - before;
}
#endif

TEST_F(HostCosts, OneDecodeStep) {
#if !defined(QRT_SIMT)
  GTEST_SKIP() << "counting launches needs the SIMT layer's counters (label gpu-sim)";
#else
  const simt::StreamCounters one = decode_step_cost(*gpu_, 1, 0);
  const simt::StreamCounters two = decode_step_cost(*gpu_, 2, 0);
  const simt::StreamCounters two_later = decode_step_cost(*gpu_, 2, 9);
  const simt::StreamCounters three = decode_step_cost(*gpu_, 3, 0);
  const uint64_t per_layer = two.kernel_launches - one.kernel_launches;
  const uint64_t outside = one.kernel_launches - per_layer;
  std::printf("[ costs    ] decode step: %llu launches per layer + %llu (embedding, final norm, output, sampling), "
              "%llu calls that wait for the device, %llu bytes back, %llu bytes up\n",
              static_cast<unsigned long long>(per_layer), static_cast<unsigned long long>(outside),
              static_cast<unsigned long long>(one.host_sync_calls),
              static_cast<unsigned long long>(one.memcpy_device_to_host_bytes),
              static_cast<unsigned long long>(one.memcpy_host_to_device_bytes));
  EXPECT_EQ(three.kernel_launches - two.kernel_launches, per_layer) << "every layer launches alike";
  EXPECT_EQ(two_later.kernel_launches, two.kernel_launches) << "a later step launches as many";
  // The current transformer issues one op per kernel: norm, q, k, v, 2 rope, attention, o, add, norm, gate, up,
  // silu, down, add (the KV write is two copies). Graphs (issue: GPU decode designed for the roofline) will replace
  // this count by one graph launch per step; until then it must not grow.
  EXPECT_LE(per_layer, 15u);
  EXPECT_EQ(one.graph_launches, 0u);
  // One real wait (for the sampled id; the staging ring's event checks find their copies done). At most: the
  // device may have finished by itself before the host asked (it runs queued work after a delay).
  EXPECT_LE(one.host_syncs, 1u) << "decode waits for the device once: the sampled id";
  EXPECT_EQ(one.memcpy_device_to_host_bytes, sizeof(int32_t)) << "only the id comes back";
  EXPECT_LE(one.memcpy_host_to_device_bytes, 64u) << "the token id, its position, the draw";
#endif
}

}  // namespace
}  // namespace qrt
