// Which Hugging Face tensors quantize-model's UQFF export treats as modules (quantized) and under which key:
// llama-style layers, fused Phi-3 projections, DeepSeek's latent projections and shared experts, expert slices, and
// a multimodal Gemma 3's text layers under its language_model prefixes; everything else (norms, routers, the vision
// tower) is residual.
#include <gtest/gtest.h>

#include "tools/convert/uqff_export.hpp"

namespace qrt::convert {
namespace {

TEST(UqffModules, LayersExpertsAndMultimodalTextModels) {
  using M = std::pair<std::string, int>;
  EXPECT_EQ(uqff_module_of("model.layers.3.self_attn.q_proj.weight"), (M{"model.layers.3.self_attn.q_proj", -1}));
  EXPECT_EQ(uqff_module_of("model.layers.3.mlp.gate_up_proj.weight"), (M{"model.layers.3.mlp.gate_up_proj", -1}));
  EXPECT_EQ(uqff_module_of("model.layers.3.mlp.experts.5.down_proj.weight"),
            (M{"model.layers.3.mlp.experts.down_proj", 5}));
  EXPECT_EQ(uqff_module_of("lm_head.weight"), (M{"lm_head", -1}));
  EXPECT_EQ(uqff_module_of("language_model.model.layers.7.mlp.up_proj.weight"),
            (M{"language_model.model.layers.7.mlp.up_proj", -1}));
  EXPECT_EQ(uqff_module_of("model.language_model.layers.7.self_attn.o_proj.weight"),
            (M{"model.language_model.layers.7.self_attn.o_proj", -1}));
  EXPECT_EQ(uqff_module_of("language_model.lm_head.weight"), (M{"language_model.lm_head", -1}));
  // DeepSeek's (mistral.rs' deepseek2 / deepseek3 ISQ layers): the low-rank q and kv projections, shared experts.
  for (const char* m : {"self_attn.q_a_proj", "self_attn.q_b_proj", "self_attn.kv_a_proj_with_mqa",
                        "self_attn.kv_b_proj", "mlp.shared_experts.down_proj"})
    EXPECT_EQ(uqff_module_of(std::string("model.layers.2.") + m + ".weight"),
              (M{std::string("model.layers.2.") + m, -1}));
  for (const char* residual : {"model.layers.3.input_layernorm.weight", "model.norm.weight",
                               "model.layers.3.self_attn.q_proj.bias", "vision_tower.encoder.layers.0.q_proj.weight",
                               "model.layers.x.mlp.up_proj.weight", "model.embed_tokens.weight",
                               "model.layers.2.self_attn.kv_a_layernorm.weight", "model.layers.2.mlp.gate.weight",
                               "model.layers.2.mlp.gate.e_score_correction_bias"})
    EXPECT_EQ(uqff_module_of(residual).first, "") << residual;
}

}  // namespace
}  // namespace qrt::convert
