#include "tools/bench_model/random_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "kernels/cpu/quant_reference.hpp"
#include "models/tensor_names.hpp"

namespace qrt::bench {
namespace {

using quant::FormatId;
using quant::QuantBuffers;
using quant::QuantParams;

uint64_t total(const quant::PartSizes& p) { return p.data + p.scales + p.biases; }
uint64_t total_bytes(const quant::QuantBuffers& b) { return b.data.size() + b.scales.size() + b.biases.size(); }

// One kind of matrix: every layer has one [rows, cols] tensor of it, or a stack [experts, rows, cols] of experts.
struct MatrixKind {
  std::string suffix;  // "attn_q", ..., "ffn_gate_exps"
  int64_t rows = 0, cols = 0;
  int64_t experts = 0;  // 0: one matrix
};

std::vector<MatrixKind> layer_matrices(const Shape& s) {
  using names::layer_tensor_suffix;
  using names::LayerTensor;
  const int64_t h = s.hidden, q = int64_t{s.heads} * s.head_dim, kv = int64_t{s.kv_heads} * s.head_dim;
  auto kind = [](LayerTensor t, int64_t rows, int64_t cols, int64_t experts = 0) {
    return MatrixKind{std::string(layer_tensor_suffix(t)), rows, cols, experts};
  };
  std::vector<MatrixKind> kinds = {kind(LayerTensor::kAttnQ, q, h), kind(LayerTensor::kAttnK, kv, h),
                                   kind(LayerTensor::kAttnV, kv, h), kind(LayerTensor::kAttnOutput, h, q)};
  if (s.experts > 0) {
    kinds.push_back(kind(LayerTensor::kFfnGateExps, s.expert_ffn, h, s.experts));
    kinds.push_back(kind(LayerTensor::kFfnUpExps, s.expert_ffn, h, s.experts));
    kinds.push_back(kind(LayerTensor::kFfnDownExps, h, s.expert_ffn, s.experts));
  } else {
    kinds.push_back(kind(LayerTensor::kFfnGate, s.ffn, h));
    kinds.push_back(kind(LayerTensor::kFfnUp, s.ffn, h));
    kinds.push_back(kind(LayerTensor::kFfnDown, h, s.ffn));
  }
  return kinds;
}

// The parameters a format is benchmarked with: AFQ groups of 64 with BF16 scales and biases (MLX's default),
// HQQ groups of 64 (ISQ's default); everything else needs none, except per-tensor FP8's scale, which the
// quantization of each tensor picks (see random_tiled_weight).
QuantParams params_for(FormatId format) {
  QuantParams p;
  switch (quant::format_info(format).family) {
    case quant::Family::kAfq:
      p.group_size = 64;
      p.scale_type = quant::ScalarType::kBF16;
      break;
    case quant::Family::kHqq:
      p.group_size = 64;
      break;
    default:
      break;
  }
  return p;
}

// Rows quantized once per tensor; their packed bytes are repeated down the tensor.
constexpr int64_t kBlockRows = 256;

// A [rows, cols] tensor in `format`: kBlockRows rows of N(0, scale²) values quantized by the reference quantizer,
// repeated row block after row block (a last partial block takes the first rows of the block). Valid because the
// parts of these formats grow row by row: each part's size must be linear in rows, which is checked against
// cpu::part_sizes. Per-tensor FP8 gets its scale (amax / 448) from the block, written to *params.
Result<QuantBuffers> random_tiled_weight(FormatId format, int64_t rows, int64_t cols, float scale, QuantParams* params,
                                         std::mt19937_64& rng) {
  const int64_t block_rows = std::min(rows, kBlockRows);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(block_rows * cols));  // x: [block_rows, cols]
  float amax = 0.0f;
  for (float& v : x) {
    v = normal(rng);
    amax = std::max(amax, std::fabs(v));
  }
  if (quant::format_info(format).family == quant::Family::kFp8) params->global_scale = amax / 448.0f;
  const std::string what =
      std::string(quant::format_name(format)) + " [" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
  QRT_ASSIGN_OR_RETURN(QuantBuffers block, cpu::quantize(format, x.data(), block_rows, cols, *params));
  QRT_ASSIGN_OR_RETURN(quant::PartSizes block_sizes, cpu::part_sizes(format, block_rows, cols, *params));
  QRT_ASSIGN_OR_RETURN(quant::PartSizes full, cpu::part_sizes(format, rows, cols, *params));
  const int64_t full_blocks = rows / block_rows, tail_rows = rows % block_rows;
  quant::PartSizes tail;
  if (tail_rows > 0) {
    QRT_ASSIGN_OR_RETURN(tail, cpu::part_sizes(format, tail_rows, cols, *params));
  }

  QuantBuffers out;
  struct Part {
    const char* name;
    const std::vector<uint8_t>& block;
    std::vector<uint8_t>& out;
    uint64_t block_size, tail_size, full_size;
  };
  const Part parts[] = {{"data", block.data, out.data, block_sizes.data, tail.data, full.data},
                        {"scales", block.scales, out.scales, block_sizes.scales, tail.scales, full.scales},
                        {"biases", block.biases, out.biases, block_sizes.biases, tail.biases, full.biases}};
  for (const Part& p : parts) {
    if (p.block.size() != p.block_size)
      return internal_error(what + ": the quantizer wrote " + std::to_string(p.block.size()) + " bytes of " +
                                 p.name + " for " + std::to_string(block_rows) + " rows, part_sizes says " +
                                 std::to_string(p.block_size));
    if (static_cast<uint64_t>(full_blocks) * p.block_size + p.tail_size != p.full_size)
      return unsupported(what + ": the " + p.name + " part does not grow row by row (" +
                              std::to_string(p.full_size) + " bytes for the tensor, " + std::to_string(p.block_size) +
                              " per " + std::to_string(block_rows) + " rows), so a row block cannot be tiled");
    p.out.resize(p.full_size);
    for (int64_t b = 0; b < full_blocks; ++b)
      if (p.block_size > 0) std::memcpy(p.out.data() + b * p.block_size, p.block.data(), p.block_size);
    if (p.tail_size > 0) std::memcpy(p.out.data() + full_blocks * p.block_size, p.block.data(), p.tail_size);
  }
  return out;
}

const QuantBuffers& keep(HostModel& m, QuantBuffers b) { return m.storage.emplace_back(std::move(b)); }

void add_tensor(HostModel& m, const std::string& name, FormatId format, std::vector<int64_t> shape,
                const QuantBuffers& b, const QuantParams& params) {
  auto span = [](const std::vector<uint8_t>& v) { return ByteSpan{v.empty() ? nullptr : v.data(), v.size()}; };
  QuantTensor t;
  t.name = name;
  t.format = format;
  t.shape = std::move(shape);
  t.data = span(b.data);
  t.scales = span(b.scales);
  t.biases = span(b.biases);
  t.params = params;
  t.file = "random weights";
  m.weight_bytes += t.bytes();
  m.tensors[name] = std::move(t);
}

// F32 values, N(mean, sd²).
const QuantBuffers& random_f32(HostModel& m, int64_t n, float mean, float sd, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(mean, sd);
  QuantBuffers b;
  b.data.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    const float v = normal(rng);
    std::memcpy(b.data.data() + 4 * i, &v, 4);
  }
  return keep(m, std::move(b));
}

}  // namespace

Result<Shape> shape_from_name(const std::string& name) {
  if (name == "llama3-8b") return Shape{name, 4096, 32, 32, 8, 128, 14336, 128256, 500000.0f};
  // Qwen3-30B-A3B: 48 layers of 128 experts of width 768, 8 routed per token (about 3.3B weights active).
  if (name == "qwen3-30b-a3b") return Shape{name, 2048, 48, 32, 4, 128, 0, 151936, 1000000.0f, 128, 8, 768};
  // Small enough for the CPU reference backend; every dim is a multiple of 256, so every format's blocks fit.
  if (name == "tiny") return Shape{name, 256, 2, 4, 2, 64, 512, 1024, 500000.0f};
  if (name == "tiny-moe") return Shape{name, 256, 2, 4, 2, 64, 0, 1024, 1000000.0f, 8, 2, 256};
  return invalid_argument("unknown shape '" + name + "' (known: " + known_shapes() + ")");
}

std::string known_shapes() { return "llama3-8b, qwen3-30b-a3b, tiny, tiny-moe"; }

ModelConfig config_for(const Shape& s, int64_t context) {
  ModelConfig c;
  c.architecture = s.experts > 0 ? "qwen3moe" : "llama";
  c.vocab_size = s.vocab;
  c.hidden = s.hidden;
  c.layers = s.layers;
  c.heads = s.heads;
  c.kv_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.ffn = s.ffn;
  c.context_length = static_cast<int>(context);
  c.norm_eps = s.experts > 0 ? 1e-6f : 1e-5f;
  c.rope.layout = RopeLayout::kHalfSplit;
  c.rope.theta = s.rope_theta;
  c.tied_embeddings = false;  // Llama 3 8B and Qwen3-30B-A3B have their own output heads
  c.qk_norm = s.experts > 0;
  c.experts = s.experts;
  c.experts_used = s.experts_used;
  c.expert_ffn = s.expert_ffn;
  c.normalize_topk = true;
  return c;
}

Result<FormatPlan> plan_format(const std::string& name, const Shape& s) {
  std::string known;
  for (FormatId id : quant::kAllFormats)
    if (quant::format_info(id).has_quantizer)
      known += (known.empty() ? "" : ", ") + std::string(quant::format_name(id));
  const std::optional<FormatId> id = quant::format_from_name(name);
  if (!id) return invalid_argument("unknown format '" + name + "' (formats with a quantizer: " + known + ")");
  if (!quant::format_info(*id).has_quantizer)
    return unsupported("format " + name + " has no quantizer in qrt, so no random weights can be made for it " +
                       "(formats with a quantizer: " + known + ")");
  FormatPlan plan;
  plan.format = *id;
  plan.params = params_for(*id);
  std::vector<MatrixKind> kinds = layer_matrices(s);
  kinds.push_back({std::string(names::kOutput), s.vocab, s.hidden});
  for (const MatrixKind& k : kinds) {
    auto sizes = cpu::part_sizes(*id, k.rows, k.cols, plan.params);
    if (!sizes.ok())
      return sizes.status().with_context("format " + name + " cannot hold " + k.suffix + " [" + std::to_string(k.rows) +
                                         ", " + std::to_string(k.cols) + "] of shape " + s.name);
    const uint64_t copies = k.suffix == names::kOutput ? 1 : static_cast<uint64_t>(s.layers);
    plan.matrix_bytes += total(*sizes) * copies * static_cast<uint64_t>(std::max<int64_t>(k.experts, 1));
  }
  plan.embedding_format = *id;
  plan.embedding_params = plan.params;
  if (!cpu::part_sizes(*id, s.vocab, s.hidden, plan.params).ok()) {
    plan.embedding_format = FormatId::kBF16;
    plan.embedding_params = QuantParams{};
  }
  QRT_ASSIGN_OR_RETURN(quant::PartSizes embd,
                       cpu::part_sizes(plan.embedding_format, s.vocab, s.hidden, plan.embedding_params));
  plan.matrix_bytes += total(embd);
  if (s.experts > 0) plan.matrix_bytes += static_cast<uint64_t>(s.layers) * s.experts * s.hidden * 4;  // F32 routers
  return plan;
}

Result<HostModel> make_host_model(const Shape& s, const FormatPlan& plan, uint64_t seed) {
  using names::LayerTensor;
  std::mt19937_64 rng(seed);
  HostModel m;
  auto matrix_scale = [](int64_t cols) { return 1.0f / std::sqrt(static_cast<float>(cols)); };

  for (const MatrixKind& k : layer_matrices(s)) {
    // A stack of experts is quantized as its [experts * rows, cols] rows: each expert's parts follow the previous
    // one's, as in a checkpoint's stacked tensor.
    const int64_t stack = std::max<int64_t>(k.experts, 1);
    QuantParams p = plan.params;
    QRT_ASSIGN_OR_RETURN(QuantBuffers b,
                         random_tiled_weight(plan.format, stack * k.rows, k.cols, matrix_scale(k.cols), &p, rng));
    const QuantBuffers& kept = keep(m, std::move(b));
    std::vector<int64_t> shape = {k.rows, k.cols};
    if (k.experts > 0) shape.insert(shape.begin(), k.experts);
    for (int l = 0; l < s.layers; ++l)
      add_tensor(m, "blk." + std::to_string(l) + "." + k.suffix, plan.format, shape, kept, p);
    // A token reads experts_used of the stack's experts per layer.
    const uint64_t read = k.experts > 0 ? total_bytes(kept) / static_cast<uint64_t>(k.experts) * s.experts_used
                                        : total_bytes(kept);
    m.decode_bytes_per_token += static_cast<uint64_t>(s.layers) * read;
  }
  if (s.experts > 0) {
    // The router, F32 as llama.cpp's converter keeps it, N(0, 1/hidden) like the other matrices; a token reads all.
    const QuantBuffers& router = random_f32(m, int64_t{s.experts} * s.hidden, 0.0f, matrix_scale(s.hidden), rng);
    for (int l = 0; l < s.layers; ++l)
      add_tensor(m, names::layer_tensor(l, LayerTensor::kFfnGateInp), FormatId::kF32, {s.experts, s.hidden}, router,
                 {});
    m.decode_bytes_per_token += static_cast<uint64_t>(s.layers) * router.data.size();
  }

  QuantParams out_p = plan.params;
  QRT_ASSIGN_OR_RETURN(QuantBuffers out_b,
                       random_tiled_weight(plan.format, s.vocab, s.hidden, matrix_scale(s.hidden), &out_p, rng));
  const QuantBuffers& output = keep(m, std::move(out_b));
  add_tensor(m, std::string(names::kOutput), plan.format, {s.vocab, s.hidden}, output, out_p);
  m.decode_bytes_per_token += total_bytes(output);

  QuantParams embd_p = plan.embedding_params;
  QRT_ASSIGN_OR_RETURN(QuantBuffers embd_b,
                       random_tiled_weight(plan.embedding_format, s.vocab, s.hidden, 1.0f, &embd_p, rng));
  add_tensor(m, std::string(names::kTokenEmbd), plan.embedding_format, {s.vocab, s.hidden},
             keep(m, std::move(embd_b)), embd_p);
  QRT_ASSIGN_OR_RETURN(quant::PartSizes embd_row, cpu::part_sizes(plan.embedding_format, 1, s.hidden, embd_p));
  m.decode_bytes_per_token += total(embd_row);

  // RMSNorm weights: F32 near 1 (per head for q and k of a mixture).
  add_tensor(m, std::string(names::kOutputNorm), FormatId::kF32, {s.hidden}, random_f32(m, s.hidden, 1.0f, 0.1f, rng),
             QuantParams{});
  const QuantBuffers& attn_norm = random_f32(m, s.hidden, 1.0f, 0.1f, rng);
  const QuantBuffers& ffn_norm = random_f32(m, s.hidden, 1.0f, 0.1f, rng);
  for (int l = 0; l < s.layers; ++l) {
    add_tensor(m, names::layer_tensor(l, LayerTensor::kAttnNorm), FormatId::kF32, {s.hidden}, attn_norm, {});
    add_tensor(m, names::layer_tensor(l, LayerTensor::kFfnNorm), FormatId::kF32, {s.hidden}, ffn_norm, {});
  }
  if (s.experts > 0) {
    const QuantBuffers& q_norm = random_f32(m, s.head_dim, 1.0f, 0.1f, rng);
    const QuantBuffers& k_norm = random_f32(m, s.head_dim, 1.0f, 0.1f, rng);
    for (int l = 0; l < s.layers; ++l) {
      add_tensor(m, names::layer_tensor(l, LayerTensor::kAttnQNorm), FormatId::kF32, {s.head_dim}, q_norm, {});
      add_tensor(m, names::layer_tensor(l, LayerTensor::kAttnKNorm), FormatId::kF32, {s.head_dim}, k_norm, {});
    }
  }
  return m;
}

}  // namespace qrt::bench
