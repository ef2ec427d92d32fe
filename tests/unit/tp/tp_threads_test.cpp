// A sliced model run by ranks that are threads: each thread owns a CpuBackend whose all-reduce goes through the
// in-process thread-group communicator, loads only its slices and runs the same tokens; its logits must equal the single-rank
// model's within 1e-5 relative, for every architecture's features, several formats, 2 and 4 ranks, KV heads
// split and replicated, MoE experts split and replicated. Impossible splits must fail on every rank alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "models/transformer.hpp"
#include "backend/cpu_backend.hpp"
#include "backend/comm/communicator.hpp"
#include "test_support.hpp"
#include "tests/unit/tp/tp_test_models.hpp"

namespace qrt {
namespace {
using quant::FormatId;
using test::Case;
using test::base_config;
using test::max_rel_diff;
using test::requantize;
using test::run;


struct RankResult {
  Status status;
  std::vector<float> logits;
};

// Every rank of `world` as a thread; a build failure anywhere is agreed on before anyone runs collectives.
std::vector<RankResult> run_tensor_parallel(const test::TinyModel& m, int world) {
  auto comms = make_thread_group_communicators(world);
  EXPECT_TRUE(comms.ok()) << comms.status().to_string();
  std::vector<RankResult> results(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      Communicator& comm = *(*comms)[static_cast<size_t>(r)];
      CpuBackend backend(&comm);
      TransformerOptions options;
      options.tp = {r, world};
      auto model = Transformer::create(backend, m.config, m.tensors, options);
      RankResult& out = results[static_cast<size_t>(r)];
      out.status = comm.agree(model.status());
      if (out.status.ok()) out.status = run(**model, &out.logits);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

class TensorParallelThreads : public testing::TestWithParam<Case> {};

TEST_P(TensorParallelThreads, EveryRankMatchesTheSingleRankModel) {
  const Case& c = GetParam();
  test::TinyModel m = test::build_case_model(c);
  if (HasFatalFailure()) return;
  std::vector<float> reference;
  {
    CpuBackend backend;
    auto model = Transformer::create(backend, m.config, m.tensors);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const Status ran = run(**model, &reference);
    ASSERT_TRUE(ran.ok()) << ran.to_string();
  }
  for (int world : {2, 4}) {
    const auto results = run_tensor_parallel(m, world);
    for (int r = 0; r < world; ++r) {
      const RankResult& got = results[static_cast<size_t>(r)];
      ASSERT_TRUE(got.status.ok()) << "world " << world << " rank " << r << ": " << got.status.to_string();
      EXPECT_LT(max_rel_diff(got.logits, reference), 1e-5) << "world " << world << " rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, TensorParallelThreads, testing::ValuesIn(test::cases()),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(TensorParallelThreads, MisalignedRowParallelSplitIsAnErrorOnEveryRank) {
  // Q4_K blocks are 256 wide: an MLP of width 512 splits in two but not in four (the 1024 attention columns
  // of the o projection split in four).
  ModelConfig c = base_config("llama");
  c.hidden = 256;
  c.heads = 8;
  c.head_dim = 128;
  c.ffn = 512;
  test::TinyModel m = test::make_tiny_model(c);
  requantize(m, FormatId::kQ4_K, 0);
  ASSERT_FALSE(HasFatalFailure());
  for (const RankResult& r : run_tensor_parallel(m, 2)) EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  const auto four = run_tensor_parallel(m, 4);
  for (const RankResult& r : four) {
    ASSERT_FALSE(r.status.ok());
    EXPECT_EQ(r.status.message(), four[0].status.message()) << "the same error on every rank";
  }
  const std::string message = four[0].status.to_string();
  for (const char* part : {"blk.0.ffn_down", "q4_k", "[256, 512]", "4 ranks", "multiples of 256"})
    EXPECT_NE(message.find(part), std::string::npos) << part << " missing from: " << message;
}

TEST(TensorParallelThreads, HeadsThatCannotBeSharedAreAnError) {
  ModelConfig c = base_config("llama");
  c.heads = 6;
  c.kv_heads = 3;
  c.head_dim = 16;
  c.hidden = 96;
  test::TinyModel m = test::make_tiny_model(c);
  const auto results = run_tensor_parallel(m, 4);  // 6 heads among 4 ranks
  ASSERT_FALSE(results[0].status.ok());
  EXPECT_NE(results[0].status.message().find("heads"), std::string::npos) << results[0].status.to_string();
}

// A rank that fails between collectives cancels the group: the ranks waiting for it get an error, not a hang.
TEST(ThreadGroupCommunicator, CancelReleasesWaitingRanks) {
  auto comms = make_thread_group_communicators(3);
  ASSERT_TRUE(comms.ok());
  std::vector<Status> got(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      Communicator& comm = *(*comms)[static_cast<size_t>(r)];
      std::vector<float> x(8, static_cast<float>(r + 1));
      got[static_cast<size_t>(r)] = comm.all_reduce_sum(x.data(), x.size());  // all three: sums to 6
      if (got[static_cast<size_t>(r)].ok() && x[0] != 6.0f) got[static_cast<size_t>(r)] = internal_error("bad sum");
      if (r == 2) {
        comm.cancel_group();  // rank 2 fails here and never joins the next collective
        return;
      }
      if (got[static_cast<size_t>(r)].ok()) got[static_cast<size_t>(r)] = comm.all_reduce_sum(x.data(), x.size());
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_TRUE(got[2].ok()) << got[2].to_string();
  for (int r : {0, 1}) {
    EXPECT_FALSE(got[static_cast<size_t>(r)].ok()) << "rank " << r;
    EXPECT_NE(got[static_cast<size_t>(r)].message().find("cancelled"), std::string::npos);
  }
}

}  // namespace
}  // namespace qrt
