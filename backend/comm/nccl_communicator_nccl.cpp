// NCCL between the GPUs of a tensor-parallel job, bootstrapped by another communicator (MPI, or a single rank).
//
//  * Setup: rank 0 makes the NCCL id and the bootstrap broadcasts it; every rank takes part in each step whatever
//    its own outcome, and the steps end with agree(), so a failure on any rank (a missing device, an NCCL error)
//    comes back on every rank instead of leaving the others inside ncclCommInitRank.
//  * The NCCL communicator is non-blocking: its setup and teardown are polled with a deadline, so a rank that never
//    arrives ends in an error, not a hang.
//  * all_reduce_sum runs on the communicator's own stream: an event recorded on the caller's compute stream orders
//    it after the work issued there, and an event recorded after it orders later compute work after it. Nothing
//    waits on the host, so the decode step stays asynchronous (and capturable in a CUDA graph).
//  * broadcast() and agree() are host-memory operations and go through the bootstrap communicator.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "kernels/cuda/cuda_check.hpp"
#include "backend/cuda_context.hpp"
#include "backend/comm/communicator.hpp"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "qrt needs NCCL 2.14 or newer (non-blocking communicators, ncclCommFinalize)"
#endif

namespace qrt {
namespace {

// How long setup may wait for the other ranks (NCCL connects every pair of GPUs), and teardown for pending work.
constexpr std::chrono::seconds kInitTimeout{300};
constexpr std::chrono::seconds kFinalizeTimeout{30};

Status nccl_status(ncclResult_t result, const char* call, ncclComm_t comm = nullptr) {
  if (result == ncclSuccess) return ok_status();
  std::string message = std::string(call) + " failed: " + ncclGetErrorString(result);
  if (comm != nullptr) {
    const char* detail = ncclGetLastError(comm);
    if (detail != nullptr && *detail != '\0') message += " (" + std::string(detail) + ")";
  }
  return Status(ErrorCode::kCudaError, message);
}

// Waits until a non-blocking communicator's pending operation (init, a collective's enqueue, finalize) is done.
Status wait_for_nccl(ncclComm_t comm, const char* call, std::chrono::steady_clock::duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(comm, &state);
    if (query != ncclSuccess) return nccl_status(query, "ncclCommGetAsyncError", comm);
    if (state != ncclInProgress) return nccl_status(state, call, comm);
    if (std::chrono::steady_clock::now() > deadline) {
      return Status(ErrorCode::kCudaError,
                    std::string(call) + " did not complete within " +
                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                        " s (another rank failed or never arrived)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// A call on a non-blocking communicator: done, failed, or in progress (then waited for).
Status finish_nccl_call(ncclResult_t result, ncclComm_t comm, const char* call,
                        std::chrono::steady_clock::duration timeout) {
  if (result == ncclInProgress) return wait_for_nccl(comm, call, timeout);
  return nccl_status(result, call, comm);
}

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device) : bootstrap_(bootstrap), device_(device) {}

  ~NcclCommunicator() override {
    if (comm_ == nullptr && stream_ == nullptr && compute_ready_ == nullptr && reduced_ == nullptr) return;
    auto scope = ScopedDevice::enter(device_);
    if (comm_ != nullptr) {
      bool clean = !failed_ && scope.ok();
      if (clean) clean = cudaStreamSynchronize(stream_) == cudaSuccess;
      // Finalize flushes the communicator's work and may wait for its peers: bounded, then abandoned.
      if (clean) {
        clean = finish_nccl_call(ncclCommFinalize(comm_), comm_, "ncclCommFinalize", kFinalizeTimeout).ok();
      }
      if (clean) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
    if (reduced_ != nullptr) cudaEventDestroy(reduced_);
    if (compute_ready_ != nullptr) cudaEventDestroy(compute_ready_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int rank() const override { return bootstrap_.rank(); }
  int world() const override { return bootstrap_.world(); }
  int local_rank() const override { return bootstrap_.local_rank(); }
  std::string_view kind() const override { return "nccl"; }

  // This rank's resources: the device, the stream and the two events.
  Status open_device() {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      cudaGetLastError();  // not sticky: leave the caller's next CUDA call unaffected
      return cuda_status(err, "cudaGetDeviceCount");
    }
    if (device_ < 0 || device_ >= count) {
      return not_found("CUDA device " + std::to_string(device_) + " does not exist (this machine has " +
                       std::to_string(count) + ")");
    }
    QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::enter(device_));
    // Non-blocking: no implicit ordering with the legacy default stream; the events order it explicitly.
    QRT_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    QRT_CUDA_TRY(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
    QRT_CUDA_TRY(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming));
    return ok_status();
  }

  // Joins the NCCL communicator named by `id` (collective over the bootstrap's ranks).
  Status join(const ncclUniqueId& id) {
    QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::enter(device_));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclUniqueId id_copy = id;
    const ncclResult_t result = ncclCommInitRankConfig(&comm_, world(), id_copy, rank(), &config);
    if (comm_ == nullptr) {
      return nccl_status(result == ncclSuccess ? ncclInternalError : result, "ncclCommInitRankConfig");
    }
    if (result != ncclSuccess && result != ncclInProgress) {
      return nccl_status(result, "ncclCommInitRankConfig", comm_);
    }
    // A non-blocking init may report success while the connection setup still runs: always wait for it.
    return wait_for_nccl(comm_, "ncclCommInitRankConfig", kInitTimeout);
  }

  void mark_failed() { failed_ = true; }

  Status all_reduce_sum(float* data, size_t n, void* compute_stream) override {
    if (n == 0) return ok_status();
    if (data == nullptr) return invalid_argument("all_reduce_sum: null data for " + std::to_string(n) + " floats");
    if (failed_ || comm_ == nullptr) return internal_error("all_reduce_sum: the NCCL communicator failed earlier");
    QRT_ASSIGN_OR_RETURN(ScopedDevice scope, ScopedDevice::enter(device_));
    // NCCL reads device memory only: a host pointer would fault inside the kernel, so refuse it here.
    cudaPointerAttributes attributes{};
    QRT_CUDA_TRY(cudaPointerGetAttributes(&attributes, data));
    const bool on_device = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    if (!on_device || attributes.device != device_) {
      return invalid_argument("all_reduce_sum: data is not device memory of cuda:" + std::to_string(device_) +
                              " (the nccl communicator reduces device memory)");
    }
    auto compute = static_cast<cudaStream_t>(compute_stream);
    QRT_CUDA_TRY(cudaEventRecord(compute_ready_, compute));
    QRT_CUDA_TRY(cudaStreamWaitEvent(stream_, compute_ready_, 0));
    const Status reduced = finish_nccl_call(ncclAllReduce(data, data, n, ncclFloat32, ncclSum, comm_, stream_),
                                            comm_, "ncclAllReduce", kInitTimeout);
    if (!reduced.ok()) {
      failed_ = true;
      return reduced;
    }
    QRT_CUDA_TRY(cudaEventRecord(reduced_, stream_));
    QRT_CUDA_TRY(cudaStreamWaitEvent(compute, reduced_, 0));
    return ok_status();
  }

  Status broadcast(void* host_data, size_t bytes, int root) override {
    return bootstrap_.broadcast(host_data, bytes, root);
  }

  Status agree(const Status& local) override { return bootstrap_.agree(local); }

  [[noreturn]] void abort(int exit_code) override {
    if (comm_ != nullptr) ncclCommAbort(comm_);  // unblocks kernels waiting for peers that will never come
    comm_ = nullptr;
    bootstrap_.abort(exit_code);
    std::_Exit(exit_code);  // not reached: the bootstrap's abort does not return
  }

 private:
  Communicator& bootstrap_;
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;  // recorded on the compute stream; the reduction waits for it
  cudaEvent_t reduced_ = nullptr;        // recorded after the reduction; the compute stream waits for it
  bool failed_ = false;                  // an NCCL error: the communicator is aborted, not finalized
};

}  // namespace

bool nccl_communicator_built() { return true; }

Result<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& bootstrap, int device) {
  const std::string where = "NCCL communicator on cuda:" + std::to_string(device);
  std::unique_ptr<NcclCommunicator> comm(new NcclCommunicator(bootstrap, device));
  auto fail = [&](const Status& s) {
    comm->mark_failed();
    return s.with_context(where);
  };

  // Step 1, every rank: the device, stream and events; rank 0 also makes the id.
  ncclUniqueId id{};
  Status local = comm->open_device();
  if (local.ok() && bootstrap.rank() == 0) local = nccl_status(ncclGetUniqueId(&id), "ncclGetUniqueId");
  Status agreed = bootstrap.agree(local);
  if (!agreed.ok()) return fail(agreed);

  // Step 2: rank 0's id to everyone, then every rank joins.
  Status sent = bootstrap.broadcast(&id, sizeof id, 0);
  if (!sent.ok()) return fail(sent);
  agreed = bootstrap.agree(comm->join(id));
  if (!agreed.ok()) return fail(agreed);
  return std::unique_ptr<Communicator>(std::move(comm));
}

}  // namespace qrt
