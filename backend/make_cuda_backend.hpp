// Opens the CUDA backend on one device. Compiles without a CUDA toolkit: a build without CUDA returns
// unsupported, so callers (the public API, run-model --device cuda) need no #ifdef.
#pragma once

#include <memory>

#include "qrt/status.hpp"
#include "backend/backend.hpp"

namespace qrt {

class Communicator;

// The CUDA backend on device `device` (an index below the number of visible devices). Errors: unsupported when
// qrt was built without CUDA; not_found for a device index that does not exist; a CUDA error (naming the call)
// when the driver or device cannot be used.
// `comm` (optional, not owned): this rank's NCCL communicator on the same device, for tensor parallelism.
Result<std::unique_ptr<Backend>> make_cuda_backend(int device, Communicator* comm = nullptr);

// Whether this build of qrt contains the CUDA backend.
bool cuda_backend_built();

}  // namespace qrt
