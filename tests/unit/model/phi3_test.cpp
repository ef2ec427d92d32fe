// Phi-3 in qrt's model layer: its config.json (Phi-3-mini-128k's LongRoPE values, -4k's sliding window) and GGUF
// metadata, the LongRoPE frequency table (short factors within the original context, long beyond), and the
// fused qkv / gate_up tensors split into the canonical ones without copying.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "models/arch/arch.hpp"
#include "models/fused_tensors.hpp"
#include "models/rope.hpp"
#include "models/tensor_names.hpp"

namespace qrt {
namespace {

using nlohmann::json;
using names::LayerTensor;

json phi3_mini_128k() {
  // microsoft/Phi-3-mini-128k-instruct's config.json (abridged; the factor lists cut to 48 made-up values).
  json j = json::parse(R"({"architectures": ["Phi3ForCausalLM"], "bos_token_id": 1, "eos_token_id": 32000,
    "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": 131072,
    "model_type": "phi3", "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
    "sliding_window": 262144, "tie_word_embeddings": false, "vocab_size": 32064})");
  json shorts = json::array(), longs = json::array();
  for (int i = 0; i < 48; ++i) {
    shorts.push_back(1.0 + 0.05 * i);
    longs.push_back(1.0 + 1.5 * i);
  }
  j["rope_scaling"] = {{"type", "longrope"}, {"short_factor", shorts}, {"long_factor", longs}};
  return j;
}

TEST(Phi3, ConfigFromHuggingFace) {
  auto c = arch::config_from_hf(phi3_mini_128k());
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->architecture, "phi3");
  EXPECT_EQ(c->head_dim, 96);
  EXPECT_EQ(c->sliding_window, 262144);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
  EXPECT_EQ(c->rope.scaling, RopeScaling::kLongRope);
  EXPECT_EQ(c->rope.original_context, 4096);
  EXPECT_FLOAT_EQ(c->rope.factor, 32.0f);  // 131072 / 4096
  EXPECT_NEAR(c->rope.attn_factor, std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)), 1e-6);
  ASSERT_EQ(c->rope.short_factor.size(), 48u);
  EXPECT_FLOAT_EQ(c->rope.long_factor[2], 4.0f);

  json four_k = phi3_mini_128k();  // Phi-3-mini-4k: no scaling, a window of 2047
  four_k["rope_scaling"] = nullptr;
  four_k["max_position_embeddings"] = 4096;
  four_k["sliding_window"] = 2047;
  auto c4 = arch::config_from_hf(four_k);
  ASSERT_TRUE(c4.ok()) << c4.status().to_string();
  EXPECT_EQ(c4->rope.scaling, RopeScaling::kNone);
  EXPECT_EQ(c4->sliding_window, 2047);

  json bad = phi3_mini_128k();
  bad["rope_scaling"]["short_factor"].erase(0);
  const Status s = arch::config_from_hf(bad).status();
  EXPECT_EQ(s.code(), ErrorCode::kFormatError) << s.to_string();
  EXPECT_NE(s.message().find("short_factor must be a list of 48 numbers"), std::string::npos) << s.to_string();
  json small = phi3_mini_128k();
  small["model_type"] = "phi3small";  // another architecture (blocksparse attention), refused by name
  EXPECT_NE(arch::config_from_hf(small).status().message().find("phi3small"), std::string::npos);
}

TEST(Phi3, ConfigFromGguf) {
  arch::JsonMetadataView md(json{{"general.architecture", "phi3"}, {"phi3.block_count", 32},
                                 {"phi3.embedding_length", 3072}, {"phi3.context_length", 131072},
                                 {"phi3.feed_forward_length", 8192}, {"phi3.attention.head_count", 32},
                                 {"phi3.attention.head_count_kv", 32}, {"phi3.attention.layer_norm_rms_epsilon", 1e-5},
                                 {"phi3.rope.dimension_count", 96}, {"phi3.rope.freq_base", 10000.0},
                                 {"phi3.rope.scaling.original_context_length", 4096},
                                 {"phi3.rope.scaling.attn_factor", 1.1902380714238083},
                                 {"phi3.attention.sliding_window", 262144}, {"phi3.vocab_size", 32064}});
  auto c = arch::config_from_gguf(md);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->rope.layout, RopeLayout::kHalfSplit) << "phi3 GGUF keeps Hugging Face's RoPE pairs";
  EXPECT_EQ(c->rope.original_context, 4096);
  EXPECT_NEAR(c->rope.attn_factor, 1.19023807f, 1e-6);
  EXPECT_EQ(c->rope.scaling, RopeScaling::kNone) << "until the factor tensors are seen";
  TensorTable t;
  for (auto name : {names::kRopeFactorsLong, names::kRopeFactorsShort}) t[std::string(name)] = QuantTensor{};
  arch::apply_tensor_presence(t, &*c);
  EXPECT_EQ(c->rope.scaling, RopeScaling::kLongRope);
}

TEST(Phi3, LongRopePicksItsFactorsByTheContext) {
  RopeConfig r;
  r.scaling = RopeScaling::kLongRope;
  r.theta = 10000.0f;
  r.original_context = 4096;
  r.attn_factor = 1.19f;
  for (int i = 0; i < 4; ++i) {
    r.short_factor.push_back(1.0f + i);
    r.long_factor.push_back(10.0f + i);
  }
  auto within = make_rope_table(r, 8, nullptr, 4096), beyond = make_rope_table(r, 8, nullptr, 4097);
  ASSERT_TRUE(within.ok() && beyond.ok()) << within.status().to_string() << beyond.status().to_string();
  for (int i = 0; i < 4; ++i) {
    const double plain = 1.0 / std::pow(10000.0, 2.0 * i / 8);
    EXPECT_NEAR(within->inv_freq[static_cast<size_t>(i)], plain / (1.0 + i), 1e-7) << i;
    EXPECT_NEAR(beyond->inv_freq[static_cast<size_t>(i)], plain / (10.0 + i), 1e-8) << i;
  }
  EXPECT_FLOAT_EQ(within->attn_factor, 1.19f);
  r.long_factor.pop_back();
  const Status s = make_rope_table(r, 8, nullptr, 8192).status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("4 long factors, found 3"), std::string::npos) << s.to_string();
}

// One layer, 4 heads of 16 sharing 2 KV heads, an MLP of 32: a fused qkv of 128 rows, a fused gate_up of 64.
ModelConfig one_layer_config() {
  ModelConfig c;
  c.layers = 1;
  c.hidden = 64;
  c.heads = 4;
  c.kv_heads = 2;
  c.head_dim = 16;
  c.ffn = 32;
  return c;
}

// A [rows, 64] Q8_0 tensor of distinct values, owning its bytes.
struct Packed {
  std::vector<uint8_t> bytes;
  QuantTensor tensor;
};
Packed q8_rows(const std::string& name, int64_t rows) {
  std::vector<float> v(static_cast<size_t>(rows * 64));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.37f * static_cast<float>(i));
  Packed p;
  p.bytes = cpu::quantize(quant::FormatId::kQ8_0, v.data(), rows, 64, {})->data;
  p.tensor.name = name;
  p.tensor.format = quant::FormatId::kQ8_0;
  p.tensor.shape = {rows, 64};
  p.tensor.data = {p.bytes.data(), p.bytes.size()};
  return p;
}

TEST(Phi3, FusedTensorsSplitIntoTheCanonicalOnesWithoutCopying) {
  const ModelConfig c = one_layer_config();
  const Packed qkv = q8_rows("model.layers.0.self_attn.qkv_proj.weight", 64 + 2 * 32);
  const Packed gate_up = q8_rows("blk.0.ffn_up.weight", 2 * 32);  // GGUF's name for the fused [gate; up]
  TensorTable t;
  t[names::layer_tensor(0, LayerTensor::kAttnQkv)] = qkv.tensor;
  t[names::layer_tensor(0, LayerTensor::kFfnUp)] = gate_up.tensor;
  std::vector<SlicedTensor> keep;
  auto split = split_fused_tensors(t, c, &keep);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  EXPECT_TRUE(keep.empty()) << "row ranges point into the fused bytes";
  const uint64_t row_bytes = 2 * 34;  // two Q8_0 blocks per row of 64
  auto at = [&](LayerTensor x) { return split->at(names::layer_tensor(0, x)); };
  EXPECT_EQ(at(LayerTensor::kAttnQ).shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(at(LayerTensor::kAttnQ).data.data, qkv.bytes.data());
  EXPECT_EQ(at(LayerTensor::kAttnK).data.data, qkv.bytes.data() + 64 * row_bytes);
  EXPECT_EQ(at(LayerTensor::kAttnV).data.data, qkv.bytes.data() + 96 * row_bytes);
  EXPECT_EQ(at(LayerTensor::kAttnV).data.size, 32 * row_bytes);
  EXPECT_EQ(at(LayerTensor::kFfnGate).data.data, gate_up.bytes.data());
  EXPECT_EQ(at(LayerTensor::kFfnUp).data.data, gate_up.bytes.data() + 32 * row_bytes);
  EXPECT_EQ(split->count(names::layer_tensor(0, LayerTensor::kAttnQkv)), 0u);

  TensorTable wrong;  // rows for another head count
  wrong[names::layer_tensor(0, LayerTensor::kAttnQkv)] = q8_rows("qkv", 100).tensor;
  Status s = split_fused_tensors(wrong, c, &keep).status();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("expected 128 rows"), std::string::npos) << s.to_string();
  TensorTable both = t;  // fused and unfused at once
  both[names::layer_tensor(0, LayerTensor::kAttnK)] = q8_rows("k", 32).tensor;
  s = split_fused_tensors(both, c, &keep).status();
  EXPECT_NE(s.message().find("is fused, but blk.0.attn_k is present as well"), std::string::npos) << s.to_string();
}

// HQQ groups run down the flattened tensor's columns, so no row range of it is a tensor: the parts come decoded.
TEST(Phi3, FusedHqqSplitsIntoDecodedParts) {
  const ModelConfig c = one_layer_config();
  const int64_t rows = 128, cols = 64;
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.11f * static_cast<float>(i));
  quant::QuantParams p;
  p.group_size = 64;
  auto q = cpu::quantize(quant::FormatId::kHQQ4, v.data(), rows, cols, p);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  QuantTensor fused;
  fused.name = "qkv";
  fused.format = quant::FormatId::kHQQ4;
  fused.params = p;
  fused.shape = {rows, cols};
  fused.data = {q->data.data(), q->data.size()};
  fused.scales = {q->scales.data(), q->scales.size()};
  fused.biases = {q->biases.data(), q->biases.size()};
  std::vector<float> whole(v.size());
  ASSERT_TRUE(cpu::dequantize(fused.format, fused.view(), whole.data()).ok());
  TensorTable t;
  t[names::layer_tensor(0, LayerTensor::kAttnQkv)] = fused;
  std::vector<SlicedTensor> keep;
  auto split = split_fused_tensors(t, c, &keep);
  ASSERT_TRUE(split.ok()) << split.status().to_string();
  ASSERT_EQ(keep.size(), 1u);
  const QuantTensor& v_part = split->at(names::layer_tensor(0, LayerTensor::kAttnV));
  EXPECT_EQ(v_part.format, quant::FormatId::kF32);
  EXPECT_EQ(v_part.shape, (std::vector<int64_t>{32, 64}));
  const auto* values = reinterpret_cast<const float*>(v_part.data.data);
  for (int64_t i = 0; i < 32 * cols; ++i) ASSERT_EQ(values[i], whole[static_cast<size_t>(96 * cols + i)]) << i;
}

}  // namespace
}  // namespace qrt
