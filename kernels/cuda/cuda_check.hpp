// CUDA errors as qrt Status values, carrying the failed call and where it was made.
#pragma once

#include <cuda_runtime.h>

#include <source_location>
#include <string>

#include "qrt/status.hpp"

namespace qrt {

inline Status cuda_status(cudaError_t err, const char* call,
                          std::source_location where = std::source_location::current()) {
  if (err == cudaSuccess) return ok_status();
  return Status(ErrorCode::kCudaError, std::string(call) + " failed: " + cudaGetErrorName(err) + " (" +
                                           cudaGetErrorString(err) + ") at " + where.file_name() + ":" +
                                           std::to_string(where.line()));
}

// After a kernel launch: picks up both launch-configuration errors and sticky errors.
inline Status cuda_launch_status(const char* kernel, std::source_location where = std::source_location::current()) {
  return cuda_status(cudaGetLastError(), kernel, where);
}

}  // namespace qrt

// Returns a Status from the enclosing function when a CUDA runtime call fails.
#define QRT_CUDA_TRY(call) QRT_TRY(::qrt::cuda_status((call), #call))
