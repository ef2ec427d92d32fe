// Runs the fuzz body on fresh random inputs and on random mutations of valid ones, so the fuzz target's
// checks run in every test pass even without a libFuzzer build.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "test_support.hpp"
#include "tokenizer_fuzz_body.hpp"

namespace qrt {
namespace {

std::string mutate(std::string text, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const size_t at = rng() % text.size();
    switch (rng() % 3) {
      case 0: text[at] = static_cast<char>(rng()); break;
      case 1: text.erase(at, 1 + rng() % 8); break;
      default: text.insert(at, 1, static_cast<char>(rng())); break;
    }
  }
  return text;
}

void run(uint8_t target, const std::string& input) {
  std::string data(1, static_cast<char>(target));
  data += input;
  fuzz::tokenizer_fuzz_one(reinterpret_cast<const uint8_t*>(data.data()), data.size());
}

TEST(TokenizerFuzzTest, RandomAndMutatedInputs) {
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  const std::string json = R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
    "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "Removed"},
    "normalizer": {"type": "Replace", "pattern": {"String": "x"}, "content": "ab"},
    "added_tokens": [{"id": 2, "content": "ab", "special": false}]})";
  const std::string ranks = "YQ== 0\nYg== 1\nYWI= 2\n";
  for (int i = 0; i < 2000; ++i) {
    const auto bytes = test::random_bytes(rng() % 200, rng());
    const std::string random(bytes.begin(), bytes.end());
    for (uint8_t target = 0; target < 5; ++target) run(target | static_cast<uint8_t>(rng() & 8), random);
    run(0, mutate(json, rng));
    run(2, mutate(ranks, rng));
    run(3, mutate("Hello <|end|> there\xE2\x96\x81\xF0\x9F\xA6\x99", rng));
    run(4, mutate(" a  a\xC3\xA9<s>", rng));
  }
}

}  // namespace
}  // namespace qrt
