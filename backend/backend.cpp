#include "backend/backend.hpp"

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

Result<ScopedBuffer> allocate_scoped(Backend& backend, uint64_t bytes) {
  QRT_ASSIGN_OR_RETURN(DeviceBuffer buffer, backend.allocate(bytes));
  return ScopedBuffer(&backend, buffer);
}

}  // namespace qrt
