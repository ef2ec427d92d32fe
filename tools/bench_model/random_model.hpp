// bench-model's random model: the shapes it benchmarks (dense Llama-3-8B, Qwen3-30B-A3B's mixture of experts, tiny
// versions of both for the CPU), the check that a format can hold every matrix of a shape, and the tensor table of
// random weights in that format (tools/bench-model.cpp says how they are made and why that is enough for timing).
#pragma once

#include <cstdint>
#include <list>
#include <string>

#include "kernels/quant/formats.hpp"
#include "loader/quant_tensor.hpp"
#include "models/model_config.hpp"
#include "qrt/status.hpp"

namespace qrt::bench {

struct Shape {
  std::string name;
  int hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0;
  float rope_theta = 10000.0f;
  // Mixture of experts, Qwen3-MoE's layout (0 experts: a dense MLP of width ffn): every layer routes each token to
  // experts_used of `experts` SwiGLU experts of width expert_ffn (an F32 router, softmax, the chosen weights
  // renormalized), and q and k are RMS-normed per head before RoPE.
  int experts = 0, experts_used = 0, expert_ffn = 0;
};

// The shapes by name: llama3-8b, qwen3-30b-a3b, tiny, tiny-moe.
Result<Shape> shape_from_name(const std::string& name);
std::string known_shapes();
ModelConfig config_for(const Shape& s, int64_t context);

struct FormatPlan {
  quant::FormatId format = quant::FormatId::kF32;
  quant::QuantParams params;
  quant::FormatId embedding_format = quant::FormatId::kF32;  // the format itself, or BF16 when it cannot hold it
  quant::QuantParams embedding_params;
  uint64_t matrix_bytes = 0;  // every matrix and table as packed (norms aside), to check that the model fits
};

// Checks a format before any work is done: a known name, a quantizer, and legal shapes for every matrix.
Result<FormatPlan> plan_format(const std::string& name, const Shape& s);

// The canonical tensor table of the random model. The spans point into `storage`; every layer's tensor of one
// kind shares one buffer.
struct HostModel {
  TensorTable tensors;
  std::list<quant::QuantBuffers> storage;
  uint64_t weight_bytes = 0;  // every uploaded byte: all matrices, tables and norms
  // What one decoded token reads: every linear layer (of a mixture, the router and experts_used experts), the output
  // head, one embedding row; norms are negligible.
  uint64_t decode_bytes_per_token = 0;
};

Result<HostModel> make_host_model(const Shape& s, const FormatPlan& plan, uint64_t seed);

}  // namespace qrt::bench
