// The factory for builds without the CUDA backend (CMake picks this file or cuda_backend_cuda.cpp).
#include "backend/make_cuda_backend.hpp"

namespace qrt {

Result<std::unique_ptr<Backend>> make_cuda_backend(int device, Communicator* comm) {
  return unsupported("device cuda:" + std::to_string(device) +
                     ": this build of qrt has no CUDA backend (configured without a CUDA toolkit or with QRT_CUDA=OFF)");
}

bool cuda_backend_built() { return false; }

}  // namespace qrt
