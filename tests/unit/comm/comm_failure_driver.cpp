// A small multi-rank program for the failure tests (check_failure.cmake runs it under mpirun and checks that the
// job ends, in bounded time, with the right status and the error printed once). Usage: comm_failure_driver <mode>
//   ok      every rank succeeds; rank 0 prints "all ranks ok"; exit 0
//   agree   the upper half of the ranks fail while loading; all ranks agree() on the error, rank 0 prints it, every
//           rank exits 3 (the pattern the tools follow)
//   alone   rank 1 fails and exits 4 on its own while the others wait in an all-reduce it never joins
//   abort   rank 1 calls abort(5) while the others wait in an all-reduce
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/comm/communicator.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: comm_failure_driver ok|agree|alone|abort\n");
    return 2;
  }
  const std::string mode = argv[1];
  auto made = qrt::make_communicator_from_environment();
  if (!made.ok()) {
    std::fprintf(stderr, "comm_failure_driver: %s\n", made.status().to_string().c_str());
    return 2;
  }
  qrt::Communicator& comm = **made;
  const int rank = comm.rank();
  std::vector<float> partial(1024, 1.0f + static_cast<float>(rank));

  if (mode == "ok" || mode == "agree") {
    const bool fails = mode == "agree" && rank >= comm.world() - comm.world() / 2;
    const qrt::Status local =
        fails ? qrt::not_found("weights shard " + std::to_string(rank) + " of model.gguf is missing")
              : qrt::ok_status();
    const qrt::Status agreed = comm.agree(local);
    if (!agreed.ok()) {
      if (rank == 0) std::fprintf(stderr, "error: %s\n", agreed.to_string().c_str());
      return 3;
    }
    if (!comm.all_reduce_sum(partial.data(), partial.size()).ok()) return 6;
    if (rank == 0) std::printf("all ranks ok\n");
    return 0;
  }
  if (mode == "alone" || mode == "abort") {
    if (rank == 1) {
      std::fprintf(stderr, "rank 1: simulated failure (%s)\n", mode.c_str());
      if (mode == "abort") comm.abort(5);
      return 4;
    }
    // Never completes: rank 1 does not take part.
    const qrt::Status s = comm.all_reduce_sum(partial.data(), partial.size());
    std::printf("rank %d passed an all-reduce without rank 1 (%s)\n", rank, s.to_string().c_str());
    return 0;
  }
  std::fprintf(stderr, "comm_failure_driver: unknown mode '%s'\n", mode.c_str());
  return 2;
}
