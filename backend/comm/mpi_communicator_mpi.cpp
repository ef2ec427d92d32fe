// Host-memory collectives over MPI, for the CPU reference backend's multi-rank runs and as the bootstrap of NCCL.
//
// MPI is process-wide by nature: it is initialized once per process (here, unless the program already did) and
// finalized at exit. Finalizing is where a failure could turn into a hang: MPI_Finalize waits for every rank, so a
// rank that finalizes while the others wait inside a collective it will never join blocks the job forever. The
// exit hook therefore finalizes only on a clean exit (status 0) or when the failure was agreed by every rank
// through agree() (then all ranks are exiting together). A rank that exits with an error on its own skips
// MPI_Finalize; the launcher (Open MPI's mpirun, MPICH's hydra) sees it exit without finalizing, or with a non-zero
// status, and stops the whole job.
//
// All traffic goes over a private duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN, so MPI errors come back as
// Status values and never mix with messages of other MPI users in the same process.

// The C API only: Open MPI's and MPICH's deprecated C++ bindings are not needed.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <stdlib.h>  // on_exit

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

#include "qrt/log.hpp"
#include "backend/comm/communicator.hpp"

namespace qrt {
namespace {

// Set while the last collective of this process was an agree() that returned an error on every rank.
std::atomic<bool> g_failure_agreed{false};

// The most bytes or floats one MPI call moves: MPI counts are int.
constexpr size_t kMaxChunk = size_t{1} << 28;
// An agreed error message longer than this is cut (it is printed, not parsed).
constexpr size_t kMaxAgreedMessage = size_t{1} << 16;

Status mpi_error(int code, const char* call) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  std::string what = MPI_Error_string(code, text, &length) == MPI_SUCCESS ? std::string(text, length)
                                                                         : "MPI error " + std::to_string(code);
  return internal_error(std::string(call) + " failed: " + what);
}

#define QRT_MPI_TRY(call)                                                         \
  do {                                                                            \
    const int qrt_mpi_rc_ = (call);                                               \
    if (qrt_mpi_rc_ != MPI_SUCCESS) return ::qrt::mpi_error(qrt_mpi_rc_, #call);  \
  } while (0)

void finalize_at_exit(int exit_status, void*) {
  int finalized = 0;
  if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return;
  if (exit_status == 0 || g_failure_agreed.load()) MPI_Finalize();
  // Otherwise this rank fails alone: leave MPI unfinalized so that the launcher stops every rank (see the top).
}

Status ensure_mpi_initialized() {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  int finalized = 0;
  QRT_MPI_TRY(MPI_Finalized(&finalized));
  if (finalized) return internal_error("MPI communicator: MPI was already finalized in this process");
  int initialized = 0;
  QRT_MPI_TRY(MPI_Initialized(&initialized));
  if (initialized) return ok_status();  // the program owns MPI's lifetime
  int provided = 0;
  // Serialized: the engine may call from a thread other than main, never from two at once.
  QRT_MPI_TRY(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
  if (provided < MPI_THREAD_SERIALIZED) {
    log_warn("MPI provides thread level ", provided, " (below MPI_THREAD_SERIALIZED): call the communicator from "
             "the main thread only");
  }
  if (on_exit(finalize_at_exit, nullptr) != 0) {
    log_warn("MPI communicator: could not register the exit hook; MPI will not be finalized at exit");
  }
  return ok_status();
}

class MpiCommunicator final : public Communicator {
 public:
  static Result<std::unique_ptr<Communicator>> create() {
    QRT_TRY(ensure_mpi_initialized());
    std::unique_ptr<MpiCommunicator> comm(new MpiCommunicator());
    QRT_MPI_TRY(MPI_Comm_dup(MPI_COMM_WORLD, &comm->comm_));
    QRT_MPI_TRY(MPI_Comm_set_errhandler(comm->comm_, MPI_ERRORS_RETURN));
    QRT_MPI_TRY(MPI_Comm_rank(comm->comm_, &comm->rank_));
    QRT_MPI_TRY(MPI_Comm_size(comm->comm_, &comm->world_));
    // The ranks sharing this host's memory, ordered by world rank: the position among them picks the GPU.
    MPI_Comm host = MPI_COMM_NULL;
    QRT_MPI_TRY(MPI_Comm_split_type(comm->comm_, MPI_COMM_TYPE_SHARED, comm->rank_, MPI_INFO_NULL, &host));
    const int rc = MPI_Comm_rank(host, &comm->local_rank_);
    MPI_Comm_free(&host);
    QRT_MPI_TRY(rc);
    return std::unique_ptr<Communicator>(std::move(comm));
  }

  ~MpiCommunicator() override {
    int finalized = 0;
    if (comm_ != MPI_COMM_NULL && MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized) MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  std::string_view kind() const override { return "mpi"; }

  // Reduce to rank 0, then broadcast rank 0's sums: every rank gets the very same bits, whatever reduction
  // algorithm MPI picks (an MPI_Allreduce may sum in a different order on different ranks).
  Status all_reduce_sum(float* data, size_t n, void* compute_stream) override {
    if (data == nullptr && n > 0) {
      return invalid_argument("all_reduce_sum: null data for " + std::to_string(n) + " floats");
    }
    g_failure_agreed = false;
    for (size_t done = 0; done < n; done += kMaxChunk) {
      const int count = static_cast<int>(std::min(kMaxChunk, n - done));
      float* chunk = data + done;
      QRT_MPI_TRY(MPI_Reduce(rank_ == 0 ? MPI_IN_PLACE : chunk, rank_ == 0 ? chunk : nullptr, count, MPI_FLOAT,
                             MPI_SUM, 0, comm_));
      QRT_MPI_TRY(MPI_Bcast(chunk, count, MPI_FLOAT, 0, comm_));
    }
    return ok_status();
  }

  Status broadcast(void* host_data, size_t bytes, int root) override {
    if (root < 0 || root >= world_) {
      return invalid_argument("broadcast: root rank " + std::to_string(root) + " outside a world of " +
                              std::to_string(world_));
    }
    if (host_data == nullptr && bytes > 0) {
      return invalid_argument("broadcast: null data for " + std::to_string(bytes) + " bytes");
    }
    g_failure_agreed = false;
    auto* bytes_ptr = static_cast<uint8_t*>(host_data);
    for (size_t done = 0; done < bytes; done += kMaxChunk) {
      const int count = static_cast<int>(std::min(kMaxChunk, bytes - done));
      QRT_MPI_TRY(MPI_Bcast(bytes_ptr + done, count, MPI_BYTE, root, comm_));
    }
    return ok_status();
  }

  Status agree(const Status& local) override {
    g_failure_agreed = false;
    int first_failing = local.ok() ? world_ : rank_;
    QRT_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &first_failing, 1, MPI_INT, MPI_MIN, comm_));
    if (first_failing == world_) return ok_status();

    // The lowest failing rank sends its code and message; everyone builds the same Status from them.
    int64_t header[2] = {0, 0};  // error code, message bytes
    std::string message;
    if (rank_ == first_failing) {
      message = local.message().substr(0, kMaxAgreedMessage);
      header[0] = static_cast<int64_t>(local.code());
      header[1] = static_cast<int64_t>(message.size());
    }
    QRT_MPI_TRY(MPI_Bcast(header, 2, MPI_INT64_T, first_failing, comm_));
    if (header[1] < 0 || static_cast<size_t>(header[1]) > kMaxAgreedMessage) {
      return internal_error("agree: rank " + std::to_string(first_failing) + " sent a message of " +
                            std::to_string(header[1]) + " bytes");
    }
    message.resize(static_cast<size_t>(header[1]));
    QRT_MPI_TRY(MPI_Bcast(message.data(), static_cast<int>(header[1]), MPI_CHAR, first_failing, comm_));
    const bool known_code = header[0] > static_cast<int64_t>(ErrorCode::kOk) &&
                            header[0] <= static_cast<int64_t>(ErrorCode::kInternal);
    const ErrorCode code = known_code ? static_cast<ErrorCode>(header[0]) : ErrorCode::kInternal;
    g_failure_agreed = true;
    return Status(code, "rank " + std::to_string(first_failing) + ": " + message);
  }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(comm_ != MPI_COMM_NULL ? comm_ : MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; this keeps the promise if an implementation does
  }

 private:
  MpiCommunicator() = default;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int world_ = 1;
  int local_rank_ = 0;
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_mpi_communicator() { return MpiCommunicator::create(); }

}  // namespace qrt
