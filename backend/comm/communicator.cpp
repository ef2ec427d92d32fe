// The environment-driven factory, and the factories of communicators this build does not contain (so that callers
// need no #ifdef: they get an unsupported error naming what is missing).
#include "backend/comm/communicator.hpp"

#include <charconv>
#include <cstdlib>
#include <string>

namespace qrt {

Result<int> launcher_world_size(std::string* source) {
  // Open MPI (mpirun), MPICH / Intel MPI (hydra) and MVAPICH each tell their processes the job size this way.
  // SLURM_NTASKS is deliberately absent: it is also set in a batch script that was not started by srun.
  static constexpr const char* kVariables[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"};
  constexpr int kMaxRanks = 1 << 20;
  for (const char* name : kVariables) {
    const char* text = std::getenv(name);
    if (text == nullptr) continue;
    const std::string_view value(text);
    int world = 0;
    const auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), world);
    if (err != std::errc() || end != value.data() + value.size() || world < 1 || world > kMaxRanks) {
      return invalid_argument("environment variable " + std::string(name) + "='" + std::string(value) +
                              "': expected the number of ranks the MPI launcher started (1 to " +
                              std::to_string(kMaxRanks) + ")");
    }
    if (source) *source = std::string(name) + "=" + std::string(value);
    return world;
  }
  if (source) source->clear();
  return 1;
}

Result<std::unique_ptr<Communicator>> make_communicator_from_environment() {
  std::string source;
  QRT_ASSIGN_OR_RETURN(const int launched, launcher_world_size(&source));
  if (launched == 1) return make_single_rank_communicator();
  if (!mpi_communicator_built()) {
    return unsupported("this process was started as one of " + std::to_string(launched) + " ranks (" + source +
                       ") but this build of qrt has no MPI, so the ranks cannot talk to each other; rebuild with "
                       "MPI (install libopenmpi-dev and openmpi-bin, or configure with -DQRT_MPI=ON) or run "
                       "without mpirun");
  }
  QRT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, make_mpi_communicator());
  if (comm->world() != launched) {
    // Typically an mpirun from another MPI implementation than the one qrt was linked with: every process
    // then believes it is alone.
    return invalid_argument("the launcher started " + std::to_string(launched) + " ranks (" + source +
                            ") but MPI reports a world of " + std::to_string(comm->world()) +
                            "; use the mpirun of the MPI that qrt was built with");
  }
  return comm;
}

#if !defined(QRT_HAVE_MPI)
Result<std::unique_ptr<Communicator>> make_mpi_communicator() {
  return unsupported("MPI communicator: this build of qrt has no MPI (configured without an MPI library or with "
                     "QRT_MPI=OFF)");
}
bool mpi_communicator_built() { return false; }
#else
bool mpi_communicator_built() { return true; }
#endif

}  // namespace qrt
