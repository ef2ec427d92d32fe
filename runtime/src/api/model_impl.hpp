// What a qrt::Model handle refers to: the backend with the uploaded weights, the transformer, the tokenizer and
// the chat template. Shared by the Model handles and the Sessions made from them.
#pragma once

#include <memory>
#include <mutex>
#include <optional>

#include "models/chat/chat_template.hpp"
#include "models/model_config.hpp"
#include "models/tokenizer/tokenizer.hpp"
#include "models/transformer.hpp"
#include "qrt/runtime.hpp"
#include "runtime/src/backend/backend.hpp"
#include "runtime/src/comm/communicator.hpp"

namespace qrt::api_detail {

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
    transformer.reset();
    backend.reset();
    device_comm.reset();
    comm.reset();
  }
};

}  // namespace qrt::api_detail
