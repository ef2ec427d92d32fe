// A sliced model run by ranks that are threads: each thread owns a CpuBackend whose all-reduce goes through an
// in-process communicator, loads only its slices and runs the same tokens; its logits must equal the single-rank
// model's within 1e-5 relative, for every architecture's features, several formats, 2 and 4 ranks, KV heads
// split and replicated, MoE experts split and replicated. Impossible splits must fail on every rank alike.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "models/transformer.hpp"
#include "runtime/src/backend/cpu_backend.hpp"
#include "runtime/src/comm/communicator.hpp"
#include "test_support.hpp"
#include "tests/unit/model/tiny_model.hpp"

namespace qrt {
namespace {
using quant::FormatId;

// State shared by the ranks of one in-process group.
struct ThreadGroup {
  explicit ThreadGroup(int world) : world(world), barrier(world), slots(static_cast<size_t>(world)) {}
  int world;
  std::barrier<> barrier;
  std::vector<const void*> slots;
};

// One rank of a ThreadGroup. Sums in rank order, so every rank gets bit-identical results.
class ThreadRankCommunicator final : public Communicator {
 public:
  ThreadRankCommunicator(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world() const override { return group_.world; }
  int local_rank() const override { return rank_; }
  std::string_view kind() const override { return "threads"; }

  Status all_reduce_sum(float* data, size_t n, void*) override {
    group_.slots[static_cast<size_t>(rank_)] = data;
    group_.barrier.arrive_and_wait();
    std::vector<float> sum(n, 0.0f);
    for (const void* slot : group_.slots)
      for (size_t i = 0; i < n; ++i) sum[i] += static_cast<const float*>(slot)[i];
    group_.barrier.arrive_and_wait();  // every rank has read every slot before any is overwritten
    std::memcpy(data, sum.data(), n * sizeof(float));
    return ok_status();
  }
  Status broadcast(void* data, size_t bytes, int root) override {
    group_.slots[static_cast<size_t>(rank_)] = data;
    group_.barrier.arrive_and_wait();
    if (rank_ != root) std::memcpy(data, group_.slots[static_cast<size_t>(root)], bytes);
    group_.barrier.arrive_and_wait();
    return ok_status();
  }
  Status agree(const Status& local) override {
    group_.slots[static_cast<size_t>(rank_)] = &local;
    group_.barrier.arrive_and_wait();
    Status first = ok_status();
    for (int r = 0; r < group_.world && first.ok(); ++r) {
      const Status& s = *static_cast<const Status*>(group_.slots[static_cast<size_t>(r)]);
      if (!s.ok()) first = Status(s.code(), "rank " + std::to_string(r) + ": " + s.message());
    }
    group_.barrier.arrive_and_wait();
    return first;
  }
  [[noreturn]] void abort(int) override { std::abort(); }

 private:
  ThreadGroup& group_;
  int rank_;
};

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(double(a[i]) - b[i]));
    den = std::max(den, std::fabs(double(b[i])));
  }
  return num / den;
}

// Requantizes every matrix of the model (expert stacks one expert at a time, as backends store them).
void requantize(test::TinyModel& m, FormatId format, int group_size) {
  quant::QuantParams p;
  p.group_size = group_size;
  p.scale_type = quant::ScalarType::kF16;
  for (auto& [name, t] : m.tensors) {
    if (t.shape.size() < 2) continue;
    const int64_t rows = t.shape[t.shape.size() - 2], cols = t.shape.back();
    const int64_t matrices = t.rows() / rows;
    const float* x = reinterpret_cast<const float*>(t.data.data);
    std::vector<uint8_t>&data = m.storage.emplace_back(), &scales = m.storage.emplace_back(),
                        &biases = m.storage.emplace_back();
    for (int64_t e = 0; e < matrices; ++e) {
      auto q = cpu::quantize(format, x + e * rows * cols, rows, cols, p);
      ASSERT_TRUE(q.ok()) << name << ": " << q.status().to_string();
      data.insert(data.end(), q->data.begin(), q->data.end());
      scales.insert(scales.end(), q->scales.begin(), q->scales.end());
      biases.insert(biases.end(), q->biases.begin(), q->biases.end());
    }
    t.format = format;
    t.params = p;
    t.data = {data.data(), data.size()};
    t.scales = {scales.data(), scales.size()};
    t.biases = {biases.data(), biases.size()};
  }
}

std::vector<int32_t> some_tokens(int n, int vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = (i * 13 + 3) % vocab;
  return t;
}

// Prompt as a batch, then two single steps: logits of every position.
Status run(Transformer& model, std::vector<float>* out) {
  const auto tokens = some_tokens(9, model.config().vocab_size);
  QRT_ASSIGN_OR_RETURN(auto seq, model.new_sequence(16));
  std::vector<float> logits;
  QRT_TRY(model.forward(*seq, std::span(tokens).first(7), LogitsFor::kAll, &logits));
  *out = logits;
  for (size_t i = 7; i < tokens.size(); ++i) {
    QRT_TRY(model.forward(*seq, std::span(tokens).subspan(i, 1), LogitsFor::kLast, &logits));
    out->insert(out->end(), logits.begin(), logits.end());
  }
  return ok_status();
}

struct RankResult {
  Status status;
  std::vector<float> logits;
};

// Every rank of `world` as a thread; a build failure anywhere is agreed on before anyone runs collectives.
std::vector<RankResult> run_tensor_parallel(const test::TinyModel& m, int world) {
  ThreadGroup group(world);
  std::vector<RankResult> results(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      ThreadRankCommunicator comm(group, r);
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

struct Case {
  std::string name;
  ModelConfig config;
  FormatId format;
  int group_size;
};

ModelConfig base_config(const std::string& arch) {
  ModelConfig c = test::tiny_llama_config();
  c.architecture = arch;
  c.hidden = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.ffn = 128;
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  out.push_back({"llama_f32", base_config("llama"), FormatId::kF32, 0});
  ModelConfig mistral = base_config("mistral");
  mistral.sliding_window = 4;
  mistral.kv_heads = 4;
  out.push_back({"mistral_q8_0", mistral, FormatId::kQ8_0, 0});
  ModelConfig qwen2 = base_config("qwen2");
  qwen2.attention_bias = qwen2.attention_out_bias = qwen2.mlp_bias = true;  // reduced biases too
  qwen2.tied_embeddings = true;
  out.push_back({"qwen2_biases_q4_0", qwen2, FormatId::kQ4_0, 0});
  ModelConfig qwen3 = base_config("qwen3");
  qwen3.qk_norm = true;
  out.push_back({"qwen3_afq4", qwen3, FormatId::kAFQ4, 32});
  out.push_back({"llama_mxfp4", base_config("llama"), FormatId::kMXFP4, 0});
  ModelConfig mixtral = base_config("mixtral");
  mixtral.experts = 4;
  mixtral.experts_used = 2;
  mixtral.expert_ffn = 128;  // 64 or 32 per rank: whole Q8_0 blocks, so the experts are split
  out.push_back({"mixtral_split_experts_q8_0", mixtral, FormatId::kQ8_0, 0});
  ModelConfig qwen3moe = base_config("qwen3moe");
  qwen3moe.qk_norm = true;
  qwen3moe.experts = 4;
  qwen3moe.experts_used = 2;
  qwen3moe.normalize_topk = false;
  qwen3moe.expert_ffn = 96;  // 48 or 24 per rank: not whole Q8_0 blocks, so the experts are replicated
  out.push_back({"qwen3moe_replicated_experts_q8_0", qwen3moe, FormatId::kQ8_0, 0});
  return out;
}

class TensorParallelThreads : public testing::TestWithParam<Case> {};

TEST_P(TensorParallelThreads, EveryRankMatchesTheSingleRankModel) {
  const Case& c = GetParam();
  test::TinyModel m = test::make_tiny_model(c.config);
  // The tiny model builder adds q/k/v biases only; the row-parallel o and down biases matter most here.
  for (int l = 0; l < c.config.layers; ++l) {
    using names::LayerTensor;
    if (c.config.attention_out_bias)
      m.add(names::bias_of(names::layer_tensor(l, LayerTensor::kAttnOutput)), {c.config.hidden}, 0.5f);
    if (c.config.mlp_bias) {
      m.add(names::bias_of(names::layer_tensor(l, LayerTensor::kFfnGate)), {c.config.ffn}, 0.5f);
      m.add(names::bias_of(names::layer_tensor(l, LayerTensor::kFfnUp)), {c.config.ffn}, 0.5f);
      m.add(names::bias_of(names::layer_tensor(l, LayerTensor::kFfnDown)), {c.config.hidden}, 0.5f);
    }
  }
  if (c.format != FormatId::kF32) requantize(m, c.format, c.group_size);
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

INSTANTIATE_TEST_SUITE_P(Architectures, TensorParallelThreads, testing::ValuesIn(cases()),
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

}  // namespace
}  // namespace qrt
