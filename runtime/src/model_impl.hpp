// What a qrt::Model handle refers to: the backend with the uploaded weights, the transformer, the tokenizer and
// the chat template. Shared by the Model handles and the Sessions made from them.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "models/chat/chat_template.hpp"
#include "models/model_config.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/transformer.hpp"
#include "qrt/runtime.hpp"
#include "backend/backend.hpp"
#include "backend/comm/communicator.hpp"
#include "runtime/src/rank_workers.hpp"

namespace qrt::api_detail {

// A rank of an in-process tensor-parallel group other than rank 0 (ModelOptions::tensor_parallel). Members are
// destroyed bottom-up: the transformer frees its weights through the backend, which uses the communicators.
struct PeerRank {
  std::unique_ptr<Communicator> comm;         // thread-group communicator
  std::unique_ptr<Communicator> device_comm;  // NCCL, with Device::kCuda
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> transformer;
};

struct ModelImpl {
  ModelOptions options;
  ModelInfo info;
  ModelConfig config;
  double load_seconds = 0;

  // Tensor parallelism (null on a single rank): `comm` carries host collectives (token broadcasts, agreeing on
  // errors), `device_comm` the backend's all-reduce when it is not `comm` (NCCL). Declared before the backend,
  // which uses them, so that they are destroyed after it.
  std::unique_ptr<Communicator> comm;
  std::unique_ptr<Communicator> device_comm;
  // In-process tensor parallelism: rank 0's thread-group communicator (its backend is `backend`), the other
  // ranks, and the threads they run on (one per rank, kept for the model's lifetime). Empty otherwise.
  std::unique_ptr<Communicator> local_comm;
  std::vector<PeerRank> peers;
  std::unique_ptr<RankWorkers> workers;
  // Declared before the transformer so that the transformer (which frees its weights through the backend) is
  // destroyed first.
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Transformer> transformer;
  // Backends are not thread-safe: every use of `backend` / `transformer` (forward passes, creating and freeing
  // sequences) holds this.
  std::mutex device_mutex;

  std::optional<Tokenizer> tokenizer;
  std::optional<chat::ChatTemplate> chat_template;
  Status chat_template_status;  // why chat_template is empty: absent, or it failed to parse

  ~ModelImpl() {
    workers.reset();  // no job runs: every caller of run() holds a reference to this model
    transformer.reset();
    backend.reset();
    peers.clear();
    device_comm.reset();
    local_comm.reset();
    comm.reset();
  }
};

// Runs fn(rank) for every rank of this process's group at once, on the group's threads (ModelImpl::workers; rank 0
// on the caller's). A rank that fails cancels the group's collectives, so that no rank waits for it; the lowest
// failing rank's error is returned.
Status on_every_local_rank(ModelImpl& m, const std::function<Status(int)>& fn);

// The error to report from the ranks of an in-process group (element r: rank r): the lowest rank that failed on
// its own, rather than one that only saw its collectives cancelled because of it.
inline Status first_rank_failure(const std::vector<Status>& by_rank) {
  const Status* cancelled = nullptr;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    if (by_rank[r].ok()) continue;
    if (by_rank[r].message().find("collectives were cancelled") == std::string::npos)
      return by_rank[r].with_context("tensor-parallel rank " + std::to_string(r));
    if (!cancelled) cancelled = &by_rank[r];
  }
  return cancelled ? *cancelled : ok_status();
}

}  // namespace qrt::api_detail
