#include "backend/backend.hpp"

#include <string>

#include "backend/op_checks.hpp"

namespace qrt {

ScopedBuffer& ScopedBuffer::operator=(ScopedBuffer&& other) noexcept {
  if (this != &other) {
    reset();
    backend_ = other.backend_;
    buffer_ = other.buffer_;
    other.backend_ = nullptr;
    other.buffer_ = {};
  }
  return *this;
}

void ScopedBuffer::reset() {
  if (backend_ != nullptr && buffer_.ptr != nullptr) backend_->deallocate(buffer_);
  backend_ = nullptr;
  buffer_ = {};
}

Status Backend::attention_batch(ConstF32View q, ConstI32View q_positions, const KvLayerView& pool,
                                ConstI32View tables, ConstI32View keys, const AttentionParams& params, F32View out) {
  QRT_TRY(op_checks::attention_batch(q, q_positions, pool, tables, keys, params, out));
  for (int64_t i = 0; i < q.rows; ++i) {
    const KvLayerView seq{pool.k, pool.v, pool.positions, pool.attention_workspace,
                          tables.row_range(i, 1).reshaped(tables.cols, 1), pool.block_size};
    Status s = attention(q.row_range(i, 1), q_positions.row_range(i, 1), seq, keys.row_range(i, 1), params,
                         out.row_range(i, 1));
    if (!s.ok()) return s.with_context("attention_batch row " + std::to_string(i));
  }
  return ok_status();
}

Result<ScopedBuffer> allocate_scoped(Backend& backend, uint64_t bytes) {
  QRT_ASSIGN_OR_RETURN(DeviceBuffer buffer, backend.allocate(bytes));
  return ScopedBuffer(&backend, buffer);
}

}  // namespace qrt
