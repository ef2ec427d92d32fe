// The safetensors parser on valid and malformed headers (files written by the safetensors package itself are
// covered by tests/oracle/loader/safetensors_oracle.py).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "gguf_builder.hpp"
#include "loader/safetensors.hpp"
#include "loader_test_util.hpp"

namespace qrt {
namespace {

using test::FailsWith;

// u64 header length, the JSON header, then `data`.
std::vector<uint8_t> safetensors_bytes(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b(8 + header.size() + data.size());
  const uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  std::memcpy(b.data() + 8, header.data(), header.size());
  if (!data.empty()) std::memcpy(b.data() + 8 + header.size(), data.data(), data.size());
  return b;
}

Status parse_status(const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> copy = bytes;  // exact size
  return parse_safetensors(ByteSpan{copy.data(), copy.size()}, "bad.safetensors").status();
}

Status parse_header(const std::string& header, size_t data_bytes = 64) {
  return parse_status(safetensors_bytes(header, test::random_bytes(data_bytes, 3)));
}

const char* kValidHeader =
    R"({"__metadata__":{"format":"pt","note":"x"},)"
    R"("b.weight":{"dtype":"F16","shape":[2,3],"data_offsets":[16,28]},)"
    R"("a.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
    R"("scalar":{"dtype":"U8","shape":[],"data_offsets":[28,29]},)"
    R"("empty":{"dtype":"BF16","shape":[0,5],"data_offsets":[29,29]},)"
    R"("fp8":{"dtype":"F8_E4M3","shape":[3],"data_offsets":[29,32]},)"
    R"("ids":{"dtype":"I64","shape":[1],"data_offsets":[32,40]}})";

TEST(Safetensors, ParsesEntriesAndMetadata) {
  const std::vector<uint8_t> data = test::random_bytes(40, 1);
  const std::vector<uint8_t> bytes = safetensors_bytes(kValidHeader, data);
  auto f = parse_safetensors(ByteSpan{bytes.data(), bytes.size()}, "ok.safetensors");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->header_bytes, std::strlen(kValidHeader));
  EXPECT_EQ(f->data_offset, 8 + std::strlen(kValidHeader));
  EXPECT_EQ(f->metadata, (std::map<std::string, std::string>{{"format", "pt"}, {"note", "x"}}));
  ASSERT_EQ(f->entries.size(), 6u);
  EXPECT_EQ(f->entries[0].name, "a.weight");  // sorted by name
  const SafetensorsEntry* b = f->find("b.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, quant::ScalarType::kF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(b->data.data, bytes.data() + f->data_offset + 16);
  EXPECT_EQ(b->data.size, 12u);
  EXPECT_EQ(f->find("scalar")->shape.size(), 0u);
  EXPECT_EQ(f->find("scalar")->numel(), 1);
  EXPECT_EQ(f->find("empty")->data.size, 0u);
  EXPECT_EQ(f->find("fp8")->dtype, quant::ScalarType::kF8_E4M3);
  EXPECT_EQ(f->find("missing"), nullptr);
  EXPECT_TRUE(FailsWith(f->get("missing").status(), {"ok.safetensors", "no tensor 'missing'"}));

  auto dense = dense_quant_tensor(*f->find("a.weight"), f->path);
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(dense->format, quant::FormatId::kF32);
  EXPECT_EQ(dense->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(dense->data.data, bytes.data() + f->data_offset);
  EXPECT_EQ(dense_quant_tensor(*f->find("empty"), f->path)->format, quant::FormatId::kBF16);
  EXPECT_TRUE(FailsWith(dense_quant_tensor(*f->find("ids"), f->path).status(), {"'ids'", "I64"}));
}

TEST(Safetensors, ReadsAFileAndOwnsTheMapping) {
  test::TempDir dir;
  const std::vector<uint8_t> data = test::random_bytes(40, 2);
  test::write_file(dir.file("m.safetensors"), safetensors_bytes(kValidHeader, data));
  auto f = read_safetensors(dir.file("m.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_NE(f->mapping, nullptr);
  EXPECT_EQ(std::memcmp(f->find("ids")->data.data, data.data() + 32, 8), 0);
  EXPECT_TRUE(FailsWith(read_safetensors(dir.file("none.safetensors")).status(), {"none.safetensors"}));
}

TEST(Safetensors, TruncatedAtEveryByte) {
  const std::vector<uint8_t> bytes = safetensors_bytes(kValidHeader, test::random_bytes(40, 4));
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    const Status s = parse_status(cut);
    ASSERT_TRUE(FailsWith(s, {"safetensors 'bad.safetensors'"})) << "truncated to " << n;
  }
  EXPECT_TRUE(parse_status(bytes).ok());
}

TEST(Safetensors, BadLengths) {
  EXPECT_TRUE(FailsWith(parse_status({1, 2, 3}), {"3 bytes is too short"}));
  std::vector<uint8_t> b = safetensors_bytes(kValidHeader, test::random_bytes(40, 5));
  test::GgufBuilder::patch(b, 0, UINT64_MAX);
  EXPECT_TRUE(FailsWith(parse_status(b), {"header length 18446744073709551615 exceeds"}));
  test::GgufBuilder::patch(b, 0, uint64_t{1} << 40);
  EXPECT_TRUE(FailsWith(parse_status(b), {"header length 1099511627776 exceeds"}));
  test::GgufBuilder::patch(b, 0, uint64_t{1});
  EXPECT_TRUE(FailsWith(parse_status(b), {"cannot hold a JSON object"}));
}

TEST(Safetensors, BadJson) {
  EXPECT_TRUE(FailsWith(parse_header(R"({"a":)"), {"bad.safetensors", "not valid JSON"}));
  EXPECT_TRUE(FailsWith(parse_header("[1,2]"), {"must be a JSON object", "array"}));
  EXPECT_TRUE(FailsWith(parse_header(std::string(5000, '[') + std::string(5000, ']')), {"nests deeper than 64"}));
  EXPECT_TRUE(FailsWith(parse_header("{\"a\xff\":1}"), {"not valid JSON"}));
  EXPECT_TRUE(FailsWith(parse_header(R"({"__metadata__":{"k":1}})"), {"__metadata__ value for 'k'", "string"}));
  EXPECT_TRUE(FailsWith(parse_header(R"({"__metadata__":[]})"), {"__metadata__ must be an object"}));
}

TEST(Safetensors, BadEntries) {
  auto entry = [](const std::string& body) { return parse_header("{\"t\":" + body + "}", 64); };
  EXPECT_TRUE(FailsWith(entry("3"), {"tensor 't'", "expected an object"}));
  EXPECT_TRUE(FailsWith(entry(R"({"shape":[1],"data_offsets":[0,4]})"), {"tensor 't'", "missing \"dtype\""}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","data_offsets":[0,4]})"), {"missing \"shape\""}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":[1]})"), {"missing \"data_offsets\""}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":7,"shape":[1],"data_offsets":[0,4]})"), {"\"dtype\" must be a string"}));
  const Status unknown = entry(R"({"dtype":"F4","shape":[2],"data_offsets":[0,1]})");
  EXPECT_EQ(unknown.code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(FailsWith(unknown, {"tensor 't'", "unknown dtype 'F4'"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":3,"data_offsets":[0,4]})"), {"\"shape\" must be an array"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})"), {"shape[0]", "negative"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})"), {"shape[0]", "integer"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]})"),
                        {"more than 2^63 elements"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,4]})"),
                        {"needs more than 2^64 bytes"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0]})"), {"must be [begin, end]"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})"), {"end before they begin"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[64,68]})"),
                        {"[64, 68]", "past the data buffer of 64 bytes"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]})"),
                        {"past the data buffer"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,20]})"),
                        {"shape [2,3] of F32 needs 24 bytes", "span 20"}));
  EXPECT_TRUE(FailsWith(entry(R"({"dtype":"F16","shape":[2],"data_offsets":[-1,3]})"), {"data_offsets[0]", "negative"}));
}

TEST(Safetensors, OverlapsAreRefusedGapsAreNot) {
  EXPECT_TRUE(FailsWith(parse_header(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})"),
                        {"tensor 'b' bytes [12, 20) overlap tensor 'a' bytes [0, 16)"}));
  EXPECT_TRUE(FailsWith(parse_header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]},)"
                                     R"("b":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})"),
                        {"overlap"}));
  EXPECT_TRUE(parse_header(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                           R"("z":{"dtype":"U8","shape":[0],"data_offsets":[2,2]},)"
                           R"("b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]}})")
                  .ok());
}

TEST(Safetensors, RandomCorruptionsNeverCrash) {
  const std::vector<uint8_t> bytes = safetensors_bytes(kValidHeader, test::random_bytes(40, 6));
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 gen(seed);
  int failures = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> b = bytes;
    b[gen() % (8 + std::strlen(kValidHeader))] = static_cast<uint8_t>(gen());
    const Status s = parse_status(b);
    if (!s.ok()) {
      ++failures;
      EXPECT_FALSE(s.message().empty());
    }
  }
  EXPECT_GT(failures, 0);
}

}  // namespace
}  // namespace qrt
