// The engine's device state on every rank of a tensor-parallel model: a KV pool, the sequences and the step scratch
// per rank. Rank 0 decides (admission, sampling, stopping); every change of a pool or a sequence and every pass is a
// command applied on all ranks in the same order, so that their pools stay identical (the same blocks reused, the
// same rows written) and their collectives meet. The ranks of an in-process group (ModelOptions::tensor_parallel)
// run a command together on the group's threads; under an MPI launch rank 0 broadcasts each command and the other
// processes apply it in EngineRanks::follow. On one rank a command is a plain call.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "models/transformer.hpp"
#include "qrt/engine.hpp"
#include "runtime/src/model_impl.hpp"

namespace qrt::api_detail {

// What every rank needs to build the same pools and sequences (rank 0's engine options, sent to the followers).
struct EngineShape {
  int64_t blocks = 0;
  int64_t block_size = 0;
  int64_t sequences = 0;
  int64_t context = 0;
};

class EngineRanks {
 public:
  // Pools and sequences on this process's ranks; the caller holds m.device_mutex.
  static Result<std::unique_ptr<EngineRanks>> create(ModelImpl& m, const EngineShape& shape);
  ~EngineRanks();  // under m.device_mutex (the caller's)
  EngineRanks(const EngineRanks&) = delete;
  EngineRanks& operator=(const EngineRanks&) = delete;

  // Rank 0's state, which the scheduler reads to decide.
  Transformer& model() { return *local_[0].model; }
  KvPool& pool() { return *local_[0].pool; }
  Sequence& sequence(size_t slot) { return *local_[0].seqs[slot]; }
  DecodeBatch& batch() { return *local_[0].batch; }

  // Commands (rank 0; callers hold m.device_mutex). Each returns the agreed status of all ranks.
  // An empty sequence takes its cached prefix and the blocks for the rest of `context` (the scheduler checked
  // with Transformer::plan_prefix that they fit).
  Status admit(size_t slot, std::span<const int32_t> context);
  Status reset(size_t slot);
  // One pass: each slot continues with its tokens (a decode token, or a chunk of its prompt); the logits of each
  // slot's last token stay on rank 0's device (batch(), row i for slots[i]).
  Status step(std::span<const size_t> slots, std::span<const std::span<const int32_t>> tokens);
  // Ends the followers' loops (MPI); nothing on a single process.
  void stop();

  // Ranks 1.. of an MPI launch: builds the pools rank 0 describes and applies its commands until it stops.
  static Status follow(ModelImpl& m);

 private:
  struct Local {
    Transformer* model = nullptr;
    std::unique_ptr<KvPool> pool;
    std::vector<std::unique_ptr<Sequence>> seqs;
    std::unique_ptr<DecodeBatch> batch;
  };
  explicit EngineRanks(ModelImpl& m) : m_(m) {}
  Status build(const EngineShape& shape);
  // Runs a command: broadcast to the MPI followers, applied on every local rank, agreed.
  Status run(const std::vector<int64_t>& command);
  Status apply(Local& rank, std::span<const int64_t> command);

  ModelImpl& m_;
  std::vector<Local> local_;  // this process's ranks: rank 0 (or this MPI rank), then the in-process peers
  bool stopped_ = false;
};

}  // namespace qrt::api_detail
