#include <cuda_runtime.h>

#include "test_support.hpp"

namespace qrt::test {

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    *why = std::string("no usable CUDA device: ") + cudaGetErrorString(err);
    cudaGetLastError();  // clear the error so later calls are not poisoned
    return false;
  }
  if (count == 0) {
    *why = "no CUDA device on this machine";
    return false;
  }
  return true;
}

}  // namespace qrt::test
