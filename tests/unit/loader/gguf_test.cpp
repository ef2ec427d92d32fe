// The GGUF reader on valid files: metadata getters, tensor spans and shapes, alignment, versions, unsupported
// types, split sets, and the ModelSource it produces.
#include <gtest/gtest.h>

#include <cstring>

#include "gguf_builder.hpp"
#include "kernels/cpu/quant_reference.hpp"
#include "loader/gguf.hpp"
#include "loader_test_util.hpp"

namespace qrt {
namespace {

using test::FailsWith;
using test::GgufBuilder;

Result<GgufFile> parse(const std::vector<uint8_t>& bytes, GgufReadOptions options = {}) {
  return parse_gguf(ByteSpan{bytes.data(), bytes.size()}, "test.gguf", options);
}

TEST(Gguf, ParsesMetadataAndTensors) {
  GgufBuilder g = test::small_model(11);
  const std::vector<uint8_t> bytes = g.build();
  auto f = parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(f->alignment, 32u);
  EXPECT_EQ(f->data_offset, g.at["data"]);
  EXPECT_EQ(f->metadata.size(), 6u);
  EXPECT_EQ(f->metadata.entries()[0].first, "general.architecture");
  EXPECT_EQ(*f->metadata.get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->metadata.get_u32("llama.block_count"), 2u);
  EXPECT_EQ(*f->metadata.get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f);
  EXPECT_TRUE(*f->metadata.get_bool("test.flag"));
  auto tokens = f->metadata.get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(**tokens, (std::vector<std::string>{"<unk>", "<s>", "</s>", "hello"}));
  EXPECT_EQ(**f->metadata.get_i32_array("tokenizer.ggml.token_type"), (std::vector<int32_t>{2, 3, 3, 1}));

  ASSERT_EQ(f->tensor_infos.size(), 3u);
  ASSERT_EQ(f->tensors.size(), 3u);
  const QuantTensor& embd = f->tensors.at("token_embd.weight");
  EXPECT_EQ(embd.format, quant::FormatId::kF32);
  EXPECT_EQ(embd.shape, (std::vector<int64_t>{4, 8}));  // ne [8, 4] reversed
  EXPECT_EQ(embd.data.data, bytes.data() + g.at["t0.data"]);
  EXPECT_EQ(embd.data.size, 128u);
  EXPECT_EQ(embd.file, "test.gguf");
  const QuantTensor& q = f->tensors.at("blk.0.attn_q.weight");
  EXPECT_EQ(q.format, quant::FormatId::kQ8_0);
  EXPECT_EQ(q.shape, (std::vector<int64_t>{2, 64}));
  EXPECT_EQ(q.data.data, bytes.data() + g.at["t1.data"]);
  EXPECT_EQ(q.data.size, 136u);
  EXPECT_EQ(f->tensor_infos[1].ne, (std::vector<int64_t>{64, 2}));
  EXPECT_EQ(f->tensor_infos[1].file_offset, g.at["t1.data"]);
  const QuantTensor& norm = f->tensors.at("output_norm.weight");
  EXPECT_EQ(norm.shape, (std::vector<int64_t>{8}));
  EXPECT_EQ(norm.format, quant::FormatId::kF16);

  // The spans decode to what was written.
  std::vector<float> values(32);
  ASSERT_TRUE(cpu::dequantize(embd.format, embd.view(), values.data()).ok());
  float first = 0;
  std::memcpy(&first, bytes.data() + g.at["t0.data"], 4);
  EXPECT_EQ(values[0], first);
}

TEST(Gguf, MetadataGettersCheckTypes) {
  const std::vector<uint8_t> bytes = test::small_model(12).build();
  auto f = parse(bytes);
  ASSERT_TRUE(f.ok());
  const GgufMetadata& md = f->metadata;
  EXPECT_TRUE(FailsWith(md.get_f32("llama.block_count").status(),
                        {"test.gguf", "llama.block_count", "has type u32", "expected f32"}));
  EXPECT_EQ(md.get_u64("llama.block_count").status().code(), ErrorCode::kFormatError);
  auto missing = md.get_u32("llama.context_length");
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(FailsWith(missing.status(), {"llama.context_length", "not found"}));
  EXPECT_EQ(*md.get_int("llama.block_count"), 2);
  EXPECT_EQ(*md.get_uint("llama.block_count"), 2u);
  EXPECT_NEAR(*md.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-12);
  EXPECT_EQ(*md.get_or<uint32_t>("llama.context_length", 4096u), 4096u);
  EXPECT_EQ(*md.get_or<uint32_t>("llama.block_count", 7u), 2u);
  EXPECT_FALSE(md.get_or<float>("llama.block_count", 1.0f).ok());
  EXPECT_EQ(*md.get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{2, 3, 3, 1}));
  EXPECT_TRUE(FailsWith(md.get_int_array("tokenizer.ggml.tokens").status(), {"array[string; 4]", "integers"}));
  EXPECT_TRUE(FailsWith(md.get_f32_array("tokenizer.ggml.token_type").status(),
                        {"tokenizer.ggml.token_type", "array[i32; 4]", "expected array[f32]"}));
  EXPECT_TRUE(FailsWith(md.get_string_array("general.architecture").status(), {"expected an array"}));
}

TEST(Gguf, LenientIntegerGettersCheckRange) {
  GgufBuilder g;
  g.kv_i32("neg", -5);
  g.kv_u64("huge", UINT64_MAX);
  g.kv_raw("i8", 1, {0x80});  // -128
  auto f = parse(g.build());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*f->metadata.get_int("neg"), -5);
  EXPECT_TRUE(FailsWith(f->metadata.get_uint("neg").status(), {"neg", "negative"}));
  EXPECT_TRUE(FailsWith(f->metadata.get_int("huge").status(), {"huge", "does not fit"}));
  EXPECT_EQ(*f->metadata.get_uint("huge"), UINT64_MAX);
  EXPECT_EQ(*f->metadata.get_i8("i8"), -128);
  EXPECT_EQ(*f->metadata.get_int("i8"), -128);
}

TEST(Gguf, NestedArraysUpToTheDepthLimit) {
  // array[array[...array[i32; 1]...]] with `depth` array levels.
  auto nested = [](int depth) {
    std::vector<uint8_t> v = GgufBuilder::le(int32_t{5});
    GgufBuilder::append(v, GgufBuilder::le(uint64_t{1}));
    GgufBuilder::append(v, GgufBuilder::le(int32_t{42}));
    for (int d = 1; d < depth; ++d) {
      std::vector<uint8_t> outer = GgufBuilder::le(int32_t{9});
      GgufBuilder::append(outer, GgufBuilder::le(uint64_t{1}));
      GgufBuilder::append(outer, v);
      v = outer;
    }
    return v;
  };
  GgufBuilder ok;
  ok.kv_raw("deep", 9, nested(kGgufMaxArrayDepth));
  auto f = parse(ok.build());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const GgufArray* a = *f->metadata.get_array("deep");
  for (int d = 1; d < kGgufMaxArrayDepth; ++d) {
    ASSERT_EQ(a->elem_type(), GgufType::kArray);
    a = &a->as<GgufArray>()->front();
  }
  ASSERT_NE(a->as<int32_t>(), nullptr);
  EXPECT_EQ(a->as<int32_t>()->front(), 42);

  GgufBuilder too_deep;
  too_deep.kv_raw("deep", 9, nested(kGgufMaxArrayDepth + 1));
  EXPECT_TRUE(FailsWith(parse(too_deep.build()).status(), {"test.gguf", "'deep'", "nested deeper"}));
}

TEST(Gguf, CustomAlignment) {
  GgufBuilder g = test::small_model(13);
  g.kv_u32("general.alignment", 256);
  g.alignment = 256;
  const std::vector<uint8_t> bytes = g.build();
  auto f = parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->alignment, 256u);
  EXPECT_EQ(f->data_offset % 256, 0u);
  for (const auto& t : f->tensor_infos) EXPECT_EQ(t.offset % 256, 0u) << t.name;
  EXPECT_EQ(f->tensors.at("output_norm.weight").data.data, bytes.data() + g.at["t2.data"]);
}

TEST(Gguf, VersionTwoIsAccepted) {
  GgufBuilder g = test::small_model(14);
  g.version = 2;
  auto f = parse(g.build());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->version, 2u);
  EXPECT_EQ(f->tensors.size(), 3u);
}

TEST(Gguf, VocabOnlyFileEndsAfterMetadata) {
  GgufBuilder g;
  g.kv_string_array("tokenizer.ggml.tokens", {"a", "b"});
  const std::vector<uint8_t> bytes = g.build();
  EXPECT_NE(bytes.size() % 32, 0u);  // no padding: the data section would start past the end
  auto f = parse(bytes);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_TRUE(f->tensors.empty());
}

TEST(Gguf, ZeroElementTensorIsEmpty) {
  GgufBuilder g;
  g.tensor({"empty", 0, {0, 4}, {}});
  g.tensor({"after", 0, {2}, std::vector<uint8_t>(8, 1)});
  auto f = parse(g.build());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->tensors.at("empty").data.size, 0u);
  EXPECT_EQ(f->tensors.at("empty").shape, (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(f->tensors.at("after").data.size, 8u);
}

// A zero dim beside dims whose product overflows 64 bits (found by the GGUF fuzzer): still an empty tensor, with
// no overflow on the way (the sanitizer build of the fuzzer caught the multiplication).
TEST(Gguf, ZeroDimBesideHugeDimsIsEmpty) {
  GgufBuilder g;
  g.tensor({"empty", 0, {32, 0, int64_t{1} << 40, int64_t{1} << 40}, {}});
  g.tensor({"no_columns", 0, {0, 4}, {}});
  auto f = parse(g.build());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  const QuantTensor& t = f->tensors.at("empty");
  EXPECT_EQ(t.numel(), 0);
  EXPECT_EQ(t.rows(), 0);
  EXPECT_EQ(t.data.size, 0u);
  const QuantTensor& no_columns = f->tensors.at("no_columns");  // [4, 0]: rows() must not divide by zero
  EXPECT_EQ(no_columns.numel(), 0);
  EXPECT_EQ(no_columns.rows(), 0);
}

TEST(Gguf, UnsupportedTypeIsNamedOrSkipped) {
  const auto type = test::ggml_type_without_format();
  if (!type) GTEST_SKIP() << "every live GGML type has a qrt format";
  const GgmlTypeInfo& info = kGgmlTypes[*type];
  GgufBuilder g = test::small_model(15);
  const int64_t ne0 = info.block_elems * 2;
  g.tensor({"blk.0.ffn_down.weight", *type, {ne0, 3}, std::vector<uint8_t>(static_cast<size_t>(info.type_size) * 6, 0)});
  const std::vector<uint8_t> bytes = g.build();
  auto strict = parse(bytes);
  EXPECT_EQ(strict.status().code(), ErrorCode::kUnsupported);
  EXPECT_TRUE(FailsWith(strict.status(), {"test.gguf", "unsupported tensor type " + std::string(info.name) + " (" +
                                                          std::to_string(*type) + ") for tensor 'blk.0.ffn_down.weight'"}));
  GgufReadOptions options;
  options.allow_unsupported_types = true;
  auto lenient = parse(bytes, options);
  ASSERT_TRUE(lenient.ok()) << lenient.status().to_string();
  EXPECT_EQ(lenient->tensor_infos.size(), 4u);
  EXPECT_FALSE(lenient->tensor_infos[3].format.has_value());
  EXPECT_EQ(lenient->tensor_infos[3].nbytes, static_cast<uint64_t>(info.type_size) * 6);
  EXPECT_EQ(lenient->tensors.count("blk.0.ffn_down.weight"), 0u);
  EXPECT_EQ(lenient->tensors.size(), 3u);
}

// The loader's GGML type table (sizes of types without a format) must agree with every format's traits.
TEST(Gguf, GgmlTypeTableMatchesFormatTraits) {
  for (quant::FormatId id : quant::kAllFormats) {
    const quant::FormatInfo info = quant::format_info(id);
    if (info.ggml_type < 0) continue;
    const GgmlTypeInfo* t = ggml_type_info(info.ggml_type);
    ASSERT_NE(t, nullptr) << info.name;
    EXPECT_EQ(t->block_elems, info.block_elems) << info.name;
    EXPECT_EQ(t->type_size, info.block_bytes) << info.name;
    // part_sizes agrees with the table for a 3-row tensor.
    auto sizes = cpu::part_sizes(id, 3, t->block_elems * 2, {});
    ASSERT_TRUE(sizes.ok()) << info.name;
    EXPECT_EQ(sizes->data, static_cast<uint64_t>(t->type_size) * 6) << info.name;
  }
  for (int id = 0; id < kGgmlTypeCount; ++id) EXPECT_EQ(kGgmlTypes[id].id, id);
}

TEST(GgufSplit, ParsesShardNames) {
  auto n = parse_gguf_split_name("/m/a-b-00002-of-00005.gguf");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->prefix, "/m/a-b");
  EXPECT_EQ(n->index, 2);
  EXPECT_EQ(n->count, 5);
  EXPECT_EQ(gguf_split_path(n->prefix, 3, 5), "/m/a-b-00003-of-00005.gguf");
  EXPECT_FALSE(parse_gguf_split_name("model.gguf").has_value());
  EXPECT_FALSE(parse_gguf_split_name("m-00006-of-00005.gguf").has_value());
  EXPECT_FALSE(parse_gguf_split_name("m-00000-of-00005.gguf").has_value());
  EXPECT_FALSE(parse_gguf_split_name("m-0001-of-00005.gguf").has_value());
  EXPECT_FALSE(parse_gguf_split_name("m-00001-of-00005.bin").has_value());
  EXPECT_FALSE(parse_gguf_split_name("m-000a1-of-00005.gguf").has_value());
}

// Shard i of n: one F32 tensor "t<i>" of 8 values, split keys, model keys in the first shard only.
std::vector<uint8_t> shard(int no, int count, int total_tensors, const std::string& tensor_name) {
  GgufBuilder g;
  if (no == 0) g.kv_string("general.architecture", "llama");
  g.kv_u16("split.no", static_cast<uint16_t>(no));
  g.kv_u16("split.count", static_cast<uint16_t>(count));
  g.kv_i32("split.tensors.count", total_tensors);
  std::vector<uint8_t> data(32);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(no * 32 + i);
  g.tensor({tensor_name, 0, {8}, data});
  return g.build();
}

TEST(GgufSplit, OpensEveryShardFromAnyOfThem) {
  test::TempDir dir;
  for (int i = 0; i < 3; ++i)
    test::write_file(gguf_split_path(dir.file("m"), i + 1, 3), shard(i, 3, 3, "t" + std::to_string(i)));
  for (int named = 1; named <= 3; ++named) {
    auto m = open_gguf(gguf_split_path(dir.file("m"), named, 3));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ(m->shards.size(), 3u);
    ASSERT_EQ(m->tensors.size(), 3u);
    EXPECT_EQ(*m->metadata().get_string("general.architecture"), "llama");
    for (int i = 0; i < 3; ++i) {
      const QuantTensor& t = m->tensors.at("t" + std::to_string(i));
      EXPECT_EQ(t.file, gguf_split_path(dir.file("m"), i + 1, 3));
      EXPECT_EQ(t.data.data[0], i * 32);
    }
    EXPECT_EQ(m->keep_alive().size(), 3u);
  }
}

TEST(GgufSplit, InconsistentSetsAreRefused) {
  test::TempDir dir;
  const std::string p1 = gguf_split_path(dir.file("m"), 1, 2);
  const std::string p2 = gguf_split_path(dir.file("m"), 2, 2);
  test::write_file(p1, shard(0, 2, 2, "a"));
  EXPECT_TRUE(FailsWith(open_gguf(p1).status(), {"shard 2 of 2", "m-00002-of-00002.gguf"}));
  test::write_file(p2, shard(0, 2, 2, "b"));  // claims split.no 0
  EXPECT_TRUE(FailsWith(open_gguf(p1).status(), {"m-00002-of-00002.gguf", "split.no is 0, expected 1"}));
  test::write_file(p2, shard(1, 3, 2, "b"));  // claims 3 shards
  EXPECT_TRUE(FailsWith(open_gguf(p1).status(), {"split.count is 3, expected 2"}));
  test::write_file(p2, shard(1, 2, 2, "a"));  // same tensor twice
  EXPECT_TRUE(FailsWith(open_gguf(p1).status(), {"tensor 'a' appears in both"}));
  test::write_file(p1, shard(0, 2, 5, "a"));
  test::write_file(p2, shard(1, 2, 5, "b"));
  EXPECT_TRUE(FailsWith(open_gguf(p1).status(), {"split.tensors.count is 5", "hold 2 tensors"}));
  // A shard whose name lost the -NNNNN-of-NNNNN suffix.
  const std::string renamed = dir.file("renamed.gguf");
  test::write_file(renamed, shard(1, 2, 2, "b"));
  EXPECT_TRUE(FailsWith(open_gguf(renamed).status(), {"renamed.gguf", "shard 2 of 2", "-NNNNN-of-NNNNN.gguf"}));
  // The name and split.no disagree.
  test::write_file(p2, shard(0, 2, 2, "b"));
  EXPECT_TRUE(FailsWith(open_gguf(p2).status(), {"name says shard 2", "split.no is 0"}));
}

TEST(GgufModelSource, OwnsMappingsAndMetadata) {
  test::TempDir dir;
  const std::vector<uint8_t> bytes = test::small_model(16).build();
  test::write_file(dir.file("m.gguf"), bytes);
  ModelSource source;
  {
    auto m = open_gguf(dir.file("m.gguf"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_EQ(m->shards.size(), 1u);
    source = gguf_model_source(std::move(*m));
  }
  EXPECT_EQ(source.kind, SourceKind::kGguf);
  EXPECT_EQ(source.path, dir.file("m.gguf"));
  ASSERT_EQ(source.keep_alive.size(), 1u);
  ASSERT_NE(source.gguf_metadata, nullptr);
  EXPECT_EQ(*source.gguf_metadata->get_u32("llama.block_count"), 2u);
  const QuantTensor& t = source.tensors.at("output_norm.weight");
  ASSERT_EQ(t.data.size, 16u);
  EXPECT_EQ(std::memcmp(t.data.data, bytes.data() + bytes.size() - 32, 16), 0);  // last tensor, padded to 32
}

}  // namespace
}  // namespace qrt
