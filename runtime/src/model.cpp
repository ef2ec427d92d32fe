// qrt::Model: from a path or name to a loaded model (loader -> arch config -> canonical names -> backend and
// transformer), its tokenizer and its chat template.
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>

#include "loader/gguf_metadata.hpp"
#include "loader/open_model.hpp"
#include "models/arch/arch.hpp"
#include "models/arch/gguf_metadata_view.hpp"
#include "models/tensor_names.hpp"
#include "qrt/log.hpp"
#include "runtime/src/gguf_tokenizer.hpp"
#include "runtime/src/model_impl.hpp"
#include "runtime/src/session_state.hpp"
#include "backend/cpu_backend.hpp"
#include "backend/make_cuda_backend.hpp"
#include "backend/comm/communicator.hpp"

namespace qrt {
namespace api_detail {

Status on_every_local_rank(ModelImpl& m, const std::function<Status(int)>& fn) {
  return first_rank_failure(m.workers->run([&](int r) -> Status {
    Status s = fn(r);
    if (!s.ok()) (r == 0 ? *m.local_comm : *m.peers[static_cast<size_t>(r - 1)].comm).cancel_group();
    return s;
  }));
}

}  // namespace api_detail

namespace {

using api_detail::ModelImpl;
using api_detail::on_every_local_rank;
using api_detail::PeerRank;
using api_detail::RankWorkers;

// The architecture config and the scheme of the tensor names, from GGUF metadata or config.json.
Result<ModelConfig> map_config(const ModelSource& src, names::NameScheme* scheme) {
  if (src.gguf_metadata) {
    *scheme = names::NameScheme::kGguf;
    return arch::config_from_gguf(arch::GgufMetadataView(*src.gguf_metadata));
  }
  *scheme = names::NameScheme::kHuggingFace;
  if (src.hf_config_json.empty()) return not_found(src.path + ": no config.json describes the model");
  const nlohmann::json config = nlohmann::json::parse(src.hf_config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object())
    return format_error(src.path + ": config.json is not a JSON object");
  return arch::config_from_hf(config);
}

Result<Tokenizer> build_tokenizer(const ModelSource& src) {
  if (!src.tokenizer.tokenizer_json.empty()) {
    QRT_ASSIGN_OR_RETURN(TokenizerSpec spec,
                         tokenizer_spec_from_hf_json(src.tokenizer.tokenizer_json, src.tokenizer.tokenizer_config_json,
                                                     src.path + "/tokenizer.json"));
    return Tokenizer::create(std::move(spec));
  }
  if (src.gguf_metadata && gguf_has_tokenizer(*src.gguf_metadata)) {
    QRT_ASSIGN_OR_RETURN(GgufTokenizerMetadata meta, gguf_tokenizer_metadata(*src.gguf_metadata));
    QRT_ASSIGN_OR_RETURN(TokenizerSpec spec, tokenizer_spec_from_gguf(meta));
    return Tokenizer::create(std::move(spec));
  }
  return not_found(src.path + ": no tokenizer (neither tokenizer.json nor GGUF tokenizer.ggml.tokens)");
}

// chat_template.jinja wins over the template the tokenizer front end found (tokenizer_config.json's
// chat_template, or GGUF tokenizer.chat_template), as transformers does.
void load_chat_template(const ModelSource& src, ModelImpl* m) {
  std::string source = src.tokenizer.chat_template;
  if (source.empty()) source = m->tokenizer->chat_template();
  if (source.empty()) {
    m->chat_template_status = not_found(src.path + " has no chat template");
    return;
  }
  auto parsed = chat::ChatTemplate::parse(source, src.path + " chat template");
  if (!parsed.ok()) {
    // Plain prompts still work; the error is reported when a chat is rendered.
    log_warn("chat template unusable: ", parsed.status().message());
    m->chat_template_status = parsed.status();
    return;
  }
  m->chat_template = std::move(*parsed);
  m->chat_template_status = ok_status();
}

// One rank's backend: on the CPU, all-reducing through `comm` (host collectives; null on a single rank); on CUDA,
// on GPU `device`, all-reducing through an NCCL communicator made over `comm` (collective over its ranks).
Result<std::unique_ptr<Backend>> create_backend(const ModelOptions& options, Communicator* comm, int device,
                                                std::unique_ptr<Communicator>* device_comm) {
  switch (options.device) {
    case Device::kCpu: return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(comm));
    case Device::kCuda: {
      if (comm) {
        QRT_ASSIGN_OR_RETURN(*device_comm, make_nccl_communicator(*comm, device));
      }
      return make_cuda_backend(device, device_comm->get());
    }
  }
  return invalid_argument("unknown device");
}

// The backends of every rank this process holds: the one of a single rank or MPI rank, or those of the in-process
// group (ModelOptions::tensor_parallel).
Status create_backends(const ModelOptions& options, ModelImpl* m) {
  if (m->peers.empty() && !m->local_comm) {
    const int device = options.device_index + (m->comm ? m->comm->local_rank() : 0);
    QRT_ASSIGN_OR_RETURN(m->backend, create_backend(options, m->comm.get(), device, &m->device_comm));
    return ok_status();
  }
  return on_every_local_rank(*m, [&](int r) -> Status {
    const int device = options.device_index + r;
    if (r == 0) {
      QRT_ASSIGN_OR_RETURN(m->backend, create_backend(options, m->local_comm.get(), device, &m->device_comm));
    } else {
      PeerRank& peer = m->peers[static_cast<size_t>(r - 1)];
      QRT_ASSIGN_OR_RETURN(peer.backend, create_backend(options, peer.comm.get(), device, &peer.device_comm));
    }
    return ok_status();
  });
}

// Everything after the communicator: the same steps on every rank, with no collective among them, so that a
// failure on one rank cannot leave the others waiting (the caller agrees on the outcome).
Status build(const std::string& path_or_name, const ModelOptions& options, ModelImpl* m) {
  // Fail on an unusable device before reading gigabytes.
  QRT_TRY(create_backends(options, m));

  OpenOptions open_options;
  open_options.verify_digests = options.verify_ollama_digests;
  QRT_ASSIGN_OR_RETURN(ModelSource src, open_model_source(path_or_name, open_options));

  names::NameScheme scheme{};
  auto config = map_config(src, &scheme);
  if (!config.ok()) return config.status().with_context(path_or_name);
  m->config = std::move(*config);
  auto canonical = names::canonicalize(src.tensors, scheme);
  if (!canonical.ok()) return canonical.status().with_context(path_or_name);
  // GGUF does not record biases, q/k norms or tied embeddings: the tensors say.
  if (scheme == names::NameScheme::kGguf) arch::apply_tensor_presence(canonical->tensors, &m->config);

  auto tokenizer = build_tokenizer(src);
  if (!tokenizer.ok()) return tokenizer.status().with_context(path_or_name);
  m->tokenizer = std::move(*tokenizer);
  load_chat_template(src, m);

  // Load progress over every rank of this process: each rank takes every tensor (or its slice of it).
  std::mutex progress_mutex;
  uint64_t progress_done = 0, progress_total = 0;
  for (const auto& [name, t] : canonical->tensors) progress_total += t.bytes();
  progress_total *= 1 + m->peers.size();
  std::function<void(uint64_t)> on_tensor_loaded;
  if (options.on_load_progress)
    on_tensor_loaded = [&](uint64_t bytes) {
      std::lock_guard lock(progress_mutex);
      progress_done += bytes;
      options.on_load_progress(progress_done, progress_total);
    };
  // The context sessions get by default; LongRoPE (Phi-3) picks its factor set by it.
  const int64_t trained = m->config.context_length;
  const int64_t default_context = options.context_length > 0 ? options.context_length
                                  : trained > 0              ? std::min<int64_t>(trained, kDefaultContextCap)
                                                             : kDefaultContextCap;
  if (m->peers.empty()) {
    TransformerOptions transformer_options;
    transformer_options.kv_type = options.kv_type;
    transformer_options.context_length = default_context;
    transformer_options.on_tensor_loaded = on_tensor_loaded;
    if (m->comm) transformer_options.tp = {m->comm->rank(), m->comm->world()};
    auto transformer = Transformer::create(*m->backend, m->config, canonical->tensors, transformer_options);
    if (!transformer.ok()) return transformer.status().with_context(path_or_name);
    m->transformer = std::move(*transformer);
  } else {
    // Each rank uploads its own slices, all at once.
    const int world = 1 + static_cast<int>(m->peers.size());
    Status loaded = on_every_local_rank(*m, [&](int r) -> Status {
      TransformerOptions transformer_options;
      transformer_options.kv_type = options.kv_type;
      transformer_options.context_length = default_context;
      transformer_options.on_tensor_loaded = on_tensor_loaded;
      transformer_options.tp = {r, world};
      Backend& backend = r == 0 ? *m->backend : *m->peers[static_cast<size_t>(r - 1)].backend;
      QRT_ASSIGN_OR_RETURN(auto transformer,
                           Transformer::create(backend, m->config, canonical->tensors, transformer_options));
      (r == 0 ? m->transformer : m->peers[static_cast<size_t>(r - 1)].transformer) = std::move(transformer);
      return ok_status();
    });
    if (!loaded.ok()) return loaded.with_context(path_or_name);
  }

  ModelInfo& info = m->info;
  info.path = path_or_name;
  info.source_kind = source_kind_name(src.kind);
  info.architecture = m->config.architecture;
  info.device = m->backend->name();
  info.vocab_size = m->config.vocab_size;
  info.trained_context = trained;
  info.default_context = default_context;
  info.layers = m->config.layers;
  info.hidden = m->config.hidden;
  info.heads = m->config.heads;
  info.kv_heads = m->config.kv_heads;
  for (const auto& [name, tensor] : canonical->tensors) info.weight_bytes += tensor.bytes();
  info.kv_type = m->transformer->kv_type();
  info.has_chat_template = m->chat_template.has_value();
  info.tp_rank = m->comm ? m->comm->rank() : 0;
  info.tp_world = m->comm ? m->comm->world() : 1 + static_cast<int>(m->peers.size());
  if (static_cast<int64_t>(m->tokenizer->vocab_size()) > m->config.vocab_size) {
    log_warn(path_or_name, ": the tokenizer has ", m->tokenizer->vocab_size(), " tokens but the model only ",
             m->config.vocab_size, "; prompts using the extra tokens are rejected");
  }
  // The weights now live in the backend; the source's mappings are released when `src` goes out of scope.
  return ok_status();
}

Result<std::shared_ptr<ModelImpl>> load(const std::string& path_or_name, const ModelOptions& options) {
  if (options.context_length < 0) return invalid_argument("context length must be >= 0");
  if (options.prompt_batch <= 0) return invalid_argument("prompt batch must be positive");
  auto m = std::make_shared<ModelImpl>();
  m->options = options;
  if (options.tensor_parallel < 0 || options.tensor_parallel > 64)
    return invalid_argument("tensor parallel rank count " + std::to_string(options.tensor_parallel) +
                            " (expected 0 to 64)");
  if (options.use_launcher_ranks) {
    QRT_ASSIGN_OR_RETURN(m->comm, make_communicator_from_environment());
    if (m->comm->world() == 1) m->comm.reset();
  }
  if (options.tensor_parallel > 1) {
    if (m->comm)
      return invalid_argument("tensor parallelism inside one process (" + std::to_string(options.tensor_parallel) +
                              " ranks) cannot be combined with a launch of " + std::to_string(m->comm->world()) +
                              " MPI ranks: use one or the other");
    QRT_ASSIGN_OR_RETURN(auto comms, make_thread_group_communicators(options.tensor_parallel));
    m->local_comm = std::move(comms[0]);
    m->peers.resize(comms.size() - 1);
    for (size_t r = 1; r < comms.size(); ++r) m->peers[r - 1].comm = std::move(comms[r]);
    m->workers = std::make_unique<RankWorkers>(options.tensor_parallel);
  }
  Status built = build(path_or_name, options, m.get());
  if (m->comm) built = m->comm->agree(built);
  if (!built.ok()) return built;
  return m;
}

}  // namespace

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK"}) {
    const char* value = std::getenv(var);
    if (value == nullptr || *value == '\0') continue;
    char* end = nullptr;
    const long rank = std::strtol(value, &end, 10);
    if (*end == '\0' && rank >= 0 && rank < (1 << 24)) return static_cast<int>(rank);
  }
  return 0;
}

const char* device_name(Device device) {
  switch (device) {
    case Device::kCpu: return "cpu";
    case Device::kCuda: return "cuda";
  }
  return "?";
}

Result<Device> device_from_name(std::string_view name) {
  if (name == "cpu") return Device::kCpu;
  if (name == "cuda") return Device::kCuda;
  return invalid_argument("unknown device '" + std::string(name) + "' (expected cpu or cuda)");
}

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kMaxTokens: return "max tokens";
    case StopReason::kEndOfGeneration: return "end of generation";
    case StopReason::kStopString: return "stop string";
    case StopReason::kCallback: return "callback";
    case StopReason::kContextFull: return "context full";
  }
  return "?";
}

Result<Model> Model::open(const std::string& path_or_name, const ModelOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  QRT_ASSIGN_OR_RETURN(std::shared_ptr<ModelImpl> impl, load(path_or_name, options));
  impl->load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Model(std::move(impl));
}

const ModelInfo& Model::info() const { return impl_->info; }
double Model::load_seconds() const { return impl_->load_seconds; }

Result<std::vector<int32_t>> Model::tokenize(std::string_view text, bool add_special, bool parse_special) const {
  return impl_->tokenizer->encode(text, add_special, parse_special);
}

Result<std::string> Model::detokenize(std::span<const int32_t> ids, bool skip_special) const {
  return impl_->tokenizer->decode(ids, skip_special);
}

std::string Model::token_piece(int32_t id) const { return std::string(impl_->tokenizer->token_to_piece(id)); }

bool Model::is_end_of_generation(int32_t id) const { return impl_->tokenizer->is_end_of_generation(id); }

Result<std::string> Model::render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  const ModelImpl& m = *impl_;
  if (!m.chat_template) return m.chat_template_status;
  chat::ChatContext context;
  for (const ChatMessage& message : messages)
    context.messages.push_back({{"role", message.role}, {"content", message.content}});
  context.add_generation_prompt = add_generation_prompt;
  const Tokenizer& tok = *m.tokenizer;
  if (tok.bos_id() >= 0) context.bos_token = std::string(tok.token_text(tok.bos_id()));
  if (tok.eos_id() >= 0) context.eos_token = std::string(tok.token_text(tok.eos_id()));
  return m.chat_template->render(context);
}

Result<Session> Model::new_session(const SessionOptions& options) const {
  if (options.context_length < 0) return invalid_argument("session context length must be >= 0");
  const int64_t capacity = options.context_length > 0 ? options.context_length : impl_->info.default_context;
  const RopeConfig& rope = impl_->config.rope;
  if (rope.scaling == RopeScaling::kLongRope && capacity > rope.original_context &&
      impl_->info.default_context <= rope.original_context)
    log_warn("a session of ", capacity, " tokens on a model loaded for ", impl_->info.default_context,
             ": its LongRoPE short factors hold up to ", rope.original_context,
             " tokens; load the model with a context above that for the long factors");
  auto state = std::make_unique<api_detail::SessionState>(*this, impl_);
  {
    std::lock_guard lock(impl_->device_mutex);
    auto sequence = impl_->transformer->new_sequence(capacity);
    if (!sequence.ok()) return sequence.status().with_context("creating a session of " + std::to_string(capacity) +
                                                               " tokens");
    state->sequence = std::move(*sequence);
    for (PeerRank& peer : impl_->peers) {
      auto peer_sequence = peer.transformer->new_sequence(capacity);
      if (!peer_sequence.ok()) return peer_sequence.status().with_context("creating a session on a peer rank");
      state->peer_sequences.push_back(std::move(*peer_sequence));
    }
  }
  state->timings.load_seconds = impl_->load_seconds;
  return Session(std::move(state));
}

}  // namespace qrt
