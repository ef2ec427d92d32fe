// The NCCL factory for builds without NCCL (CMake picks this file or nccl_communicator_nccl.cpp).
#include "backend/comm/communicator.hpp"

namespace qrt {

Result<std::unique_ptr<Communicator>> make_nccl_communicator(Communicator& bootstrap, int device) {
  return unsupported("NCCL communicator on device cuda:" + std::to_string(device) +
                     ": this build of qrt has no NCCL (configured without CUDA or NCCL, or with QRT_NCCL=OFF)");
}

bool nccl_communicator_built() { return false; }

}  // namespace qrt
