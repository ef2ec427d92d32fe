// GgufWriter and SafetensorsWriter output read back by qrt's own readers (gguf-py and the safetensors package read
// them in tests/oracle), and the inputs both refuse before writing anything.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "loader/gguf.hpp"
#include "loader/safetensors.hpp"
#include "tools/convert/gguf_writer.hpp"
#include "tools/convert/safetensors_writer.hpp"

namespace qrt {
namespace {

namespace fs = std::filesystem;

std::string temp_path(const std::string& name) {
  return (fs::temp_directory_path() / ("qrt-writers-" + std::to_string(::getpid()) + "-" + name)).string();
}

TEST(GgufWriter, ReadsBackThroughQrtsReader) {
  std::vector<float> w(2 * 32), b(5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i) * 0.25f - 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i);
  convert::GgufWriter g;
  g.set_string("general.architecture", "llama");
  g.set_u32("llama.block_count", 2);
  g.set_f32("llama.rope.freq_base", 10000.0f);
  g.set_strings("tokenizer.ggml.tokens", {"<s>", "a"});
  g.set_alignment(64);
  g.add_tensor("blk.0.attn_q.weight", 0, {2, 32}, {reinterpret_cast<const uint8_t*>(w.data()), w.size() * 4});
  g.add_tensor("output_norm.weight", 0, {5}, {reinterpret_cast<const uint8_t*>(b.data()), b.size() * 4});
  const std::string path = temp_path("ok.gguf");
  ASSERT_TRUE(g.write(path).ok());
  auto f = read_gguf_file(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(f->alignment, 64u);
  EXPECT_EQ(*f->metadata.get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->metadata.get_u32("llama.block_count"), 2u);
  EXPECT_EQ(*f->metadata.get_f32("llama.rope.freq_base"), 10000.0f);
  EXPECT_EQ(**f->metadata.get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"<s>", "a"}));
  ASSERT_EQ(f->tensor_infos.size(), 2u);
  EXPECT_EQ(f->tensor_infos[0].ne, (std::vector<int64_t>{32, 2}));  // innermost first
  EXPECT_EQ(f->tensor_infos[1].offset % 64, 0u);
  const QuantTensor& q = f->tensors.at("blk.0.attn_q.weight");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{2, 32}));
  EXPECT_EQ(std::vector<uint8_t>(q.data.data, q.data.data + q.data.size),
            std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(w.data()),
                                 reinterpret_cast<const uint8_t*>(w.data()) + w.size() * 4));
  fs::remove(path);
}

TEST(GgufWriter, RefusesWhatWouldNotRead) {
  const std::vector<uint8_t> bytes(4 * 32, 0);
  const std::string path = temp_path("bad.gguf");
  auto refused = [&](convert::GgufWriter& g, const std::string& mentions) {
    const Status s = g.write(path);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find(mentions), std::string::npos) << s.to_string();
    EXPECT_FALSE(fs::exists(path)) << "nothing written";
  };
  convert::GgufWriter short_data;
  short_data.add_tensor("t", 0, {2, 32}, {bytes.data(), bytes.size()});  // one row's bytes for two rows
  refused(short_data, "not its shape");
  convert::GgufWriter q8_width;
  q8_width.add_tensor("t", 8, {1, 33}, {bytes.data(), 34});  // a Q8_0 row of 33
  refused(q8_width, "not its shape");
  convert::GgufWriter twice;
  twice.add_tensor("t", 0, {32}, {bytes.data(), bytes.size()});
  twice.add_tensor("t", 0, {32}, {bytes.data(), bytes.size()});
  refused(twice, "repeated");
  convert::GgufWriter long_name;
  long_name.add_tensor(std::string(64, 'x'), 0, {32}, {bytes.data(), bytes.size()});
  refused(long_name, "longer than 63");
  convert::GgufWriter alignment;
  alignment.set_alignment(12);
  refused(alignment, "power of two");
}

TEST(SafetensorsWriter, ReadsBackAndRefusesMismatchedBytes) {
  convert::SafetensorsWriter s;
  s.set_metadata("uqff.version", "1.2.0");
  s.add_u32("v", 7);
  s.add_u32_vector("shape", {4, 64});
  s.add("w", quant::ScalarType::kF16, {2, 3}, std::vector<uint8_t>(12, 0x3C));
  const std::string path = temp_path("ok.safetensors");
  ASSERT_TRUE(s.write(path).ok());
  auto f = read_safetensors(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->metadata.at("uqff.version"), "1.2.0");
  EXPECT_EQ(f->data_offset % 8, 0u);
  ASSERT_NE(f->find("shape"), nullptr);
  EXPECT_EQ(f->find("shape")->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(f->find("v")->shape, (std::vector<int64_t>{}));
  EXPECT_EQ(f->find("v")->data.data[0], 7);
  EXPECT_EQ(f->find("w")->dtype, quant::ScalarType::kF16);
  fs::remove(path);

  convert::SafetensorsWriter bad;
  bad.add("w", quant::ScalarType::kF32, {2, 3}, std::vector<uint8_t>(12, 0));  // 6 floats need 24 bytes
  const Status st = bad.write(path);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("12 bytes for 6 elements"), std::string::npos) << st.to_string();
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace qrt
