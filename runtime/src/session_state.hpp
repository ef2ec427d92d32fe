// What a qrt::Session owns: its KV cache (a Sequence of the model's transformer), its context's tokens, the
// logits after the last token run through the model, and its timings.
#pragma once

#include <memory>
#include <vector>

#include "models/transformer.hpp"
#include "qrt/runtime.hpp"
#include "runtime/src/model_impl.hpp"

namespace qrt::api_detail {

struct SessionState {
  SessionState(Model handle, std::shared_ptr<ModelImpl> impl) : model(std::move(handle)), m(std::move(impl)) {}
  // Frees the KV cache through the model's backend, under its lock.
  ~SessionState() {
    std::lock_guard lock(m->device_mutex);
    sequence.reset();
    peer_sequences.clear();
  }
  SessionState(const SessionState&) = delete;
  SessionState& operator=(const SessionState&) = delete;

  Model model;  // keeps the model alive for the session's lifetime
  std::shared_ptr<ModelImpl> m;
  std::unique_ptr<Sequence> sequence;
  // The KV caches of the in-process tensor-parallel ranks 1.. (ModelImpl::peers), in step with `sequence`.
  std::vector<std::unique_ptr<Sequence>> peer_sequences;
  // The context: tokens [0, sequence->length()) are in the KV cache; at most the last generated token may not
  // be yet (it is run through the model when the context continues).
  std::vector<int32_t> tokens;
  // [vocab]: the last token's logits, copied back only when sampling on the host (the backend has no sample op;
  // then host_sampling is set on first use).
  std::vector<float> logits;
  bool host_sampling = false;
  Timings timings;
};

}  // namespace qrt::api_detail
