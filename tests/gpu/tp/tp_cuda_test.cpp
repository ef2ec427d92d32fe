// Tensor parallelism on the CUDA backend: every model of the CPU tensor-parallel tests (every architecture's
// features, several formats, KV heads and MoE experts split or replicated) split between 2 and 4 ranks that are
// threads, each with its own device and an NCCL communicator bootstrapped over the thread group. Every rank's
// logits must equal the single-rank CUDA model's within 1e-5 relative (the bound of the CPU tests: the split only
// reorders sums), and the single-rank CUDA model the CPU backend's within 1e-4. Models whose decode GEMVs quantize
// x to int8 limbs (Q4_0/1, Q5_0/1, Q8_0, Q4-6_K, AFQ4/8) get 1e-4 between ranks as well: a value the reordered sums
// move by 1e-7 can round to the neighbouring limb step, about 3e-5 of its block's largest value.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "backend/comm/communicator.hpp"
#include "backend/cpu_backend.hpp"
#include "backend/cuda_backend.hpp"
#include "kernels/linear/gemv_dp4a.hpp"
#include "models/transformer.hpp"
#include "test_support.hpp"
#include "tests/unit/tp/tp_test_models.hpp"

namespace qrt {
namespace {

struct RankResult {
  Status status;
  std::vector<float> logits;
};

std::vector<RankResult> run_ranks_on_devices(const test::TinyModel& m, int world) {
  auto bootstraps = make_thread_group_communicators(world);
  EXPECT_TRUE(bootstraps.ok()) << bootstraps.status().to_string();
  std::vector<RankResult> results(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      RankResult& out = results[static_cast<size_t>(r)];
      Communicator& bootstrap = *(*bootstraps)[static_cast<size_t>(r)];
      auto nccl = make_nccl_communicator(bootstrap, r);
      out.status = nccl.status();
      if (!out.status.ok()) return;
      auto backend = CudaBackend::create(r, nccl->get());
      out.status = (*nccl)->agree(backend.status());
      if (!out.status.ok()) return;
      TransformerOptions options;
      options.tp = {r, world};
      options.kv_type = KvType::kF32;  // as the single-rank model below
      auto model = Transformer::create(**backend, m.config, m.tensors, options);
      out.status = (*nccl)->agree(model.status());
      if (out.status.ok()) out.status = test::run(**model, &out.logits);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

class CudaTensorParallel : public testing::TestWithParam<test::Case> {};

TEST_P(CudaTensorParallel, EveryRankMatchesTheSingleRankModel) {
  QRT_REQUIRE_GPU();
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  if (devices < 2) GTEST_SKIP() << "needs 2 devices, this machine has " << devices;
  const test::TinyModel m = test::build_case_model(GetParam());
  ASSERT_FALSE(HasFatalFailure());
  alignas(16) static const uint8_t probe[64] = {};
  quant::QuantView probe_view;  // a well-aligned stand-in (AFQ: groups of 64, F16 scales)
  probe_view.data = probe;
  probe_view.scales = probe + 32;
  probe_view.biases = probe + 48;
  probe_view.rows = 1;
  probe_view.cols = GetParam().config.hidden;
  probe_view.params.group_size = 64;
  probe_view.params.scale_type = quant::ScalarType::kF16;
  const double rank_bound = kernels::gemv_dp4a_applies(GetParam().format, probe_view) ? 1e-4 : 1e-5;
  std::vector<float> cpu_logits, single;
  {
    CpuBackend cpu;
    TransformerOptions options;
    options.kv_type = KvType::kF32;
    auto model = Transformer::create(cpu, m.config, m.tensors, options);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    ASSERT_TRUE(test::run(**model, &cpu_logits).ok());
  }
  {
    auto gpu = CudaBackend::create(0);
    ASSERT_TRUE(gpu.ok()) << gpu.status().to_string();
    // An f32 cache everywhere: with a 16-bit one, a key that differs by an fp32 ulp between two runs can round to
    // neighbouring f16 values, which would blur these bounds (the 16-bit caches have their own tests).
    TransformerOptions options;
    options.kv_type = KvType::kF32;
    auto model = Transformer::create(**gpu, m.config, m.tensors, options);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    ASSERT_TRUE(test::run(**model, &single).ok());
  }
  // The integer-dot decode GEMV quantizes x (about 2e-5 per projection), grown through the layers: 1.9e-4 measured
  // for gemma2 in q8_0 (sqrt(hidden)-scaled embeddings, soft-capped logits); fp32 GEMVs stay within 1e-4.
  const double cpu_bound = kernels::gemv_dp4a_applies(GetParam().format, probe_view) ? 5e-4 : 1e-4;
  EXPECT_LT(test::max_rel_diff(single, cpu_logits), cpu_bound) << "single-rank CUDA against the CPU backend";
  for (int world : {2, 4}) {
    if (world > devices) continue;
    const auto results = run_ranks_on_devices(m, world);
    for (int r = 0; r < world; ++r) {
      const RankResult& got = results[static_cast<size_t>(r)];
      ASSERT_TRUE(got.status.ok()) << "world " << world << " rank " << r << ": " << got.status.to_string();
      EXPECT_LT(test::max_rel_diff(got.logits, single), rank_bound) << "world " << world << " rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, CudaTensorParallel, testing::ValuesIn(test::cases()),
                         [](const testing::TestParamInfo<test::Case>& i) { return i.param.name; });

}  // namespace
}  // namespace qrt
