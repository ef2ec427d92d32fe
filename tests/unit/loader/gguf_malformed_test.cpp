// Malformed GGUF: valid files corrupted one thing at a time. Every case must give a non-ok Status whose message
// names the file and what was wrong; none may crash, hang or allocate in proportion to a claimed count.
#include <gtest/gtest.h>

#include <random>

#include "gguf_builder.hpp"
#include "loader/gguf.hpp"
#include "loader_test_util.hpp"

namespace qrt {
namespace {

using test::FailsWith;
using test::GgufBuilder;

// Parses an exact-size copy, so any read past the end is a real out-of-bounds access under sanitizers.
Status parse_copy(const std::vector<uint8_t>& bytes, size_t size) {
  std::vector<uint8_t> copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
  return parse_gguf(ByteSpan{copy.data(), copy.size()}, "bad.gguf").status();
}
Status parse_bytes(const std::vector<uint8_t>& bytes) { return parse_copy(bytes, bytes.size()); }

TEST(GgufMalformed, TruncatedAtEveryByte) {
  GgufBuilder g = test::small_model(21);
  const std::vector<uint8_t> bytes = g.build();
  // The file is valid from the end of the last tensor on (the rest is padding).
  const uint64_t needed = g.at["t2.data"] + 16;
  for (size_t n = 0; n < bytes.size(); ++n) {
    const Status s = parse_copy(bytes, n);
    if (n >= needed) {
      EXPECT_TRUE(s.ok()) << n << ": " << s.to_string();
    } else {
      ASSERT_TRUE(FailsWith(s, {"gguf 'bad.gguf'"})) << "truncated to " << n;
      EXPECT_EQ(s.code(), ErrorCode::kFormatError) << n << ": " << s.to_string();
    }
  }
}

TEST(GgufMalformed, TruncationNamesTheStructure) {
  GgufBuilder g = test::small_model(22);
  const std::vector<uint8_t> bytes = g.build();
  EXPECT_TRUE(FailsWith(parse_copy(bytes, 3), {"too short for the magic"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, 6), {"version"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["n_kv"] + 2), {"metadata key count"}));
  // Early cuts leave too few bytes for the claimed key count; that check comes first.
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["kv1.key"] + 10), {"metadata key count 6 cannot fit"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["kv5.key"] + 10), {"metadata key #5: key at byte", "claims 9 bytes but only 2 remain"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["kv5.type"] + 1), {"metadata key #5", "value type"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["kv5.value"]), {"metadata key #5 'test.flag'", "bool value"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["kv4.value"] + 3),
                        {"metadata key #4 'tokenizer.ggml.token_type'", "array element type"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["kv3.value"] + 20),
                        {"metadata key #3 'tokenizer.ggml.tokens'", "element"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["ti0.name"] + 4), {"tensor info #0", "tensor name"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["ti1.n_dims"]), {"tensor info #1 'blk.0.attn_q.weight'", "n_dims"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["ti1.ne"] + 9), {"tensor info #1", "ne"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["ti2.type"] + 2), {"tensor info #2", "ggml type"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["ti2.offset"] + 7), {"tensor info #2", "data offset"}));
  EXPECT_TRUE(FailsWith(parse_copy(bytes, g.at["t1.data"] + 100),
                        {"tensor 'blk.0.attn_q.weight'", "past the end of the file"}));
}

TEST(GgufMalformed, BadMagicAndVersions) {
  std::vector<uint8_t> bytes = test::small_model(23).build();
  auto with_u32 = [&](size_t at, uint32_t v) {
    std::vector<uint8_t> b = bytes;
    GgufBuilder::patch(b, at, v);
    return parse_bytes(b);
  };
  EXPECT_TRUE(FailsWith(with_u32(0, 0x46554747u ^ 0x20u), {"not a GGUF file", "magic is 'gGUF'"}));
  EXPECT_TRUE(FailsWith(with_u32(0, 0x00010203u), {"magic is '\\x03\\x02\\x01\\x00'"}));
  EXPECT_TRUE(FailsWith(with_u32(4, 0), {"version 0"}));
  const Status v1 = with_u32(4, 1);
  EXPECT_EQ(v1.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(FailsWith(v1, {"v1 is no longer supported"}));
  const Status v4 = with_u32(4, 4);
  EXPECT_EQ(v4.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(FailsWith(v4, {"version 4"}));
  const Status swapped = with_u32(4, 0x03000000u);
  EXPECT_EQ(swapped.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(FailsWith(swapped, {"big-endian", "0x03000000"}));
}

TEST(GgufMalformed, HugeCounts) {
  GgufBuilder g = test::small_model(24);
  const std::vector<uint8_t> bytes = g.build();
  auto with = [&](uint64_t at, auto v) {
    std::vector<uint8_t> b = bytes;
    GgufBuilder::patch(b, at, v);
    return parse_bytes(b);
  };
  EXPECT_TRUE(FailsWith(with(g.at["n_tensors"], int64_t{1} << 62), {"tensor count 4611686018427387904", "cannot fit"}));
  EXPECT_TRUE(FailsWith(with(g.at["n_tensors"], int64_t{-1}), {"tensor count -1 is negative"}));
  EXPECT_TRUE(FailsWith(with(g.at["n_kv"], int64_t{1} << 62), {"metadata key count", "cannot fit"}));
  EXPECT_TRUE(FailsWith(with(g.at["n_kv"], INT64_MIN), {"negative"}));
  // One key more than there are: the tensor infos are read as a key, and the parse fails further on.
  EXPECT_TRUE(FailsWith(with(g.at["n_kv"], int64_t{7}), {"gguf 'bad.gguf'"}));
  // Key and string lengths near 2^64.
  EXPECT_TRUE(FailsWith(with(g.at["kv0.key"], UINT64_MAX - 3), {"metadata key #0", "claims 18446744073709551612"}));
  EXPECT_TRUE(FailsWith(with(g.at["kv0.value"], UINT64_MAX), {"'general.architecture'", "string value", "claims"}));
  EXPECT_TRUE(FailsWith(with(g.at["kv0.value"], uint64_t{1} << 31), {"more than the limit"}));
  // tokenizer.ggml.tokens (kv3): element type i32 at value+0, count at value+4.
  EXPECT_TRUE(FailsWith(with(g.at["kv3.value"] + 4, uint64_t{1} << 62),
                        {"'tokenizer.ggml.tokens'", "4611686018427387904 elements", "limit"}));
  EXPECT_TRUE(FailsWith(with(g.at["kv3.value"] + 4, uint64_t{1} << 29),
                        {"'tokenizer.ggml.tokens'", "needs at least 536870912 x 8 bytes"}));
  // The first token's length.
  EXPECT_TRUE(FailsWith(with(g.at["kv3.value"] + 12, UINT64_MAX - 7), {"element 0", "array string", "claims"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti0.name"], UINT64_MAX), {"tensor info #0", "tensor name", "claims"}));
}

TEST(GgufMalformed, BadTypes) {
  GgufBuilder g = test::small_model(25);
  const std::vector<uint8_t> bytes = g.build();
  auto with = [&](uint64_t at, auto v) {
    std::vector<uint8_t> b = bytes;
    GgufBuilder::patch(b, at, v);
    return parse_bytes(b);
  };
  EXPECT_TRUE(FailsWith(with(g.at["kv1.type"], int32_t{13}), {"'llama.block_count'", "value type 13", "not a GGUF"}));
  EXPECT_TRUE(FailsWith(with(g.at["kv1.type"], int32_t{-1}), {"value type -1"}));
  EXPECT_TRUE(FailsWith(with(g.at["kv3.value"], int32_t{99}), {"array element type 99"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti1.type"], int32_t{4}), {"'blk.0.attn_q.weight'", "Q4_2 (4)", "removed"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti1.type"], int32_t{31}), {"Q4_0_4_4 (31)", "removed"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti1.type"], int32_t{37}), {"IQ4_NL_4_8 (37)", "removed"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti1.type"], int32_t{43}), {"unknown GGML type 43"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti1.type"], int32_t{-7}), {"unknown GGML type -7"}));
  // A type whose block does not divide the row: Q8_0 (32) for the 8-wide F32 tensor.
  EXPECT_TRUE(FailsWith(with(g.at["ti0.type"], int32_t{8}), {"'token_embd.weight'", "ne[0] = 8", "block size 32"}));
  // A wider dense type: token_embd as F64 (256 bytes) runs into the next tensor.
  EXPECT_TRUE(FailsWith(with(g.at["ti0.type"], int32_t{28}),
                        {"'blk.0.attn_q.weight' data [128, 264) overlaps tensor 'token_embd.weight' data [0, 256)"}));
}

TEST(GgufMalformed, BadShapes) {
  GgufBuilder g = test::small_model(26);
  const std::vector<uint8_t> bytes = g.build();
  auto with = [&](uint64_t at, auto v) {
    std::vector<uint8_t> b = bytes;
    GgufBuilder::patch(b, at, v);
    return parse_bytes(b);
  };
  EXPECT_TRUE(FailsWith(with(g.at["ti0.n_dims"], uint32_t{100}), {"tensor info #0", "n_dims = 100", "at most 4"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti0.n_dims"], uint32_t{5}), {"n_dims = 5"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti0.ne"], int64_t{-8}), {"ne[0] = -8 is negative"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti0.ne"] + 8, int64_t{1} << 62), {"'token_embd.weight'", "overflows"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti0.ne"] + 8, int64_t{1} << 40), {"'token_embd.weight'", "past the end"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti1.ne"], int64_t{33}), {"ne[0] = 33", "block size 32"}));
}

TEST(GgufMalformed, BadOffsets) {
  GgufBuilder g = test::small_model(27);
  const std::vector<uint8_t> bytes = g.build();
  auto with = [&](uint64_t at, uint64_t v) {
    std::vector<uint8_t> b = bytes;
    GgufBuilder::patch(b, at, v);
    return parse_bytes(b);
  };
  EXPECT_TRUE(FailsWith(with(g.at["ti1.offset"], 4), {"'blk.0.attn_q.weight'", "offset 4", "alignment 32"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti1.offset"], 0), {"overlaps tensor"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti2.offset"], 160 - 32), {"'output_norm.weight'", "overlaps", "blk.0.attn_q"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti2.offset"], uint64_t{1} << 40), {"'output_norm.weight'", "past the end"}));
  EXPECT_TRUE(FailsWith(with(g.at["ti2.offset"], UINT64_MAX - 31), {"past the end"}));
}

TEST(GgufMalformed, BadKeysNamesAndAlignment) {
  {
    GgufBuilder g;
    g.kv_u32("a", 1);
    g.kv_u32("a", 2);
    EXPECT_TRUE(FailsWith(parse_bytes(g.build()), {"metadata key #1", "duplicate key 'a'"}));
  }
  {
    GgufBuilder g;
    g.kv_u32("", 1);
    EXPECT_TRUE(FailsWith(parse_bytes(g.build()), {"empty key"}));
  }
  {
    GgufBuilder g;
    g.kv_u32("bad\nkey", 1);
    EXPECT_TRUE(FailsWith(parse_bytes(g.build()), {"printable ASCII"}));
  }
  {
    GgufBuilder g;
    g.tensor({"x", 0, {1}, {1, 2, 3, 4}});
    g.tensor({"x", 0, {1}, {1, 2, 3, 4}});
    EXPECT_TRUE(FailsWith(parse_bytes(g.build()), {"tensor info #1", "duplicate tensor name 'x'"}));
  }
  {
    GgufBuilder g;
    g.tensor({std::string(64, 'n'), 0, {1}, {1, 2, 3, 4}});
    EXPECT_TRUE(FailsWith(parse_bytes(g.build()), {"64 bytes", "limit of 63"}));
    GgufBuilder ok;
    ok.tensor({std::string(63, 'n'), 0, {1}, {1, 2, 3, 4}});
    EXPECT_TRUE(parse_bytes(ok.build()).ok());
  }
  {
    GgufBuilder g;
    g.tensor({"", 0, {1}, {1, 2, 3, 4}});
    EXPECT_TRUE(FailsWith(parse_bytes(g.build()), {"empty tensor name"}));
  }
  for (uint32_t bad : {0u, 1u, 4u, 48u, 100u}) {
    GgufBuilder g = test::small_model(28);
    g.kv_u32("general.alignment", bad);
    EXPECT_TRUE(FailsWith(parse_bytes(g.build()), {"general.alignment = " + std::to_string(bad), "power of two"}));
  }
  {
    GgufBuilder g;
    g.kv_u64("general.alignment", 32);
    EXPECT_TRUE(FailsWith(parse_bytes(g.build()), {"general.alignment", "type u64, expected u32"}));
  }
}

// Random single-byte and 8-byte corruptions of the header region: any outcome but a crash is acceptable, and a
// failure must carry a message.
TEST(GgufMalformed, RandomCorruptionsNeverCrash) {
  GgufBuilder g = test::small_model(29);
  const std::vector<uint8_t> bytes = g.build();
  const size_t header_end = g.at["data"];
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 gen(seed);
  int failures = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> b = bytes;
    const size_t at = gen() % header_end;
    if (i % 2 == 0) {
      b[at] = static_cast<uint8_t>(gen());
    } else if (at + 8 <= b.size()) {
      GgufBuilder::patch(b, at, static_cast<uint64_t>(gen()) >> (gen() % 64));
    }
    const Status s = parse_bytes(b);
    if (!s.ok()) {
      ++failures;
      EXPECT_FALSE(s.message().empty());
    }
  }
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace qrt
