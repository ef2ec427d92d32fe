// The paged KV cache of the Transformer: pools, paged sequences, their block tables and the prefix cache
// (models/kv_blocks.hpp). The forward passes (transformer.cpp) call prepare_slots before and record_tokens after.
#include <atomic>
#include <bit>
#include <string>

#include "models/transformer.hpp"

namespace qrt {

Result<std::unique_ptr<KvPool>> Transformer::new_kv_pool(int64_t blocks, int block_size) {
  if (block_size <= 0 || block_size > (1 << 16) || !std::has_single_bit(static_cast<unsigned>(block_size)))
    return invalid_argument("KV cache block size " + std::to_string(block_size) +
                            " is not a power of two between 1 and 65536");
  const int64_t kv_dim = int64_t{kv_heads_} * head_dim_;
  // Pool rows are int32 on the device; bound the bytes before multiplying.
  if (blocks <= 0 || blocks > INT32_MAX / block_size ||
      blocks * block_size > (int64_t{1} << 40) / (int64_t{config_.layers} * kv_dim * 4))
    return invalid_argument("KV cache pool of " + std::to_string(blocks) + " blocks of " +
                            std::to_string(block_size) + " tokens is empty or too large");
  static std::atomic<uint64_t> pools_made{0};
  std::unique_ptr<KvPool> pool(new KvPool(blocks, block_size, ++pools_made));
  const int64_t rows = blocks * block_size;
  const uint64_t kv_bytes = static_cast<uint64_t>(config_.layers) * rows * kv_row_bytes(kv_type_, kv_dim);
  QRT_ASSIGN_OR_RETURN(pool->k_, allocate_scoped(backend_, kv_bytes));
  if (!values_are_keys()) {
    QRT_ASSIGN_OR_RETURN(pool->v_, allocate_scoped(backend_, kv_bytes));
  }
  QRT_ASSIGN_OR_RETURN(pool->positions_, allocate_scoped(backend_, static_cast<uint64_t>(rows) * sizeof(int32_t)));
  return pool;
}

Result<std::unique_ptr<Sequence>> Transformer::new_sequence(KvPool& pool, int64_t capacity) {
  if (capacity <= 0 || capacity > INT32_MAX - pool.block_size())
    return invalid_argument("sequence capacity " + std::to_string(capacity) + " is not positive or too large");
  std::unique_ptr<Sequence> seq(new Sequence());
  seq->pool_ = &pool;
  seq->capacity_ = capacity;
  const int64_t table_blocks = (capacity + pool.block_size() - 1) / pool.block_size();
  QRT_ASSIGN_OR_RETURN(seq->block_table_,
                       allocate_scoped(backend_, static_cast<uint64_t>(table_blocks) * sizeof(int32_t)));
  const int64_t slots = table_blocks * pool.block_size();
  const uint64_t workspace = backend_.attention_workspace_bytes(1, attention_params(0), slots);
  if (workspace > 0) {
    QRT_ASSIGN_OR_RETURN(seq->attention_workspace_, allocate_scoped(backend_, workspace));
  }
  return seq;
}

uint64_t Transformer::paged_overhead_bytes(int64_t sequences, int64_t capacity, int block_size,
                                           int64_t pass_tokens) const {
  const int64_t table_blocks = (capacity + block_size - 1) / block_size;
  const uint64_t per_sequence = static_cast<uint64_t>(table_blocks) * sizeof(int32_t) +
                                backend_.attention_workspace_bytes(1, attention_params(0), table_blocks * block_size);
  uint64_t scratch = 0;
  for (int64_t n : scratch_per_token()) scratch += static_cast<uint64_t>(n * pass_tokens) * 4;
  // A step with every sequence decoding: their tables side by side and one attention_batch workspace, each grown by
  // half again at most (stage_decode_rows).
  const uint64_t decode_rows =
      static_cast<uint64_t>(sequences * table_blocks) * sizeof(int32_t) +
      backend_.attention_batch_workspace_bytes(sequences, attention_params(0), table_blocks * block_size);
  return static_cast<uint64_t>(sequences) * per_sequence + scratch + decode_rows * 3 / 2;
}

int64_t Transformer::blocks_needed(const Sequence& seq, int64_t tokens) const {
  if (seq.pool_ == nullptr) return 0;
  const int64_t b = seq.pool_->block_size();
  const int64_t want = (seq.length_ + tokens + b - 1) / b - static_cast<int64_t>(seq.blocks_.size());
  return want > 0 ? want : 0;
}

std::vector<std::pair<int32_t, uint64_t>> Transformer::cached_prefix(const Sequence& seq,
                                                                     std::span<const int32_t> tokens) const {
  std::vector<std::pair<int32_t, uint64_t>> found;  // (block, chain hash)
  if (seq.pool_ == nullptr || seq.length_ != 0 || tokens.empty()) return found;
  const KvPool& pool = *seq.pool_;
  const size_t b = static_cast<size_t>(pool.block_size());
  const size_t limit = std::min((tokens.size() - 1) / b, static_cast<size_t>(seq.capacity_) / b);
  uint64_t parent = 0;
  for (size_t i = 0; i < limit; ++i) {
    const std::span<const int32_t> block = tokens.subspan(i * b, b);
    const uint64_t hash = KvBlockAllocator::chain_hash(parent, block);
    const std::optional<int32_t> hit = pool.blocks_.find(hash, parent, block);
    if (!hit) break;
    found.emplace_back(*hit, hash);
    parent = hash;
  }
  return found;
}

PrefixPlan Transformer::plan_prefix(const Sequence& seq, std::span<const int32_t> tokens) const {
  PrefixPlan plan;
  if (seq.pool_ == nullptr) return plan;
  const auto found = cached_prefix(seq, tokens);
  const int64_t b = seq.pool_->block_size();
  plan.reused_tokens = static_cast<int64_t>(found.size()) * b;
  for (const auto& [block, hash] : found) plan.blocks_taken_from_free += seq.pool_->blocks_.holders(block) == 0;
  const int64_t blocks = (static_cast<int64_t>(tokens.size()) + b - 1) / b;
  plan.new_blocks = blocks - static_cast<int64_t>(found.size());
  return plan;
}

int64_t Transformer::reuse_prefix(Sequence& seq, std::span<const int32_t> tokens) {
  if (seq.pool_ == nullptr || seq.length_ != 0 || tokens.empty()) return 0;
  KvPool& pool = *seq.pool_;
  const auto found = cached_prefix(seq, tokens);
  for (const auto& [block, hash] : found) {
    pool.blocks_.hold(block);
    seq.blocks_.push_back(block);
    seq.block_hashes_.push_back(hash);
  }
  const int64_t reused = static_cast<int64_t>(found.size()) * pool.block_size();
  seq.tokens_.assign(tokens.begin(), tokens.begin() + reused);
  seq.length_ = reused;
  seq.table_dirty_ = true;
  seq.has_last_logits_ = false;
  pool.reused_tokens_ += static_cast<uint64_t>(reused);
  return reused;
}

Status Transformer::reserve_blocks(Sequence& seq, int64_t tokens) {
  if (tokens < 0 || seq.length_ + tokens > seq.capacity_)
    return out_of_range("reserve_blocks: " + std::to_string(tokens) + " tokens do not fit the sequence (" +
                        std::to_string(seq.length_) + " of " + std::to_string(seq.capacity_) + " used)");
  std::vector<int32_t> rows;
  return prepare_slots(seq, tokens, &rows);
}

Status Transformer::prepare_slots(Sequence& seq, int64_t tokens, std::vector<int32_t>* rows) {
  if (seq.pool_ == nullptr) {
    for (int64_t i = 0; i < tokens; ++i) rows->push_back(static_cast<int32_t>(seq.length_ + i));
    return ok_status();
  }
  KvPool& pool = *seq.pool_;
  const int64_t need = blocks_needed(seq, tokens);
  if (need > pool.free_blocks())
    return out_of_range("KV cache pool full: " + std::to_string(tokens) + " more tokens need " +
                        std::to_string(need) + " blocks, " + std::to_string(pool.free_blocks()) + " of " +
                        std::to_string(pool.blocks()) + " are free");
  for (int64_t i = 0; i < need; ++i) {
    seq.blocks_.push_back(*pool.blocks_.allocate());  // checked above
    seq.table_dirty_ = true;
  }
  if (seq.table_dirty_) {
    QRT_TRY(backend_.upload(seq.blocks_.data(), seq.block_table_.buffer().ptr, seq.blocks_.size() * sizeof(int32_t)));
    seq.table_dirty_ = false;
  }
  const int64_t b = pool.block_size();
  for (int64_t i = 0; i < tokens; ++i) {
    const int64_t slot = seq.length_ + i;
    rows->push_back(static_cast<int32_t>(int64_t{seq.blocks_[static_cast<size_t>(slot / b)]} * b + slot % b));
  }
  return ok_status();
}

void Transformer::record_tokens(Sequence& seq, std::span<const int32_t> tokens, bool at_slots) {
  if (seq.pool_ == nullptr) return;
  if (!at_slots) seq.prefix_cacheable_ = false;
  if (!seq.prefix_cacheable_) return;
  seq.tokens_.insert(seq.tokens_.end(), tokens.begin(), tokens.end());
  const size_t b = static_cast<size_t>(seq.pool_->block_size());
  while ((seq.block_hashes_.size() + 1) * b <= static_cast<size_t>(seq.length_)) {
    const size_t i = seq.block_hashes_.size();
    const uint64_t parent = i == 0 ? 0 : seq.block_hashes_[i - 1];
    const std::span<const int32_t> block(seq.tokens_.data() + i * b, b);
    const uint64_t hash = KvBlockAllocator::chain_hash(parent, block);
    seq.pool_->blocks_.remember(seq.blocks_[i], hash, parent, block);
    seq.block_hashes_.push_back(hash);
  }
}

KvLayerView Transformer::cache_view(Sequence& seq, int layer_index) const {
  const int64_t kv_dim = int64_t{kv_heads_} * head_dim_;
  if (seq.pool_ == nullptr) {
    const uint64_t offset = static_cast<uint64_t>(layer_index) * seq.capacity_ * kv_row_bytes(kv_type_, kv_dim);
    const KvView k{seq.k_cache_.view<uint8_t>(0).data + offset, seq.capacity_, kv_dim, kv_type_};
    return KvLayerView{k,
                       values_are_keys() ? k
                                         : KvView{seq.v_cache_.view<uint8_t>(0).data + offset, seq.capacity_, kv_dim,
                                                  kv_type_},
                       seq.positions_.view<int32_t>(seq.capacity_, 1), seq.attention_workspace_.buffer()};
  }
  KvPool& pool = *seq.pool_;
  const int64_t rows = pool.blocks() * pool.block_size();
  const uint64_t offset = static_cast<uint64_t>(layer_index) * rows * kv_row_bytes(kv_type_, kv_dim);
  const int64_t table_blocks = static_cast<int64_t>(seq.block_table_.buffer().bytes / sizeof(int32_t));
  const KvView k{pool.k_.view<uint8_t>(0).data + offset, rows, kv_dim, kv_type_};
  return KvLayerView{k,
                     values_are_keys() ? k : KvView{pool.v_.view<uint8_t>(0).data + offset, rows, kv_dim, kv_type_},
                     pool.positions_.view<int32_t>(rows, 1),
                     seq.attention_workspace_.buffer(),
                     seq.block_table_.view<const int32_t>(table_blocks, 1),
                     pool.block_size()};
}

}  // namespace qrt
