// Passes over several sequences at once on a DecodeBatch's scratch (Transformer::step_keep_logits and the decode
// steps built on it), and sampling or copying back the rows of logits they leave on the device.
#include <algorithm>
#include <bit>
#include <string>

#include "models/transformer.hpp"
#include "models/transformer_scratch.hpp"

namespace qrt {

using namespace transformer_scratch;  // NOLINT: the scratch names read as the buffers they are

Status Transformer::decode_batch(DecodeBatch& batch, std::span<Sequence* const> seqs, std::span<const int32_t> tokens,
                                 std::vector<float>* logits) {
  QRT_TRY(decode_batch_keep_logits(batch, seqs, tokens));
  const F32View out = batch.scratch_[kLogits].view<float>(batch.logits_rows_, config_.vocab_size);
  logits->resize(static_cast<size_t>(out.numel()));
  return backend_.download(out.data, logits->data(), logits->size() * sizeof(float));
}

Status Transformer::decode_batch_keep_logits(DecodeBatch& batch, std::span<Sequence* const> seqs,
                                             std::span<const int32_t> tokens) {
  if (tokens.size() != seqs.size())
    return invalid_argument("decode_batch: " + std::to_string(tokens.size()) + " tokens for " +
                            std::to_string(seqs.size()) + " sequences");
  std::vector<StepSpan> spans;
  for (size_t i = 0; i < seqs.size(); ++i) spans.push_back({seqs[i], tokens.subspan(i, 1)});
  return step_keep_logits(batch, spans);
}

Status Transformer::step_keep_logits(DecodeBatch& batch, std::span<const StepSpan> spans) {
  batch.logits_rows_ = 0;
  const int64_t groups = static_cast<int64_t>(spans.size());
  if (groups == 0) return invalid_argument("step: no sequences");
  int64_t n = 0;
  for (int64_t i = 0; i < groups; ++i) {
    const StepSpan& span = spans[static_cast<size_t>(i)];
    const std::string which = "step: sequence " + std::to_string(i);
    if (span.seq == nullptr) return invalid_argument(which + " is null");
    for (int64_t j = 0; j < i; ++j)
      if (spans[static_cast<size_t>(j)].seq == span.seq)
        return invalid_argument(which + " is also sequence " + std::to_string(j) + " (one span per sequence)");
    const int64_t k = static_cast<int64_t>(span.tokens.size());
    if (k == 0) return invalid_argument(which + " has no tokens");
    if (span.seq->length_ + k > span.seq->capacity_)
      return out_of_range(which + ": " + std::to_string(k) + " tokens do not fit (" +
                          std::to_string(span.seq->length_) + " of " + std::to_string(span.seq->capacity_) +
                          " used)");
    for (int32_t id : span.tokens)
      if (id < 0 || id >= config_.vocab_size)
        return out_of_range(which + ": token id " + std::to_string(id) + " outside the vocabulary of " +
                            std::to_string(config_.vocab_size));
    n += k;
  }
  // Blocks the step takes from each pool, all checked before any is taken so that on error no sequence changes.
  std::vector<std::pair<const KvPool*, int64_t>> takes;
  for (const StepSpan& span : spans) {
    const int64_t need = blocks_needed(*span.seq, static_cast<int64_t>(span.tokens.size()));
    if (need == 0) continue;
    auto it = std::find_if(takes.begin(), takes.end(), [&](const auto& t) { return t.first == span.seq->pool_; });
    if (it == takes.end()) it = takes.insert(takes.end(), {span.seq->pool_, 0});
    it->second += need;
  }
  for (const auto& [pool, blocks] : takes)
    if (blocks > pool->free_blocks())
      return out_of_range("step: KV cache pool full: the step needs " + std::to_string(blocks) + " blocks, " +
                          std::to_string(pool->free_blocks()) + " are free");
  const int64_t had_tokens = batch.scratch_tokens_;
  QRT_TRY(ensure_scratch_buffers(batch.scratch_, batch.scratch_tokens_, n));
  if (batch.scratch_tokens_ != had_tokens) batch.graphs_.clear();  // they hold the old buffers' addresses
  // token ids [n], positions [n], cache rows [n], key counts [groups], the last row of each span [groups]
  std::vector<int32_t> step(static_cast<size_t>(3 * n + 2 * groups));
  std::vector<CacheRows> rows;
  bool one_token_each = true;
  int64_t row = 0;
  for (int64_t g = 0; g < groups; ++g) {
    const StepSpan& span = spans[static_cast<size_t>(g)];
    Sequence& seq = *span.seq;
    const int64_t k = static_cast<int64_t>(span.tokens.size());
    std::vector<int32_t> cache_rows;
    QRT_TRY(prepare_slots(seq, k, &cache_rows));
    for (int64_t i = 0; i < k; ++i) {
      step[static_cast<size_t>(row + i)] = span.tokens[static_cast<size_t>(i)];
      step[static_cast<size_t>(n + row + i)] = static_cast<int32_t>(seq.length_ + i);  // position = slot
      step[static_cast<size_t>(2 * n + row + i)] = cache_rows[static_cast<size_t>(i)];
    }
    step[static_cast<size_t>(3 * n + g)] = static_cast<int32_t>(seq.length_ + k);  // keys visible after the write
    step[static_cast<size_t>(3 * n + groups + g)] = static_cast<int32_t>(row + k - 1);
    rows.push_back({&seq, row, k});
    one_token_each = one_token_each && k == 1;
    row += k;
  }
  QRT_TRY(backend_.upload(step.data(), batch.scratch_[kStep].buffer().ptr, step.size() * sizeof(int32_t)));
  const F32View out = batch.scratch_[kLogits].view<float>(groups, config_.vocab_size);
  // The logits of each span's last token only: every row when each span is one token, else those rows gathered.
  const ConstI32View gather = one_token_each ? ConstI32View{}
                                             : batch.scratch_[kStep].view<const int32_t>(3 * n + 2 * groups, 1)
                                                   .row_range(3 * n + groups, groups);
  QRT_ASSIGN_OR_RETURN(const DecodeRows decode, stage_decode_rows(batch, rows));
  bool ran = false;
  if (one_token_each && decode.items == groups) QRT_TRY(launch_step_graph(batch, rows, n, out, decode, &ran));
  if (!ran) QRT_TRY(issue_forward(batch.scratch_, rows, n, 0, out, gather, decode));
  batch.logits_rows_ = groups;
  for (const StepSpan& span : spans) {
    span.seq->length_ += static_cast<int64_t>(span.tokens.size());
    span.seq->has_last_logits_ = false;  // its own logits scratch does not hold this step's logits
    record_tokens(*span.seq, span.tokens, true);
  }
  return ok_status();
}

Status Transformer::launch_step_graph(DecodeBatch& batch, std::span<const CacheRows> groups, int64_t n,
                                     F32View logits, const DecodeRows& decode, bool* ran) {
  *ran = false;
  if (!graphs_ || !backend_.supports_graphs()) return ok_status();
  const uint64_t pool = groups[0].seq->pool_->serial_;
  auto it = std::find_if(batch.graphs_.begin(), batch.graphs_.end(), [&](const DecodeBatch::StepGraph& g) {
    return g.items == decode.items && g.table_blocks == decode.tables.cols && g.pool == pool;
  });
  if (it == batch.graphs_.end()) {
    auto graph = backend_.capture([&] { return issue_forward(batch.scratch_, groups, n, 0, logits, {}, decode); });
    if (!graph.ok()) {
      if (graph.status().code() != ErrorCode::kUnsupported) return graph.status();
      graphs_ = false;
      return ok_status();
    }
    // A server's batch sizes come and go: keep the most recent few dozen.
    constexpr size_t kMaxStepGraphs = 32;
    if (batch.graphs_.size() == kMaxStepGraphs) batch.graphs_.erase(batch.graphs_.begin());
    batch.graphs_.push_back({decode.items, decode.tables.cols, pool, std::move(*graph)});
    ++batch.step_captures_;
    it = batch.graphs_.end() - 1;
  }
  QRT_TRY(backend_.launch(*it->graph));
  ++batch.graph_steps_;
  *ran = true;
  return ok_status();
}

// Grows a batch buffer to at least `bytes`, by at least half again, so that a step a little larger than the last
// does not reallocate (a reallocation drops the batch's captured steps, which hold the old address).
static Status grow(Backend& backend, ScopedBuffer& buffer, uint64_t bytes, bool* reallocated) {
  const uint64_t have = buffer.buffer().bytes;
  if (have >= bytes) return ok_status();
  *reallocated = true;
  buffer.reset();
  QRT_ASSIGN_OR_RETURN(buffer, allocate_scoped(backend, std::max(bytes, have * 3 / 2)));
  return ok_status();
}

Result<Transformer::DecodeRows> Transformer::stage_decode_rows(DecodeBatch& batch, std::span<const CacheRows> groups) {
  const KvPool* pool = groups.empty() ? nullptr : groups[0].seq->pool_;
  size_t items = 0;
  size_t table_blocks = 1;
  while (items < groups.size() && pool != nullptr && groups[items].rows == 1 && groups[items].seq->pool_ == pool &&
         groups[items].first_row == static_cast<int64_t>(items)) {
    table_blocks = std::max(table_blocks, groups[items].seq->blocks_.size());
    ++items;
  }
  if (items < 2) return DecodeRows{};
  table_blocks = std::bit_ceil(table_blocks);
  // Row i: sequence i's blocks, then zeros (a block of the pool) past them; the kernel reads only its keys' blocks.
  std::vector<int32_t> tables(items * table_blocks, 0);
  for (size_t i = 0; i < items; ++i) {
    const std::vector<int32_t>& blocks = groups[i].seq->blocks_;
    std::copy(blocks.begin(), blocks.end(), tables.begin() + static_cast<std::ptrdiff_t>(i * table_blocks));
  }
  bool reallocated = false;
  QRT_TRY(grow(backend_, batch.attention_tables_, tables.size() * sizeof(int32_t), &reallocated));
  QRT_TRY(backend_.upload(tables.data(), batch.attention_tables_.buffer().ptr, tables.size() * sizeof(int32_t)));
  const int64_t slots = static_cast<int64_t>(table_blocks) * pool->block_size();
  QRT_TRY(grow(backend_, batch.attention_workspace_,
               backend_.attention_batch_workspace_bytes(static_cast<int64_t>(items), attention_params(0), slots),
               &reallocated));
  if (reallocated) batch.graphs_.clear();
  DecodeRows decode;
  decode.items = static_cast<int64_t>(items);
  decode.tables = batch.attention_tables_.view<const int32_t>(decode.items, static_cast<int64_t>(table_blocks));
  decode.workspace = batch.attention_workspace_.buffer();
  return decode;
}

Status Transformer::sample_batch_rows(DecodeBatch& batch, int64_t first, const SampleStep& step,
                                      std::span<int32_t> ids) {
  const int64_t rows = static_cast<int64_t>(step.u01.size());
  if (first < 0 || rows <= 0 || first + rows > batch.logits_rows_ || ids.size() != step.u01.size())
    return invalid_argument("sample_batch_rows: rows [" + std::to_string(first) + ", " + std::to_string(first + rows) +
                            ") of a step with " + std::to_string(batch.logits_rows_) + " rows of logits, " +
                            std::to_string(ids.size()) + " ids");
  const ConstF32View logits = batch.scratch_[kLogits].view<float>(batch.logits_rows_, config_.vocab_size);
  const I32View out = batch.scratch_[kStep].view<int32_t>(rows, 1);  // the step's inputs are spent
  QRT_TRY(backend_.sample(logits.row_range(first, rows), step, out));
  return backend_.download(out.data, ids.data(), ids.size() * sizeof(int32_t));
}

Status Transformer::download_batch_row(DecodeBatch& batch, int64_t row, std::vector<float>* logits) {
  if (row < 0 || row >= batch.logits_rows_)
    return invalid_argument("download_batch_row: row " + std::to_string(row) + " of " +
                            std::to_string(batch.logits_rows_) + " rows of logits");
  logits->resize(static_cast<size_t>(config_.vocab_size));
  const ConstF32View all = batch.scratch_[kLogits].view<float>(batch.logits_rows_, config_.vocab_size);
  return backend_.download(all.row_range(row, 1).data, logits->data(), logits->size() * sizeof(float));
}

}  // namespace qrt
