#include "models/transformer.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "kernels/cpu/quant_reference.hpp"
#include "kernels/quant/slicing.hpp"
#include "models/fused_tensors.hpp"
#include "models/mla_weights.hpp"
#include "models/tensor_values.hpp"
#include "models/transformer_layer.hpp"
#include "models/transformer_scratch.hpp"
#include "loader/tensor_slice.hpp"
#include "qrt/log.hpp"
#include "models/tensor_names.hpp"

namespace qrt {

using namespace transformer_scratch;  // NOLINT: the scratch names read as the buffers they are

namespace {

using names::LayerTensor;

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}


}  // namespace

Transformer::Transformer(Backend& backend, const ModelConfig& config) : backend_(backend), config_(config) {}

Transformer::~Transformer() {
  for (WeightHandle h : uploaded_) backend_.free_weight(h);
}

Result<std::unique_ptr<Transformer>> Transformer::create(Backend& backend, const ModelConfig& config,
                                                         const TensorTable& tensors,
                                                         const TransformerOptions& options) {
  std::unique_ptr<Transformer> t(new Transformer(backend, config));
  t->graphs_ = options.graphs;
  t->kv_type_ = options.kv_type.value_or(backend.preferred_kv_type());
  Status s = t->load(tensors, options);
  if (!s.ok()) return s.with_context("building the " + (config.architecture.empty() ? "" : config.architecture + " ") +
                                     "transformer");
  return t;
}

Status Transformer::load(const TensorTable& given, const TransformerOptions& options) {
  ModelConfig& c = config_;
  if (c.head_dim == 0 && c.heads > 0) c.head_dim = c.hidden / c.heads;
  // Fused projections (Phi-3) as the canonical q/k/v and gate/up tensors, pointing into the fused bytes.
  QRT_ASSIGN_OR_RETURN(const TensorTable tensors, split_fused_tensors(given, c, &fused_parts_));
  auto require = [](bool ok, const std::string& what) { return ok ? ok_status() : invalid_argument("config: " + what); };
  QRT_TRY(require(c.vocab_size > 0 && c.hidden > 0 && c.layers > 0, "vocab_size, hidden and layers must be positive"));
  QRT_TRY(require(c.heads > 0 && c.kv_heads > 0 && c.heads % c.kv_heads == 0,
                  "heads (" + std::to_string(c.heads) + ") must be a positive multiple of kv_heads (" +
                      std::to_string(c.kv_heads) + ")"));
  QRT_TRY(require(c.head_dim > 0, "head_dim must be positive"));
  QRT_TRY(require(c.norm_eps > 0.0f, "norm_eps must be positive"));
  QRT_TRY(require(c.sliding_window >= 0, "sliding_window must not be negative"));
  const bool moe = c.experts > 0;
  if (moe) {
    QRT_TRY(require(c.experts_used >= 1 && c.experts_used <= c.experts && c.expert_ffn > 0,
                    "MoE needs 1 <= experts_used (" + std::to_string(c.experts_used) + ") <= experts (" +
                        std::to_string(c.experts) + ") and expert_ffn > 0"));
    if (c.mlp_bias) return unsupported("MoE experts with biases");
  } else {
    QRT_TRY(require(c.ffn > 0, "ffn must be positive for a dense MLP"));
  }
  // Tensor parallelism (spec/uqff.md §5): q/k/v and gate/up are split by output rows, o and down by input
  // columns on block boundaries, and the partial sums of o and down meet in an all-reduce. Embedding, output head,
  // norms and router are replicated: rank 0 samples from whole logits, so a vocabulary-split head would need an
  // all-gather of the logits every step for a saving of one matrix.
  const int world = options.tp.world, rank = options.tp.rank;
  QRT_TRY(require(world >= 1 && rank >= 0 && rank < world,
                  "tensor-parallel rank " + std::to_string(rank) + " of " + std::to_string(world)));
  if (world != backend_.tp_world_size() || rank != backend_.tp_rank())
    return invalid_argument("the model is split for rank " + std::to_string(rank) + " of " + std::to_string(world) +
                            " but the " + backend_.name() + " backend is rank " + std::to_string(backend_.tp_rank()) +
                            " of " + std::to_string(backend_.tp_world_size()));
  QRT_TRY(require(c.heads % world == 0, "the " + std::to_string(c.heads) + " attention heads do not divide among " +
                                            std::to_string(world) + " ranks"));
  heads_ = c.heads / world;
  head_dim_ = c.head_dim;
  int kv_first = 0;  // this rank's first KV head
  if (values_are_keys()) {
    // One [RoPE key | latent] row per token, read by every query head of every rank (models/mla_weights.hpp).
    QRT_TRY(require(c.qk_nope_dim > 0 && c.qk_rope_dim > 0 && c.v_head_dim > 0,
                    "latent attention needs positive qk_nope, qk_rope and v head dims"));
    kv_heads_ = 1;
    head_dim_ = c.qk_rope_dim + c.kv_lora_rank;
  } else if (c.kv_heads % world == 0) {
    kv_heads_ = c.kv_heads / world;
    kv_first = rank * kv_heads_;
  } else if (world % c.kv_heads == 0) {
    // Fewer KV heads than ranks: each rank's query heads all read one KV head, which that rank holds a copy of.
    kv_heads_ = 1;
    kv_first = rank * c.kv_heads / world;
  } else {
    return invalid_argument("config: the " + std::to_string(c.kv_heads) + " KV heads can be neither split nor " +
                            "replicated among " + std::to_string(world) + " ranks");
  }
  if (!kv_row_fits(kv_type_, int64_t{kv_heads_} * head_dim_))
    return invalid_argument("KV cache type " + std::string(kv_type_name(kv_type_)) + " stores rows in blocks of " +
                            std::to_string(kKvQ8Block) + " elements, but a cache row here holds " +
                            std::to_string(kv_heads_) + " KV head(s) of " + std::to_string(head_dim_) + " = " +
                            std::to_string(int64_t{kv_heads_} * head_dim_) +
                            (world > 1 ? " elements on each of " + std::to_string(world) + " ranks" : " elements") +
                            "; choose another --kv-type");
  const bool dense_layers = !moe || c.leading_dense_layers > 0;
  if (dense_layers) {
    QRT_TRY(require(c.ffn % world == 0, "the MLP width " + std::to_string(c.ffn) + " does not divide among " +
                                            std::to_string(world) + " ranks"));
  }
  ffn_ = dense_layers ? c.ffn / world : 0;
  expert_ffn_ = 0;  // the widest layer's, set below

  std::set<std::string> consumed;
  // Uploads tensor `name` after checking its (whole) shape; with several ranks, only `slice` of it. An absent
  // optional tensor gives an invalid handle.
  auto take = [&](const std::string& name, std::vector<int64_t> shape, bool required,
                  std::optional<quant::DimRange> slice = std::nullopt) -> Result<WeightHandle> {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      if (required) return not_found("tensor " + name + " " + shape_string(shape) + " is missing");
      return WeightHandle{};
    }
    consumed.insert(name);
    if (it->second.shape != shape)
      return invalid_argument("tensor " + name + " (" + it->second.name + "): expected shape " + shape_string(shape) +
                              ", found " + shape_string(it->second.shape));
    Result<WeightHandle> h = WeightHandle{};
    if (slice && world > 1) {
      auto part = slice_tensor(it->second, *slice);
      if (!part.ok())
        return part.status().with_context("tensor " + name + " split among " + std::to_string(world) + " ranks");
      h = backend_.upload_weight(part->tensor);
    } else {
      h = backend_.upload_weight(it->second);
    }
    if (!h.ok()) return h.status();
    uploaded_.push_back(*h);
    if (options.on_tensor_loaded) options.on_tensor_loaded(it->second.bytes());
    return *h;
  };
  // A small tensor's values on the host (sinks, expert biases), consumed; and floats uploaded to a device buffer.
  auto host_values = [&](const std::string& name, std::vector<int64_t> shape) -> Result<std::vector<float>> {
    QRT_ASSIGN_OR_RETURN(std::vector<float> values, tensor_values(tensors, name, shape));
    consumed.insert(name);
    if (options.on_tensor_loaded) options.on_tensor_loaded(tensors.at(name).bytes());
    return values;
  };
  auto upload_floats = [&](const std::vector<float>& values) -> Result<ScopedBuffer> {
    QRT_ASSIGN_OR_RETURN(ScopedBuffer buffer, allocate_scoped(backend_, values.size() * sizeof(float)));
    QRT_TRY(backend_.upload(values.data(), buffer.buffer().ptr, values.size() * sizeof(float)));
    return buffer;
  };
  // An RMSNorm weight, as (offset + w) when the checkpoint stores Gemma's offset form (ModelConfig).
  auto take_norm = [&](const std::string& name, int64_t dim) -> Result<WeightHandle> {
    if (c.norm_weight_offset == 0.0f || !tensors.count(name)) return take(name, {dim}, true);
    QRT_ASSIGN_OR_RETURN(std::vector<float> values, host_values(name, {dim}));
    for (float& v : values) v += c.norm_weight_offset;
    QuantTensor shifted;
    shifted.name = tensors.at(name).name + " (+" + std::to_string(c.norm_weight_offset) + ")";
    shifted.shape = {dim};
    shifted.data = {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)};
    QRT_ASSIGN_OR_RETURN(WeightHandle h, backend_.upload_weight(shifted));  // copied: `values` may go
    uploaded_.push_back(h);
    return h;
  };
  // Row-parallel biases enter the sum once, through rank 0's partial; the other ranks leave them out.
  auto take_reduced_bias = [&](const std::string& name, std::vector<int64_t> shape) -> Result<WeightHandle> {
    if (rank == 0) return take(name, std::move(shape), true);
    if (!tensors.count(name)) return not_found("tensor " + name + " " + shape_string(shape) + " is missing");
    consumed.insert(name);
    return WeightHandle{};
  };
  const int64_t hd = head_dim_, q_dim = int64_t{c.heads} * hd, kv_dim = int64_t{c.kv_heads} * hd;
  const quant::DimRange q_rows{0, rank * heads_ * hd, heads_ * hd}, kv_rows{0, kv_first * hd, kv_heads_ * hd};
  const quant::DimRange o_cols{1, q_rows.start, q_rows.length};
  const quant::DimRange ffn_rows{0, rank * int64_t{ffn_}, ffn_}, ffn_cols{1, ffn_rows.start, ffn_rows.length};
  auto as_bias = [](quant::DimRange r) { return quant::DimRange{0, r.start, r.length}; };
  int replicated_layers = 0, replicated_shared = 0;
  const int64_t hidden = c.hidden;

  QRT_ASSIGN_OR_RETURN(token_embd_, take(std::string(names::kTokenEmbd), {c.vocab_size, hidden}, true));
  QRT_ASSIGN_OR_RETURN(output_norm_, take_norm(std::string(names::kOutputNorm), hidden));
  const bool has_output = tensors.count(std::string(names::kOutput)) != 0;
  if (c.tied_embeddings || !has_output) {
    output_ = token_embd_;  // a stored copy of a tied output matrix is redundant and not uploaded
    if (has_output) consumed.insert(std::string(names::kOutput));
  } else {
    QRT_ASSIGN_OR_RETURN(output_, take(std::string(names::kOutput), {c.vocab_size, hidden}, true));
  }

  layers_.resize(static_cast<size_t>(c.layers));
  for (int l = 0; l < c.layers; ++l) {
    Layer& L = layers_[static_cast<size_t>(l)];
    auto n = [&](LayerTensor t) { return names::layer_tensor(l, t); };
    auto b = [&](LayerTensor t) { return names::bias_of(names::layer_tensor(l, t)); };
    QRT_ASSIGN_OR_RETURN(L.attn_norm, take_norm(n(LayerTensor::kAttnNorm), hidden));
    L.windowed = c.sliding_window > 0 && (c.sliding_window_pattern <= 0 || (l + 1) % c.sliding_window_pattern != 0);
    if (values_are_keys()) {
      // Latent attention: q sliced by heads, the latent and RoPE key projections whole on every rank, the per-head
      // stacks built for this rank's heads, o sliced by heads' value columns.
      const int64_t qk = c.qk_nope_dim + c.qk_rope_dim, v_dim = c.v_head_dim;
      const quant::DimRange heads_rows{0, int64_t{rank} * heads_ * qk, int64_t{heads_} * qk};
      if (c.q_lora_rank > 0) {
        QRT_ASSIGN_OR_RETURN(L.q_a, take(n(LayerTensor::kAttnQA), {c.q_lora_rank, hidden}, true));
        QRT_ASSIGN_OR_RETURN(L.q_a_norm, take_norm(n(LayerTensor::kAttnQANorm), c.q_lora_rank));
        QRT_ASSIGN_OR_RETURN(L.q, take(n(LayerTensor::kAttnQB), {c.heads * qk, c.q_lora_rank}, true, heads_rows));
      } else {
        QRT_ASSIGN_OR_RETURN(L.q, take(n(LayerTensor::kAttnQ), {c.heads * qk, hidden}, true, heads_rows));
      }
      if (!tensors.count(mla_latent_name(l)))
        return not_found("tensor " + n(LayerTensor::kAttnKvAMqa) + " [" +
                         std::to_string(c.kv_lora_rank + c.qk_rope_dim) + ", " + std::to_string(hidden) +
                         "] is missing");
      consumed.insert(n(LayerTensor::kAttnKvAMqa));
      QRT_ASSIGN_OR_RETURN(L.kv_latent, take(mla_latent_name(l), {c.kv_lora_rank, hidden}, true));
      QRT_ASSIGN_OR_RETURN(L.k_rope, take(mla_rope_key_name(l), {c.qk_rope_dim, hidden}, true));
      QRT_ASSIGN_OR_RETURN(L.kv_a_norm, take_norm(n(LayerTensor::kAttnKvANorm), c.kv_lora_rank));
      std::vector<std::string> read;
      QRT_ASSIGN_OR_RETURN(MlaStacks stacks, build_mla_stacks(tensors, l, c, rank * heads_, heads_, &read));
      for (const std::string& name : read) {
        consumed.insert(name);
        if (options.on_tensor_loaded) options.on_tensor_loaded(tensors.at(name).bytes());
      }
      for (auto [stack, out] : {std::pair{&stacks.q_absorb, &L.q_absorb}, std::pair{&stacks.v_expand, &L.v_expand}}) {
        QRT_ASSIGN_OR_RETURN(*out, backend_.upload_weight(stack->tensor));  // copied: the stack goes
        uploaded_.push_back(*out);
      }
      QRT_ASSIGN_OR_RETURN(L.o, take(n(LayerTensor::kAttnOutput), {hidden, c.heads * v_dim}, true,
                                     quant::DimRange{1, int64_t{rank} * heads_ * v_dim, int64_t{heads_} * v_dim}));
    } else {
      QRT_ASSIGN_OR_RETURN(L.q, take(n(LayerTensor::kAttnQ), {q_dim, hidden}, true, q_rows));
      QRT_ASSIGN_OR_RETURN(L.k, take(n(LayerTensor::kAttnK), {kv_dim, hidden}, true, kv_rows));
      QRT_ASSIGN_OR_RETURN(L.v, take(n(LayerTensor::kAttnV), {kv_dim, hidden}, true, kv_rows));
      QRT_ASSIGN_OR_RETURN(L.o, take(n(LayerTensor::kAttnOutput), {hidden, q_dim}, true, o_cols));
    }
    if (c.attention_bias) {
      QRT_ASSIGN_OR_RETURN(L.q_bias, take(b(LayerTensor::kAttnQ), {q_dim}, true, as_bias(q_rows)));
      QRT_ASSIGN_OR_RETURN(L.k_bias, take(b(LayerTensor::kAttnK), {kv_dim}, true, as_bias(kv_rows)));
      QRT_ASSIGN_OR_RETURN(L.v_bias, take(b(LayerTensor::kAttnV), {kv_dim}, true, as_bias(kv_rows)));
    }
    if (c.attention_out_bias) {
      QRT_ASSIGN_OR_RETURN(L.o_bias, take_reduced_bias(b(LayerTensor::kAttnOutput), {hidden}));
    }
    if (c.qk_norm) {
      QRT_ASSIGN_OR_RETURN(L.q_norm, take_norm(n(LayerTensor::kAttnQNorm), head_dim_));
      QRT_ASSIGN_OR_RETURN(L.k_norm, take_norm(n(LayerTensor::kAttnKNorm), head_dim_));
    }
    // llama.cpp's gpt-oss GGUF stores the MLP's input norm as post_attention_norm (no Gemma post-norms there).
    const bool ffn_norm_as_post = !c.post_norms && !tensors.count(n(LayerTensor::kFfnNorm)) &&
                                  tensors.count(n(LayerTensor::kAttnPostNorm));
    QRT_ASSIGN_OR_RETURN(L.ffn_norm,
                         take_norm(n(ffn_norm_as_post ? LayerTensor::kAttnPostNorm : LayerTensor::kFfnNorm), hidden));
    if (c.attention_sinks) {
      QRT_ASSIGN_OR_RETURN(std::vector<float> sinks, host_values(n(LayerTensor::kAttnSinks), {c.heads}));
      QRT_ASSIGN_OR_RETURN(L.sinks, upload_floats(std::vector<float>(sinks.begin() + int64_t{rank} * heads_,
                                                                     sinks.begin() + int64_t{rank + 1} * heads_)));
    }
    if (c.post_norms) {
      QRT_ASSIGN_OR_RETURN(L.attn_post_norm, take_norm(n(LayerTensor::kAttnPostNorm), hidden));
      QRT_ASSIGN_OR_RETURN(L.ffn_post_norm, take_norm(n(LayerTensor::kFfnPostNorm), hidden));
    }
    L.moe = moe && l >= c.leading_dense_layers;
    if (L.moe) {
      const int64_t e = c.experts, f = c.expert_ffn;
      QRT_ASSIGN_OR_RETURN(L.router, take(n(LayerTensor::kFfnGateInp), {e, hidden}, true));
      // Every rank keeps every expert but a slice of its intermediate width, when all three stacks allow that
      // slice; otherwise whole experts are replicated on every rank.
      std::optional<quant::DimRange> gate_up_rows, down_cols;
      if (world > 1) {
        const std::vector<int64_t> gate_shape{e, f, hidden}, down_shape{e, hidden, f};
        if (f % world == 0) {
          gate_up_rows = quant::DimRange{1, rank * (f / world), f / world};
          down_cols = quant::DimRange{2, gate_up_rows->start, gate_up_rows->length};
        }
        auto fits = [&](LayerTensor t, const std::vector<int64_t>& shape, const std::optional<quant::DimRange>& r) {
          auto it = tensors.find(n(t));
          return r && (it == tensors.end() || it->second.shape != shape ||
                       quant::check_slice(it->second.format, it->second.params, shape, *r).ok());
        };
        if (!fits(LayerTensor::kFfnGateExps, gate_shape, gate_up_rows) ||
            !fits(LayerTensor::kFfnUpExps, gate_shape, gate_up_rows) ||
            !fits(LayerTensor::kFfnDownExps, down_shape, down_cols)) {
          gate_up_rows.reset();
          down_cols.reset();
          L.experts_replicated = true;
          ++replicated_layers;
        }
      }
      L.expert_ffn = gate_up_rows ? gate_up_rows->length : f;
      expert_ffn_ = std::max(expert_ffn_, static_cast<int>(L.expert_ffn));
      QRT_ASSIGN_OR_RETURN(L.gate_exps, take(n(LayerTensor::kFfnGateExps), {e, f, hidden}, true, gate_up_rows));
      QRT_ASSIGN_OR_RETURN(L.up_exps, take(n(LayerTensor::kFfnUpExps), {e, f, hidden}, true, gate_up_rows));
      QRT_ASSIGN_OR_RETURN(L.down_exps, take(n(LayerTensor::kFfnDownExps), {e, hidden, f}, true, down_cols));
      if (c.router_bias) {
        QRT_ASSIGN_OR_RETURN(L.router_bias, take(b(LayerTensor::kFfnGateInp), {e}, true));
      }
      if (c.expert_choice_bias) {
        QRT_ASSIGN_OR_RETURN(std::vector<float> bias, host_values(b(LayerTensor::kExpProbsB), {e}));
        QRT_ASSIGN_OR_RETURN(L.choice_bias, upload_floats(bias));
      }
      if (c.shared_expert_ffn > 0) {
        // Shared experts: a dense MLP, split among the ranks like one where the format's blocks allow, else whole on
        // every rank (moe_mlp adds it once).
        const int64_t sf = c.shared_expert_ffn;
        const int64_t slice = sf / world;
        std::optional<quant::DimRange> rows = quant::DimRange{0, rank * slice, slice}, cols;
        cols = quant::DimRange{1, rows->start, rows->length};
        auto fits = [&](LayerTensor t, const std::optional<quant::DimRange>& r) {
          auto it = tensors.find(n(t));
          const QuantTensor* q = it == tensors.end() ? nullptr : &it->second;
          return q == nullptr || quant::check_slice(q->format, q->params, q->shape, *r).ok();
        };
        L.shared_replicated = world > 1 && (sf % world != 0 || !(fits(LayerTensor::kFfnGateShexp, rows) &&
                                                                 fits(LayerTensor::kFfnUpShexp, rows) &&
                                                                 fits(LayerTensor::kFfnDownShexp, cols)));
        if (L.shared_replicated) {
          rows.reset();
          cols.reset();
          ++replicated_shared;
        }
        L.shared_ffn = L.shared_replicated ? sf : slice;
        QRT_ASSIGN_OR_RETURN(L.gate_shexp, take(n(LayerTensor::kFfnGateShexp), {sf, hidden}, true, rows));
        QRT_ASSIGN_OR_RETURN(L.up_shexp, take(n(LayerTensor::kFfnUpShexp), {sf, hidden}, true, rows));
        QRT_ASSIGN_OR_RETURN(L.down_shexp, take(n(LayerTensor::kFfnDownShexp), {hidden, sf}, true, cols));
      }
      if (c.expert_bias) {
        // Each expert's columns of this rank (all of them when the experts are replicated).
        const int64_t first = gate_up_rows ? gate_up_rows->start : 0, width = L.expert_ffn;
        for (auto [tensor, out] : {std::pair{LayerTensor::kFfnGateExps, &L.gate_exps_bias},
                                   std::pair{LayerTensor::kFfnUpExps, &L.up_exps_bias}}) {
          QRT_ASSIGN_OR_RETURN(std::vector<float> all, host_values(b(tensor), {e, f}));
          std::vector<float> mine(static_cast<size_t>(e * width));
          for (int64_t x = 0; x < e; ++x)
            std::copy_n(all.begin() + x * f + first, width, mine.begin() + x * width);
          QRT_ASSIGN_OR_RETURN(*out, upload_floats(mine));
        }
        QRT_ASSIGN_OR_RETURN(std::vector<float> down_bias, host_values(b(LayerTensor::kFfnDownExps), {e, hidden}));
        if (L.experts_replicated || rank == 0) {
          QRT_ASSIGN_OR_RETURN(L.down_exps_bias, upload_floats(down_bias));
        }
      }
    } else {
      QRT_ASSIGN_OR_RETURN(L.gate, take(n(LayerTensor::kFfnGate), {c.ffn, hidden}, true, ffn_rows));
      QRT_ASSIGN_OR_RETURN(L.up, take(n(LayerTensor::kFfnUp), {c.ffn, hidden}, true, ffn_rows));
      QRT_ASSIGN_OR_RETURN(L.down, take(n(LayerTensor::kFfnDown), {hidden, c.ffn}, true, ffn_cols));
      if (c.mlp_bias) {
        QRT_ASSIGN_OR_RETURN(L.gate_bias, take(b(LayerTensor::kFfnGate), {c.ffn}, true, as_bias(ffn_rows)));
        QRT_ASSIGN_OR_RETURN(L.up_bias, take(b(LayerTensor::kFfnUp), {c.ffn}, true, as_bias(ffn_rows)));
        QRT_ASSIGN_OR_RETURN(L.down_bias, take_reduced_bias(b(LayerTensor::kFfnDown), {hidden}));
      }
    }
  }

  if (replicated_shared > 0)
    log_warn("the shared experts' quantization geometry of ", replicated_shared, " of ", c.layers,
             " layers does not allow a split among ", world, " ranks; they are whole on every rank");
  if (replicated_layers > 0)
    log_warn("the expert quantization geometry of ", replicated_layers, " of ", c.layers,
             " layers does not allow a split among ", world, " ranks; their experts are replicated on every rank");

  // RoPE frequencies, with GGUF's per-pair rope_freqs factors (Llama 3.1 files) when present.
  const int rot_dim = c.rope.rot_dim == 0 ? head_dim_ : c.rope.rot_dim;
  std::vector<float> freq_factors;
  const std::string rope_freqs(names::kRopeFreqs);
  if (auto it = tensors.find(rope_freqs); it != tensors.end()) {
    consumed.insert(rope_freqs);
    const QuantTensor& t = it->second;
    if (t.shape != std::vector<int64_t>{rot_dim / 2})
      return invalid_argument("tensor " + rope_freqs + " (" + t.name + "): expected shape [" +
                              std::to_string(rot_dim / 2) + "], found " + shape_string(t.shape));
    auto parts = cpu::part_sizes(t.format, 1, t.cols(), t.params);
    if (!parts.ok()) return parts.status().with_context("tensor " + t.name);
    if (parts->data != t.data.size || parts->scales != t.scales.size || parts->biases != t.biases.size ||
        (t.data.size && !t.data.data))
      return format_error("tensor " + t.name + ": part sizes do not match its format and shape");
    freq_factors.resize(static_cast<size_t>(t.cols()));
    QRT_TRY(cpu::dequantize(t.format, t.view(), freq_factors.data()));
  }
  // LongRoPE factors from GGUF's tensors (config.json carries them in rope_scaling).
  for (auto [name, out] : {std::pair{names::kRopeFactorsLong, &c.rope.long_factor},
                           std::pair{names::kRopeFactorsShort, &c.rope.short_factor}}) {
    auto it = tensors.find(std::string(name));
    if (it == tensors.end()) continue;
    consumed.insert(std::string(name));
    const QuantTensor& t = it->second;
    if (t.shape != std::vector<int64_t>{rot_dim / 2})
      return invalid_argument("tensor " + std::string(name) + " (" + t.name + "): expected shape [" +
                              std::to_string(rot_dim / 2) + "], found " + shape_string(t.shape));
    out->resize(static_cast<size_t>(t.cols()));
    QRT_TRY(cpu::dequantize(t.format, t.view(), out->data()));
  }
  const int64_t context = options.context_length > 0 ? options.context_length : c.context_length;
  QRT_ASSIGN_OR_RETURN(rope_, make_rope_table(c.rope, head_dim_, freq_factors.empty() ? nullptr : &freq_factors,
                                              context));
  QRT_ASSIGN_OR_RETURN(rope_inv_freq_, allocate_scoped(backend_, rope_.inv_freq.size() * sizeof(float)));
  QRT_TRY(backend_.upload(rope_.inv_freq.data(), rope_inv_freq_.buffer().ptr, rope_.inv_freq.size() * sizeof(float)));
  if (c.rope_local_theta > 0.0f) {
    // The windowed layers' own RoPE (gemma3): their base, no scaling, the layout and rotary dims of the rest.
    RopeConfig local;
    local.layout = c.rope.layout;
    local.rot_dim = c.rope.rot_dim;
    local.theta = c.rope_local_theta;
    QRT_ASSIGN_OR_RETURN(rope_local_, make_rope_table(local, head_dim_, nullptr, context));
    QRT_ASSIGN_OR_RETURN(rope_local_inv_freq_, allocate_scoped(backend_, rope_local_.inv_freq.size() * sizeof(float)));
    QRT_TRY(backend_.upload(rope_local_.inv_freq.data(), rope_local_inv_freq_.buffer().ptr,
                            rope_local_.inv_freq.size() * sizeof(float)));
  }

  // Every tensor must be used: a leftover one means the config does not describe these weights (a bias or a
  // q/k norm the flags leave out would otherwise be silently dropped).
  std::string unused;
  int unused_count = 0;
  auto extra_layer = [&](const std::string& name) {  // blk.N. of a layer past the last the config runs
    for (int l = c.layers; l < c.layers + c.extra_layers; ++l)
      if (name.starts_with("blk." + std::to_string(l) + ".")) return true;
    return false;
  };
  for (const auto& [name, t] : tensors) {
    if (consumed.count(name) || extra_layer(name)) continue;
    if (unused_count++ < 5) unused += (unused.empty() ? "" : ", ") + name;
  }
  if (unused_count > 0)
    return invalid_argument(std::to_string(unused_count) + " tensor(s) not used by this config: " + unused +
                            (unused_count > 5 ? ", ..." : ""));
  return ok_status();
}

uint64_t kv_cache_bytes_per_token(const ModelConfig& config, int tp_world, KvType kv_type) {
  const int world = tp_world > 0 ? tp_world : 1;
  if (config.kv_lora_rank > 0)  // latent attention: one [RoPE key | latent] row per layer on every rank, no values
    return static_cast<uint64_t>(int64_t{config.layers} *
                                 kv_row_bytes(kv_type, int64_t{config.qk_rope_dim} + config.kv_lora_rank)) +
           sizeof(int32_t);
  // KV heads split among the ranks when they divide, else one replicated head per rank (as load() decides).
  const int64_t kv_heads = config.kv_heads % world == 0 ? config.kv_heads / world : 1;
  const int64_t head_dim = config.head_dim > 0 ? config.head_dim : (config.heads > 0 ? config.hidden / config.heads : 0);
  return static_cast<uint64_t>(2 * int64_t{config.layers} * kv_row_bytes(kv_type, kv_heads * head_dim)) +
         sizeof(int32_t);
}

Result<std::unique_ptr<Sequence>> Transformer::new_sequence(int64_t capacity) {
  const int64_t kv_dim = int64_t{kv_heads_} * head_dim_;
  // Bound the request before multiplying so that no capacity can overflow the byte count.
  // Slots are int32 on the device.
  if (capacity <= 0 || capacity > INT32_MAX || capacity > (int64_t{1} << 40) / (int64_t{config_.layers} * kv_dim * 4))
    return invalid_argument("sequence capacity " + std::to_string(capacity) + " is not positive or too large");
  std::unique_ptr<Sequence> seq(new Sequence());
  seq->capacity_ = capacity;
  const uint64_t kv_bytes = static_cast<uint64_t>(config_.layers) * capacity * kv_row_bytes(kv_type_, kv_dim);
  QRT_ASSIGN_OR_RETURN(seq->k_cache_, allocate_scoped(backend_, kv_bytes));
  if (!values_are_keys()) {
    QRT_ASSIGN_OR_RETURN(seq->v_cache_, allocate_scoped(backend_, kv_bytes));
  }
  QRT_ASSIGN_OR_RETURN(seq->positions_, allocate_scoped(backend_, static_cast<uint64_t>(capacity) * sizeof(int32_t)));
  const uint64_t workspace = backend_.attention_workspace_bytes(1, attention_params(0), capacity);
  if (workspace > 0) {
    QRT_ASSIGN_OR_RETURN(seq->attention_workspace_, allocate_scoped(backend_, workspace));
  }
  return seq;
}

Status Transformer::ensure_scratch(Sequence& seq, int64_t tokens) {
  if (tokens <= seq.scratch_tokens_) return ok_status();
  seq.decode_graph_.reset();  // it holds the old buffers' addresses
  return ensure_scratch_buffers(seq.scratch_, seq.scratch_tokens_, tokens);
}

std::vector<int64_t> Transformer::scratch_per_token() const {
  const ModelConfig& c = config_;
  const int64_t top_k = c.experts > 0 ? c.experts_used : 0;
  const int64_t ffn_width = std::max<int64_t>({ffn_, top_k * expert_ffn_, c.shared_expert_ffn});
  std::vector<int64_t> per_token(kScratchCount, 0);
  per_token[kX] = per_token[kH] = per_token[kProj] = c.hidden;
  per_token[kQ] = per_token[kAttn] = int64_t{heads_} * head_dim_;
  per_token[kK] = per_token[kV] = int64_t{kv_heads_} * head_dim_;
  per_token[kGate] = per_token[kUp] = ffn_width;
  if (values_are_keys()) {
    // transformer_mla.cpp: q [heads, nope + rope] (then the expanded values [heads, v]) in kQ, q's low rank and the
    // latent in kK, the RoPE key in kV, the cache row in kUp, the absorbed queries in kGate, their attention in kAttn.
    const int64_t row = head_dim_;  // rope + kv_lora
    per_token[kQ] = int64_t{heads_} * std::max(c.qk_nope_dim + c.qk_rope_dim, c.v_head_dim);
    per_token[kK] = std::max(c.q_lora_rank, c.kv_lora_rank);
    per_token[kV] = c.qk_rope_dim;
    per_token[kUp] = std::max(ffn_width, row);
    per_token[kGate] = std::max(ffn_width, heads_ * row);
    per_token[kAttn] = heads_ * row;
    per_token[kHeadIds] = heads_;
  }
  per_token[kExpertOut] = top_k * c.hidden;
  per_token[kRouter] = c.experts;
  per_token[kExpertIds] = per_token[kExpertW] = top_k;
  per_token[kStep] = 5;
  per_token[kLogits] = c.vocab_size;
  return per_token;
}

Status Transformer::ensure_scratch_buffers(std::vector<ScopedBuffer>& scratch, int64_t& have, int64_t tokens) {
  if (tokens <= have) return ok_status();
  const std::vector<int64_t> per_token = scratch_per_token();
  scratch.clear();
  have = 0;
  for (int i = 0; i < kScratchCount; ++i) {
    QRT_ASSIGN_OR_RETURN(ScopedBuffer b, allocate_scoped(backend_, static_cast<uint64_t>(tokens * per_token[i]) * 4));
    scratch.push_back(std::move(b));
  }
  if (per_token[kHeadIds] > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(tokens * per_token[kHeadIds]));
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % static_cast<size_t>(heads_));
    QRT_TRY(backend_.upload(ids.data(), scratch[kHeadIds].buffer().ptr, ids.size() * sizeof(int32_t)));
  }
  have = tokens;
  return ok_status();
}

Status Transformer::forward(Sequence& seq, std::span<const int32_t> tokens, LogitsFor which,
                            std::vector<float>* logits) {
  std::vector<int32_t> positions(tokens.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int32_t>(seq.length() + static_cast<int64_t>(i));
  return forward(seq, tokens, positions, which, logits);
}

Status Transformer::forward(Sequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> positions,
                            LogitsFor which, std::vector<float>* logits) {
  seq.has_last_logits_ = false;  // the logits scratch is about to be overwritten, possibly with every row
  F32View out;
  QRT_TRY(run_forward(seq, tokens, positions, which, &out));
  logits->resize(static_cast<size_t>(out.rows * out.cols));
  Status copied = backend_.download(out.data, logits->data(), logits->size() * sizeof(float));
  if (!copied.ok()) {
    seq.length_ -= static_cast<int64_t>(tokens.size());  // as if the pass had not happened
    return copied;
  }
  return ok_status();
}

Status Transformer::forward_keep_logits(Sequence& seq, std::span<const int32_t> tokens) {
  std::vector<int32_t> positions(tokens.size());
  for (size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int32_t>(seq.length() + static_cast<int64_t>(i));
  seq.has_last_logits_ = false;
  F32View out;
  QRT_TRY(run_forward(seq, tokens, positions, LogitsFor::kLast, &out));
  seq.has_last_logits_ = true;
  return ok_status();
}

Status Transformer::sample_last(Sequence& seq, const SampleStep& step, int32_t* id) {
  if (!seq.has_last_logits_) return invalid_argument("sample_last: no logits kept by a forward pass of this sequence");
  const ConstF32View logits = seq.scratch_[kLogits].view<float>(1, config_.vocab_size);
  const I32View ids = seq.scratch_[kStep].view<int32_t>(1, 1);  // free between passes
  QRT_TRY(backend_.sample(logits, step, ids));
  return backend_.download(ids.data, id, sizeof(int32_t));
}

Status Transformer::download_last_logits(Sequence& seq, std::vector<float>* logits) {
  if (!seq.has_last_logits_)
    return invalid_argument("download_last_logits: no logits kept by a forward pass of this sequence");
  logits->resize(static_cast<size_t>(config_.vocab_size));
  return backend_.download(seq.scratch_[kLogits].view<float>(1, config_.vocab_size).data, logits->data(),
                           logits->size() * sizeof(float));
}

Status Transformer::check_pass(const Sequence& seq, std::span<const int32_t> tokens,
                               std::span<const int32_t> positions) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return invalid_argument("forward: no tokens");
  if (positions.size() != tokens.size())
    return invalid_argument("forward: " + std::to_string(positions.size()) + " positions for " + std::to_string(n) +
                            " tokens");
  if (seq.length_ + n > seq.capacity_)
    return out_of_range("forward: " + std::to_string(n) + " tokens do not fit the sequence (" +
                        std::to_string(seq.length_) + " of " + std::to_string(seq.capacity_) + " used)");
  // The device cannot report a bad id, so every id is checked here before upload.
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[static_cast<size_t>(i)] < 0 || tokens[static_cast<size_t>(i)] >= config_.vocab_size)
      return out_of_range("forward: token id " + std::to_string(tokens[static_cast<size_t>(i)]) +
                          " outside the vocabulary of " + std::to_string(config_.vocab_size));
    if (positions[static_cast<size_t>(i)] < 0)
      return out_of_range("forward: negative position " + std::to_string(positions[static_cast<size_t>(i)]));
  }
  return ok_status();
}

Status Transformer::stage_pass(std::vector<ScopedBuffer>& scratch, Sequence& seq, std::span<const int32_t> tokens,
                               std::span<const int32_t> positions, bool* at_slots) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> rows;  // the cache rows of slots [length, length + n), inside the capacity (check_pass)
  QRT_TRY(prepare_slots(seq, n, &rows));
  // Everything a pass needs from the host, in one upload to a buffer whose address does not change between
  // steps, so that a captured step reads the current values.
  std::vector<int32_t> step(static_cast<size_t>(3 * n + 1));
  *at_slots = true;
  for (int64_t i = 0; i < n; ++i) {
    step[static_cast<size_t>(i)] = tokens[static_cast<size_t>(i)];
    step[static_cast<size_t>(n + i)] = positions[static_cast<size_t>(i)];
    step[static_cast<size_t>(2 * n + i)] = rows[static_cast<size_t>(i)];
    *at_slots = *at_slots && positions[static_cast<size_t>(i)] == seq.length_ + i;
  }
  step[static_cast<size_t>(3 * n)] = static_cast<int32_t>(seq.length_ + n);
  return backend_.upload(step.data(), scratch[kStep].buffer().ptr, step.size() * sizeof(int32_t));
}

Status Transformer::run_forward(Sequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> positions,
                                LogitsFor which, F32View* logits) {
  QRT_TRY(check_pass(seq, tokens, positions));
  const int64_t n = static_cast<int64_t>(tokens.size());
  QRT_TRY(ensure_scratch(seq, n));
  bool at_slots = true;
  QRT_TRY(stage_pass(seq.scratch_, seq, tokens, positions, &at_slots));

  // Final norm and output projection, on the last row only unless every position's logits are wanted.
  const int64_t first_row = which == LogitsFor::kAll ? 0 : n - 1;
  const F32View out = seq.scratch_[kLogits].view<float>(n - first_row, config_.vocab_size);
  const CacheRows all_rows[] = {{&seq, 0, n}};
  if (n == 1 && graphs_ && backend_.supports_graphs() && seq.decode_graph_ == nullptr) {
    auto graph = backend_.capture(
        [&] { return issue_forward(seq.scratch_, all_rows, n, first_row, out, {}, DecodeRows()); });
    if (graph.ok()) {
      seq.decode_graph_ = std::move(*graph);
    } else if (graph.status().code() == ErrorCode::kUnsupported) {
      log_warn("decode steps run op by op: ", graph.status().to_string());
      graphs_ = false;
    } else {
      return graph.status();
    }
  }
  if (n == 1 && seq.decode_graph_ != nullptr) {
    QRT_TRY(backend_.launch(*seq.decode_graph_));
  } else {
    QRT_TRY(issue_forward(seq.scratch_, all_rows, n, first_row, out, {}, DecodeRows()));
  }
  *logits = out;
  seq.length_ += n;
  record_tokens(seq, tokens, at_slots);
  return ok_status();
}

Status Transformer::issue_forward(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups, int64_t n,
                                  int64_t first_row, F32View logits, ConstI32View gather, const DecodeRows& decode) {
  const F32View x = scratch[kX].view<float>(n, config_.hidden);
  const F32View h = scratch[kH].view<float>(n, config_.hidden);
  QRT_TRY(backend_.embed(token_embd_, scratch[kStep].view<int32_t>(n, 1), x));
  if (config_.embedding_scale != 1.0f) QRT_TRY(backend_.scale(x, config_.embedding_scale, x));
  // The first layer's input norm; every later norm (the next layer's, then the output norm) is fused with the
  // residual add before it (Backend::add_rms_norm), so each layer starts from h = its normalized input.
  const WeightHandle first_norm = config_.layers > 0 ? layers_[0].attn_norm : output_norm_;
  QRT_TRY(backend_.rms_norm(x, first_norm, config_.norm_eps, h));
  for (int l = 0; l < config_.layers; ++l) {
    Status s = run_layer(scratch, groups, l, n, x, decode);
    if (!s.ok()) return s.with_context("layer " + std::to_string(l));
  }
  if (gather.data != nullptr) {
    // The wanted rows of h side by side (kProj is free after the last layer), then the output head on them only.
    const F32View picked = scratch[kProj].view<float>(gather.rows, config_.hidden);
    QRT_TRY(backend_.gather_rows(h, gather, picked));
    QRT_TRY(backend_.linear(picked, output_, WeightHandle{}, logits));
  } else {
    const int64_t rows = n - first_row;
    QRT_TRY(backend_.linear(h.row_range(first_row, rows), output_, WeightHandle{}, logits));
  }
  if (config_.final_softcap > 0.0f) QRT_TRY(backend_.softcap(logits, config_.final_softcap, logits));
  return ok_status();
}

AttentionParams Transformer::attention_params(int layer_index) const {
  const ModelConfig& c = config_;
  const bool windowed = layers_[static_cast<size_t>(layer_index)].windowed;
  const float scale = c.attention_scale > 0.0f ? c.attention_scale : static_cast<float>(1.0 / std::sqrt(head_dim_));
  const ScopedBuffer& sinks = layers_[static_cast<size_t>(layer_index)].sinks;
  return {heads_,
          kv_heads_,
          head_dim_,
          scale,
          windowed ? c.sliding_window : 0,
          c.attn_softcap,
          sinks.buffer().ptr ? static_cast<const float*>(sinks.buffer().ptr) : nullptr,
          values_are_keys()};
}

Status Transformer::run_layer(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups, int layer_index,
                              int64_t n, F32View x, const DecodeRows& decode) {
  const ModelConfig& c = config_;
  const Layer& L = layers_[static_cast<size_t>(layer_index)];
  Backend& be = backend_;
  auto f32 = [&](int which_buffer, int64_t rows, int64_t cols) {
    return scratch[static_cast<size_t>(which_buffer)].view<float>(rows, cols);
  };
  const int64_t hidden = c.hidden, q_dim = int64_t{heads_} * head_dim_, kv_dim = int64_t{kv_heads_} * head_dim_;
  const F32View h = f32(kH, n, hidden), proj = f32(kProj, n, hidden);

  // Attention block (h holds rms_norm(x, attn_norm): issue_forward's first norm or the previous layer's last op).
  if (values_are_keys()) {
    QRT_TRY(mla_attention(scratch, groups, layer_index, n, decode, proj));
  } else {
    const F32View q = f32(kQ, n, q_dim), k = f32(kK, n, kv_dim), v = f32(kV, n, kv_dim), attn = f32(kAttn, n, q_dim);
    const Backend::LinearPart qkv[] = {{L.q, L.q_bias, q}, {L.k, L.k_bias, k}, {L.v, L.v_bias, v}};
    QRT_TRY(be.linear_same_input(h, qkv));
    if (c.qk_norm) {
      const F32View q_heads = q.reshaped(n * heads_, head_dim_), k_heads = k.reshaped(n * kv_heads_, head_dim_);
      QRT_TRY(be.rms_norm(q_heads, L.q_norm, c.norm_eps, q_heads));
      QRT_TRY(be.rms_norm(k_heads, L.k_norm, c.norm_eps, k_heads));
    }
    QRT_TRY(attend(scratch, groups, layer_index, n, decode, q, k, v, attn));
    QRT_TRY(be.linear(attn, L.o, L.o_bias, proj));
  }
  QRT_TRY(be.all_reduce_sum(proj));
  if (c.post_norms) QRT_TRY(be.rms_norm(proj, L.attn_post_norm, c.norm_eps, proj));

  // MLP block.
  QRT_TRY(be.add_rms_norm(x, proj, L.ffn_norm, c.norm_eps, h));
  if (!L.moe) {
    const F32View gate = f32(kGate, n, ffn_), up = f32(kUp, n, ffn_);
    const Backend::LinearPart gate_up[] = {{L.gate, L.gate_bias, gate}, {L.up, L.up_bias, up}};
    QRT_TRY(be.linear_same_input(h, gate_up));
    QRT_TRY(gated_activation(gate, up));
    QRT_TRY(be.linear(gate, L.down, L.down_bias, proj));
  } else {
    QRT_TRY(moe_mlp(scratch, layer_index, n, proj));
  }
  if (!L.moe || !L.experts_replicated) QRT_TRY(be.all_reduce_sum(proj));
  if (c.post_norms) QRT_TRY(be.rms_norm(proj, L.ffn_post_norm, c.norm_eps, proj));
  // The residual add, and the norm of what comes next: the next layer's input, or the output head's.
  const bool last = layer_index + 1 == c.layers;
  const WeightHandle next_norm = last ? output_norm_ : layers_[static_cast<size_t>(layer_index) + 1].attn_norm;
  QRT_TRY(be.add_rms_norm(x, proj, next_norm, c.norm_eps, h));
  return ok_status();
}

Status Transformer::attend(std::vector<ScopedBuffer>& scratch, std::span<const CacheRows> groups, int layer_index,
                           int64_t n, const DecodeRows& decode, F32View q, F32View k, ConstF32View v, F32View attn) {
  Backend& be = backend_;
  const Layer& L = layers_[static_cast<size_t>(layer_index)];
  // RoPE, the KV write and attention, each sequence on its rows and its own cache. The step scratch holds token ids
  // [n], positions [n], cache slots [n], then one key count per group. Sequences of one pool write through one op
  // (the slots are pool rows); the leading one-token groups of `decode` attend through one op.
  const I32View step = scratch[kStep].view<int32_t>(3 * n + static_cast<int64_t>(groups.size()), 1);
  const bool local_rope = L.windowed && !rope_local_.inv_freq.empty();
  const RopeTable& table = local_rope ? rope_local_ : rope_;
  const ScopedBuffer& inv_freq = local_rope ? rope_local_inv_freq_ : rope_inv_freq_;
  const RopeParams rope{table.layout, head_dim_, table.rot_dim, table.attn_factor,
                        inv_freq.view<const float>(static_cast<int64_t>(table.inv_freq.size()), 1)};
  const AttentionParams attention = attention_params(layer_index);
  const auto write_rows = [&](const KvLayerView& cache, int64_t first, int64_t rows) {
    return be.rope_kv_write(q.row_range(first, rows), k.row_range(first, rows), v.row_range(first, rows), heads_,
                            kv_heads_, step.row_range(n + first, rows), rope, cache,
                            step.row_range(2 * n + first, rows));
  };
  const KvPool* pool = groups.empty() ? nullptr : groups[0].seq->pool_;
  const bool one_pool = pool != nullptr && std::all_of(groups.begin(), groups.end(), [&](const CacheRows& r) {
    return r.seq->pool_ == pool;
  });
  if (one_pool) QRT_TRY(write_rows(cache_view(*groups[0].seq, layer_index), 0, n));
  if (decode.items > 0) {
    KvLayerView cache = cache_view(*groups[0].seq, layer_index);
    cache.attention_workspace = decode.workspace;
    QRT_TRY(be.attention_batch(q.row_range(0, decode.items), step.row_range(n, decode.items), cache, decode.tables,
                               step.row_range(3 * n, decode.items), attention,
                               attn.row_range(0, decode.items)));
  }
  for (size_t g = static_cast<size_t>(decode.items); g < groups.size(); ++g) {
    const CacheRows& rows = groups[g];
    const KvLayerView cache = cache_view(*rows.seq, layer_index);
    if (!one_pool) QRT_TRY(write_rows(cache, rows.first_row, rows.rows));
    const ConstI32View key_count = step.row_range(3 * n + static_cast<int64_t>(g), 1);
    QRT_TRY(be.attention(q.row_range(rows.first_row, rows.rows), step.row_range(n + rows.first_row, rows.rows), cache,
                         key_count, attention, attn.row_range(rows.first_row, rows.rows)));
  }
  return ok_status();
}

Status Transformer::gated_activation(F32View gate, ConstF32View up) {
  if (config_.activation == Activation::kGeluTanh) return backend_.gelu_tanh_mul(gate, up, gate);
  if (config_.activation == Activation::kSwigluClamped)
    return backend_.swiglu_clamped_mul(gate, up, config_.swiglu_alpha, config_.swiglu_limit, gate);
  return backend_.silu_mul(gate, up, gate);
}

}  // namespace qrt
