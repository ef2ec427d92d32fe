// loader/imatrix: llama-imatrix's two file formats read into per-column importance, and malformed files refused
// with the file and entry named. The files are built here from the formats' layouts (llama.cpp's
// tools/imatrix and tools/quantize read and write them); test_imatrix.py runs quantize-model on files written
// by gguf-py.
#include "loader/imatrix.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "loader_test_util.hpp"
#include "gguf_builder.hpp"

namespace qrt {
namespace {

using test::GgufBuilder;
using test::TempDir;
using test::write_file;

void put_i32(std::vector<uint8_t>& b, int32_t v) {
  const size_t at = b.size();
  b.resize(at + 4);
  std::memcpy(b.data() + at, &v, 4);
}
void put_floats(std::vector<uint8_t>& b, const std::vector<float>& v) {
  const size_t at = b.size();
  b.resize(at + 4 * v.size());
  std::memcpy(b.data() + at, v.data(), 4 * v.size());
}
void put_name(std::vector<uint8_t>& b, const std::string& s) {
  put_i32(b, static_cast<int32_t>(s.size()));
  b.insert(b.end(), s.begin(), s.end());
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::lognormal_distribution<float> d(0.0f, 1.5f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

struct LegacyEntry {
  std::string name;
  int32_t ncall;
  std::vector<float> values;  // as stored: ncall times the means
};

std::vector<uint8_t> legacy_file(const std::vector<LegacyEntry>& entries, bool trailer) {
  std::vector<uint8_t> b;
  put_i32(b, static_cast<int32_t>(entries.size()));
  for (const LegacyEntry& e : entries) {
    put_name(b, e.name);
    put_i32(b, e.ncall);
    put_i32(b, static_cast<int32_t>(e.values.size()));
    put_floats(b, e.values);
  }
  if (trailer) {
    put_i32(b, 37);  // chunks
    put_name(b, "calibration.txt");
  }
  return b;
}

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> b;
  put_floats(b, v);
  return b;
}

// A GGUF importance matrix: one dense entry (4 columns, count 3) and one stack of 2 experts of 4 columns whose
// second expert never saw a token.
GgufBuilder gguf_imatrix(const std::vector<float>& dense_sums, const std::vector<float>& expert_sums) {
  GgufBuilder g;
  g.kv_string("general.type", "imatrix");
  g.kv_string_array("imatrix.datasets", {"wiki.train.raw"});
  g.kv_u32("imatrix.chunk_count", 100);
  g.kv_u32("imatrix.chunk_size", 512);
  g.tensor({"blk.0.attn_q.weight.in_sum2", 0, {4, 1}, f32_bytes(dense_sums)});
  g.tensor({"blk.0.attn_q.weight.counts", 0, {1, 1}, f32_bytes({3.0f})});
  g.tensor({"blk.0.ffn_down_exps.weight.in_sum2", 0, {4, 2}, f32_bytes(expert_sums)});
  g.tensor({"blk.0.ffn_down_exps.weight.counts", 0, {1, 2}, f32_bytes({5.0f, 0.0f})});
  return g;
}

TEST(Imatrix, LegacyValuesAreDividedByTheirCallCount) {
  TempDir dir;
  const std::vector<float> q = random_values(8, 1), down = random_values(16, 2);
  const std::string path = dir.file("imatrix.dat");
  write_file(path, legacy_file({{"blk.0.attn_q.weight", 4, q}, {"blk.0.ffn_down.weight", 0, down}}, true));
  auto m = read_imatrix(path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->file_format, "legacy");
  EXPECT_EQ(m->chunks, 37);
  ASSERT_EQ(m->datasets, std::vector<std::string>{"calibration.txt"});
  ASSERT_EQ(m->entries.size(), 2u);
  const std::vector<float>& got_q = m->entries.at("blk.0.attn_q.weight");
  for (size_t i = 0; i < q.size(); ++i) EXPECT_EQ(got_q[i], q[i] / 4.0f);
  EXPECT_EQ(m->entries.at("blk.0.ffn_down.weight"), down);  // ncall 0: stored values as they are
}

TEST(Imatrix, LegacyFileWithoutTrailerReads) {
  TempDir dir;
  const std::string path = dir.file("old.dat");
  write_file(path, legacy_file({{"output.weight", 1, random_values(4, 3)}}, false));
  auto m = read_imatrix(path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->chunks, 0);
  EXPECT_TRUE(m->datasets.empty());
}

TEST(Imatrix, GgufSumsAreDividedByCountsAndUnseenExpertsGetOnes) {
  TempDir dir;
  const std::vector<float> sums = random_values(4, 4), experts = random_values(8, 5);
  const std::string path = dir.file("imatrix.gguf");
  write_file(path, gguf_imatrix(sums, experts).build());
  auto m = read_imatrix(path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->file_format, "gguf");
  EXPECT_EQ(m->chunks, 100);
  ASSERT_EQ(m->datasets, std::vector<std::string>{"wiki.train.raw"});
  const std::vector<float>& q = m->entries.at("blk.0.attn_q.weight");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(q[i], sums[i] / 3.0f);
  const std::vector<float>& e = m->entries.at("blk.0.ffn_down_exps.weight");
  ASSERT_EQ(e.size(), 8u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(e[i], experts[i] / 5.0f);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(e[i], 1.0f);

  auto dense = m->for_tensor("blk.0.attn_q.weight", 4, 1);
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(*dense, &q);
  auto stack = m->for_tensor("blk.0.ffn_down_exps.weight", 4, 2);
  ASSERT_TRUE(stack.ok());
  EXPECT_EQ(*stack, &e);
  auto absent = m->for_tensor("blk.1.attn_q.weight", 4, 1);
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(*absent, nullptr);
  auto wrong = m->for_tensor("blk.0.attn_q.weight", 8, 1);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(wrong.status().message().find("another model"), std::string::npos);
}

void expect_refused(const std::vector<uint8_t>& bytes, const std::string& needle) {
  TempDir dir;
  const std::string path = dir.file("bad.imatrix");
  write_file(path, bytes);
  auto m = read_imatrix(path);
  ASSERT_FALSE(m.ok()) << "accepted a file that should fail with " << needle;
  EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find(path), std::string::npos) << m.status().message();
}

TEST(Imatrix, MalformedLegacyFilesAreRefusedByEntry) {
  const std::vector<uint8_t> good = legacy_file({{"blk.0.attn_q.weight", 2, random_values(8, 6)}}, true);
  for (size_t cut : {size_t{2}, size_t{10}, size_t{40}, good.size() - 3})
    expect_refused(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(cut)), "truncated");
  expect_refused(legacy_file({}, false), "entry count 0");
  expect_refused(legacy_file({{"blk.0.attn_q.weight", 1, {}}}, false), "0 values");
  expect_refused(legacy_file({{"blk.0.attn_q.weight", 1, {1.0f, -2.0f}}}, false), "column 1");
  expect_refused(legacy_file({{"blk.0.attn_q.weight", 1, {1.0f, std::nanf("")}}}, false), "column 1");
  expect_refused(legacy_file({{"a.weight", 1, {1.0f}}, {"a.weight", 1, {2.0f}}}, false), "appears twice");
  std::vector<uint8_t> long_name;
  put_i32(long_name, 1);
  put_i32(long_name, 1 << 20);
  expect_refused(long_name, "name of 1048576 bytes");
  std::vector<uint8_t> extra = good;
  extra.push_back(0);
  expect_refused(extra, "bytes after");
}

TEST(Imatrix, MalformedGgufFilesAreRefused) {
  const std::vector<float> sums = random_values(4, 7), experts = random_values(8, 8);
  GgufBuilder no_keys;
  no_keys.tensor({"x.weight.in_sum2", 0, {4, 1}, f32_bytes(sums)});
  no_keys.tensor({"x.weight.counts", 0, {1, 1}, f32_bytes({1.0f})});
  expect_refused(no_keys.build(), "imatrix.datasets");

  GgufBuilder unpaired = gguf_imatrix(sums, experts);
  unpaired.tensor({"blk.1.attn_q.weight.in_sum2", 0, {4, 1}, f32_bytes(sums)});
  expect_refused(unpaired.build(), "blk.1.attn_q.weight has sums but no counts");

  GgufBuilder bad_count = gguf_imatrix(sums, experts);
  bad_count.tensor({"blk.1.attn_q.weight.in_sum2", 0, {4, 1}, f32_bytes(sums)});
  bad_count.tensor({"blk.1.attn_q.weight.counts", 0, {1, 1}, f32_bytes({-1.0f})});
  expect_refused(bad_count.build(), "count");

  GgufBuilder mismatched = gguf_imatrix(sums, experts);
  mismatched.tensor({"blk.1.attn_q.weight.in_sum2", 0, {3, 1}, f32_bytes({1.0f, 2.0f, 3.0f})});
  mismatched.tensor({"blk.1.attn_q.weight.counts", 0, {1, 2}, f32_bytes({1.0f, 1.0f})});
  expect_refused(mismatched.build(), "3 sums for 2 counts");
}

TEST(Imatrix, MissingFileIsAnError) {
  auto m = read_imatrix("/nonexistent/imatrix.gguf");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/nonexistent/imatrix.gguf"), std::string::npos);
}

}  // namespace
}  // namespace qrt
