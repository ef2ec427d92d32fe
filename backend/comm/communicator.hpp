// How tensor-parallel ranks talk to each other: one small interface with three implementations.
//
//  * single: one rank, every collective is the identity (no MPI or NCCL needed).
//  * mpi:    host-memory collectives over MPI_COMM_WORLD (a private duplicate of it). The CPU reference backend uses
//            it so that tests run several ranks of a sliced model on one machine; it is also the bootstrap of nccl.
//  * nccl:   all-reduce of device memory on the communicator's own CUDA stream, ordered against the caller's compute
//            stream with events; host-memory broadcast and agree() go through its bootstrap communicator.
//
// Every rank of a job must issue the same collectives in the same order with the same sizes; a rank that skips one
// leaves the others waiting. Errors therefore go through agree() before anyone leaves the collective sequence:
//
//   Status s = comm.agree(local_status);            // the same value on every rank
//   if (!s.ok()) { if (comm.rank() == 0) print(s); return exit_code; }   // printed once, every rank exits
//
// Under MPI, exiting with a non-zero status without such an agreement (one rank failing alone) skips
// MPI_Finalize, so mpirun stops every rank instead of the others waiting forever (see mpi_communicator_mpi.cpp).
//
// Library code never aborts: abort() exists for tools that must stop every rank at once.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

#include "qrt/status.hpp"

namespace qrt {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Rank among the ranks on this host: picks the GPU of this rank.
  virtual int local_rank() const = 0;
  // "single", "mpi" or "nccl".
  virtual std::string_view kind() const = 0;

  // Sums `n` floats across ranks in place; the result is identical on every rank.
  //   single, mpi: `data` is host memory; `compute_stream` is ignored; the sum is complete on return.
  //   nccl: `data` is device memory on the communicator's device. The reduction is enqueued on the communicator's
  //         own stream after the work already issued on `compute_stream` (a cudaStream_t; nullptr is the legacy
  //         default stream), and work issued on `compute_stream` afterwards runs after it. Returns once enqueued.
  virtual Status all_reduce_sum(float* data, size_t n, void* compute_stream = nullptr) = 0;

  // Copies `bytes` of host memory from rank `root` to every rank (all kinds).
  virtual Status broadcast(void* host_data, size_t bytes, int root) = 0;

  // Collective: every rank passes its local status and every rank gets back the same answer: OK when all were
  // OK, else the error of the lowest failing rank, with its code and its message prefixed "rank N: " (a message is
  // cut at 64 KiB). On a single rank the local status comes back unchanged.
  virtual Status agree(const Status& local) = 0;

  // Stops every rank of the job with `exit_code` (MPI_Abort under MPI; std::exit on a single rank).
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // For ranks that are threads of one process: makes every pending and later collective of the whole group return
  // an error, so that a rank that failed does not leave the others waiting. Other kinds need no such thing (a
  // failed process is stopped by the launcher) and ignore it.
  virtual void cancel_group() {}
};

// The communicator the launcher asked for, read from the environment:
//  * not launched by an MPI launcher, or launched with one rank -> single rank;
//  * launched with N > 1 ranks (OMPI_COMM_WORLD_SIZE, PMI_SIZE or MV2_COMM_WORLD_SIZE) -> MPI, initializing MPI
//    once (or joining an MPI that the program already initialized) and finalizing it at exit;
//  * launched with N > 1 ranks by a qrt built without MPI -> an error saying so; N independent copies of a
//    single-rank job are never run silently.
Result<std::unique_ptr<Communicator>> make_communicator_from_environment();

Result<std::unique_ptr<Communicator>> make_single_rank_communicator();

// An MPI communicator over (a duplicate of) MPI_COMM_WORLD, initializing MPI when nobody has. Unsupported in a
// build without MPI.
Result<std::unique_ptr<Communicator>> make_mpi_communicator();

// NCCL over the ranks of `bootstrap` (which broadcasts rank 0's NCCL id and carries broadcast() and agree()), on
// CUDA device `device` (an index below the number of visible devices; usually bootstrap.local_rank()). Collective
// over the bootstrap's ranks: a failure on any rank is returned on every rank. `bootstrap` must outlive the
// result. Unsupported in a build without NCCL.
Result<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& bootstrap, int device);

// `world` ranks that are threads of this process (kind "threads"): rank r is element r. Host-memory collectives,
// summing in rank order (bit-identical on every rank); cancel_group() releases every waiting rank with an error.
// Each rank's calls must come from one thread at a time; the ranks' threads run concurrently.
Result<std::vector<std::unique_ptr<Communicator>>> make_thread_group_communicators(int world);

// Whether this build of qrt contains the MPI and NCCL communicators.
bool mpi_communicator_built();
bool nccl_communicator_built();

// The number of ranks an MPI launcher started, read from its environment variables, or 1 when the process was
// not started by one. *source names the variable that said so. An unparsable value is an error naming it.
Result<int> launcher_world_size(std::string* source = nullptr);

}  // namespace qrt
