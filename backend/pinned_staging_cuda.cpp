#include "backend/pinned_staging.hpp"

#include <cstring>

#include "kernels/cuda/cuda_check.hpp"

namespace qrt {

PinnedStaging::PinnedStaging(int slots, uint64_t slot_bytes)
    : slots_(static_cast<size_t>(slots > 0 ? slots : 1)), slot_bytes_(slot_bytes > 0 ? slot_bytes : 1) {}

PinnedStaging::~PinnedStaging() {
  for (Slot& s : slots_) {
    if (s.done != nullptr) {
      if (s.pending) cudaEventSynchronize(s.done);  // the DMA engine may still read s.host
      cudaEventDestroy(s.done);
    }
    if (s.host != nullptr) cudaFreeHost(s.host);
  }
}

Status PinnedStaging::ensure_allocated() {
  if (allocated_) return ok_status();
  for (Slot& s : slots_) {
    if (s.host == nullptr) {
      const cudaError_t err = cudaHostAlloc(&s.host, slot_bytes_, cudaHostAllocDefault);
      if (err != cudaSuccess) {
        s.host = nullptr;
        cudaGetLastError();
        return cuda_status(err, "cudaHostAlloc").with_context("pinned staging buffer of " +
                                                                 std::to_string(slot_bytes_) + " bytes");
      }
    }
    if (s.done == nullptr) QRT_CUDA_TRY(cudaEventCreateWithFlags(&s.done, cudaEventDisableTiming));
  }
  allocated_ = true;
  return ok_status();
}

Status PinnedStaging::copy(const void* host, void* device, uint64_t bytes, std::span<const cudaStream_t> streams) {
  if (bytes == 0) return ok_status();
  if (host == nullptr || device == nullptr) return invalid_argument("staged copy: null pointer");
  if (streams.empty()) return invalid_argument("staged copy: no stream");
  QRT_TRY(ensure_allocated());
  const auto* src = static_cast<const uint8_t*>(host);
  auto* dst = static_cast<uint8_t*>(device);
  for (uint64_t offset = 0; offset < bytes;) {
    const uint64_t n = bytes - offset < slot_bytes_ ? bytes - offset : slot_bytes_;
    const size_t index = next_;
    next_ = (next_ + 1) % slots_.size();
    Slot& slot = slots_[index];
    const cudaStream_t stream = streams[index % streams.size()];
    if (slot.pending) {
      QRT_CUDA_TRY(cudaEventSynchronize(slot.done));
      slot.pending = false;
    }
    std::memcpy(slot.host, src + offset, n);
    QRT_CUDA_TRY(cudaMemcpyAsync(dst + offset, slot.host, n, cudaMemcpyHostToDevice, stream));
    QRT_CUDA_TRY(cudaEventRecord(slot.done, stream));
    slot.pending = true;
    offset += n;
  }
  return ok_status();
}

Status PinnedStaging::wait() {
  for (Slot& s : slots_) {
    if (!s.pending) continue;
    QRT_CUDA_TRY(cudaEventSynchronize(s.done));
    s.pending = false;
  }
  return ok_status();
}

}  // namespace qrt
