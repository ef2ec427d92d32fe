// GGUF parse time for a file with 10,000 tensors (target: under 50 ms), and the same for a 32,000-token
// vocabulary. The file is built in memory by the minimal writer below; parsing reads it exactly as it would read
// a mapping, so the numbers are parse cost without disk I/O.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "loader/gguf.hpp"

namespace {

class MiniGgufWriter {
 public:
  template <class T>
  void put(T v) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void pad_to(size_t alignment) { bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, 0); }
  std::vector<uint8_t> bytes;
};

// `n_tensors` Q8_0 tensors of [rows=4, cols=64] (4 x 2 blocks x 34 bytes), named like a real model's, plus a few
// keys and a vocabulary of `n_tokens` strings with scores and types.
std::vector<uint8_t> make_gguf(int n_tensors, int n_tokens) {
  constexpr uint64_t kTensorBytes = 4 * 2 * 34;
  constexpr uint64_t kPadded = (kTensorBytes + 31) / 32 * 32;
  MiniGgufWriter w;
  w.bytes = {'G', 'G', 'U', 'F'};
  w.put<uint32_t>(3);
  w.put<int64_t>(n_tensors);
  w.put<int64_t>(5);
  w.put_string("general.architecture");
  w.put<int32_t>(8);
  w.put_string("llama");
  w.put_string("llama.block_count");
  w.put<int32_t>(4);
  w.put<uint32_t>(static_cast<uint32_t>(n_tensors / 9));
  w.put_string("tokenizer.ggml.tokens");
  w.put<int32_t>(9);
  w.put<int32_t>(8);
  w.put<uint64_t>(static_cast<uint64_t>(n_tokens));
  for (int i = 0; i < n_tokens; ++i) w.put_string("tok" + std::to_string(i));
  w.put_string("tokenizer.ggml.scores");
  w.put<int32_t>(9);
  w.put<int32_t>(6);
  w.put<uint64_t>(static_cast<uint64_t>(n_tokens));
  for (int i = 0; i < n_tokens; ++i) w.put<float>(-static_cast<float>(i));
  w.put_string("tokenizer.ggml.token_type");
  w.put<int32_t>(9);
  w.put<int32_t>(5);
  w.put<uint64_t>(static_cast<uint64_t>(n_tokens));
  for (int i = 0; i < n_tokens; ++i) w.put<int32_t>(1);
  static const char* kParts[] = {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate",
                                 "ffn_up", "ffn_down", "attn_norm", "ffn_norm"};
  for (int i = 0; i < n_tensors; ++i) {
    w.put_string("blk." + std::to_string(i / 9) + "." + kParts[i % 9] + ".weight");
    w.put<uint32_t>(2);
    w.put<int64_t>(64);
    w.put<int64_t>(4);
    w.put<int32_t>(8);  // Q8_0
    w.put<uint64_t>(static_cast<uint64_t>(i) * kPadded);
  }
  w.pad_to(32);
  w.bytes.resize(w.bytes.size() + static_cast<size_t>(n_tensors) * kPadded, 0x11);
  return w.bytes;
}

void parse(benchmark::State& state, int n_tensors, int n_tokens) {
  const std::vector<uint8_t> bytes = make_gguf(n_tensors, n_tokens);
  for (auto _ : state) {
    auto f = qrt::parse_gguf(qrt::ByteSpan{bytes.data(), bytes.size()}, "bench.gguf");
    if (!f.ok()) {
      state.SkipWithError(f.status().to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(f->tensors.size());
  }
  state.counters["tensors"] = n_tensors;
  state.counters["file_MB"] = static_cast<double>(bytes.size()) / 1e6;
  state.SetItemsProcessed(state.iterations() * n_tensors);
}

void BM_GgufParse10kTensors(benchmark::State& state) { parse(state, 10000, 0); }
void BM_GgufParse10kTensors32kVocab(benchmark::State& state) { parse(state, 10000, 32000); }

}  // namespace

BENCHMARK(BM_GgufParse10kTensors)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GgufParse10kTensors32kVocab)->Unit(benchmark::kMillisecond);
