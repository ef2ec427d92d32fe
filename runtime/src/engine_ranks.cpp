#include "runtime/src/engine_ranks.hpp"

#include <string>

namespace qrt::api_detail {

namespace {

// A command is int64 words: its kind, then its arguments.
//   kAdmit slot n t0 .. t(n-1) | kReset slot | kStep k (slot n t0 .. t(n-1)) x k | kStop
enum Kind : int64_t { kAdmit = 1, kReset, kStep, kStop };

// Command words are checked before use: a follower must not index past its slots on a garbled message.
Status bad_command(const std::string& what) { return internal_error("engine command: " + what); }

}  // namespace

Result<std::unique_ptr<EngineRanks>> EngineRanks::create(ModelImpl& m, const EngineShape& shape) {
  std::unique_ptr<EngineRanks> ranks(new EngineRanks(m));
  QRT_TRY(ranks->build(shape));
  return ranks;
}

EngineRanks::~EngineRanks() {
  // The sequences before their pools, on every rank.
  for (Local& l : local_) {
    l.seqs.clear();
    l.batch.reset();
    l.pool.reset();
  }
}

Status EngineRanks::build(const EngineShape& shape) {
  std::vector<Transformer*> models = {m_.transformer.get()};
  for (PeerRank& peer : m_.peers) models.push_back(peer.transformer.get());
  for (Transformer* model : models) {
    Local l;
    l.model = model;
    QRT_ASSIGN_OR_RETURN(l.pool, model->new_kv_pool(shape.blocks, static_cast<int>(shape.block_size)));
    for (int64_t i = 0; i < shape.sequences; ++i) {
      QRT_ASSIGN_OR_RETURN(std::unique_ptr<Sequence> seq, model->new_sequence(*l.pool, shape.context));
      l.seqs.push_back(std::move(seq));
    }
    l.batch = std::make_unique<DecodeBatch>();
    local_.push_back(std::move(l));
  }
  return ok_status();
}

Status EngineRanks::admit(size_t slot, std::span<const int32_t> context) {
  std::vector<int64_t> c = {kAdmit, static_cast<int64_t>(slot), static_cast<int64_t>(context.size())};
  c.insert(c.end(), context.begin(), context.end());
  return run(c);
}

Status EngineRanks::reset(size_t slot) { return run({kReset, static_cast<int64_t>(slot)}); }

Status EngineRanks::step(std::span<const size_t> slots, std::span<const std::span<const int32_t>> tokens) {
  std::vector<int64_t> c = {kStep, static_cast<int64_t>(slots.size())};
  for (size_t i = 0; i < slots.size(); ++i) {
    c.push_back(static_cast<int64_t>(slots[i]));
    c.push_back(static_cast<int64_t>(tokens[i].size()));
    c.insert(c.end(), tokens[i].begin(), tokens[i].end());
  }
  return run(c);
}

void EngineRanks::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (m_.comm) (void)run({kStop});
}

Status EngineRanks::run(const std::vector<int64_t>& command) {
  if (m_.comm) {  // MPI: the followers receive the size, then the words
    int64_t words = static_cast<int64_t>(command.size());
    QRT_TRY(m_.comm->broadcast(&words, sizeof words, 0));
    QRT_TRY(m_.comm->broadcast(const_cast<int64_t*>(command.data()), command.size() * sizeof(int64_t), 0));
    if (command[0] == kStop) return ok_status();
  }
  Status s = local_.size() == 1 ? apply(local_[0], command)
                                : on_every_local_rank(m_, [&](int r) { return apply(local_[static_cast<size_t>(r)],
                                                                                    command); });
  if (m_.comm) s = m_.comm->agree(s);
  return s;
}

Status EngineRanks::apply(Local& rank, std::span<const int64_t> c) {
  const auto slot_at = [&](size_t i) -> Result<size_t> {
    if (i >= c.size() || c[i] < 0 || c[i] >= static_cast<int64_t>(rank.seqs.size()))
      return bad_command("slot out of range");
    return static_cast<size_t>(c[i]);
  };
  switch (c.empty() ? 0 : c[0]) {
    case kAdmit: {
      QRT_ASSIGN_OR_RETURN(const size_t slot, slot_at(1));
      if (c.size() < 3 || c[2] < 0 || static_cast<size_t>(c[2]) != c.size() - 3) return bad_command("admit size");
      const std::vector<int32_t> context(c.begin() + 3, c.end());
      Sequence& seq = *rank.seqs[slot];
      rank.model->reuse_prefix(seq, context);
      return rank.model->reserve_blocks(seq, static_cast<int64_t>(context.size()) - seq.length());
    }
    case kReset: {
      QRT_ASSIGN_OR_RETURN(const size_t slot, slot_at(1));
      rank.seqs[slot]->reset();
      return ok_status();
    }
    case kStep: {
      const int64_t k = c.size() >= 2 ? c[1] : -1;
      if (k <= 0) return bad_command("step size");
      std::vector<std::vector<int32_t>> tokens(static_cast<size_t>(k));
      std::vector<Transformer::StepSpan> spans;
      size_t at = 2;
      for (int64_t i = 0; i < k; ++i) {
        QRT_ASSIGN_OR_RETURN(const size_t slot, slot_at(at));
        if (at + 1 >= c.size() || c[at + 1] <= 0 || c.size() - (at + 2) < static_cast<size_t>(c[at + 1]))
          return bad_command("step span size");
        const size_t n = static_cast<size_t>(c[at + 1]);
        tokens[static_cast<size_t>(i)].assign(c.begin() + static_cast<std::ptrdiff_t>(at + 2),
                                              c.begin() + static_cast<std::ptrdiff_t>(at + 2 + n));
        spans.push_back({rank.seqs[slot].get(), tokens[static_cast<size_t>(i)]});
        at += 2 + n;
      }
      if (at != c.size()) return bad_command("step words left over");
      return rank.model->step_keep_logits(*rank.batch, spans);
    }
    default:
      return bad_command("unknown kind " + std::to_string(c.empty() ? 0 : c[0]));
  }
}

Status EngineRanks::follow(ModelImpl& m) {
  if (!m.comm || m.comm->rank() == 0) return invalid_argument("engine: only ranks 1.. of an MPI launch follow");
  EngineShape shape;
  QRT_TRY(m.comm->broadcast(&shape, sizeof shape, 0));
  if (shape.blocks <= 0) return invalid_argument("engine: rank 0's engine did not start");
  std::unique_ptr<EngineRanks> ranks;
  {
    std::lock_guard device(m.device_mutex);
    auto built = create(m, shape);
    Status st = m.comm->agree(built.status());
    if (!st.ok()) return st;
    ranks = std::move(*built);
  }
  std::vector<int64_t> command;
  for (;;) {
    int64_t words = 0;
    QRT_TRY(m.comm->broadcast(&words, sizeof words, 0));
    if (words <= 0 || words > (int64_t{1} << 28)) return bad_command("size " + std::to_string(words));
    command.resize(static_cast<size_t>(words));
    QRT_TRY(m.comm->broadcast(command.data(), command.size() * sizeof(int64_t), 0));
    if (command[0] == kStop) break;
    std::lock_guard device(m.device_mutex);
    (void)m.comm->agree(ranks->apply(ranks->local_[0], command));  // rank 0 reports an error
  }
  std::lock_guard device(m.device_mutex);
  ranks.reset();
  return ok_status();
}

}  // namespace qrt::api_detail
