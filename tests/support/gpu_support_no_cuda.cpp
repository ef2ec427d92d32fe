// cuda_device_available for test builds without CUDA (CMake picks this file or gpu_support_cuda.cpp).
#include "test_support.hpp"

namespace qrt::test {

bool cuda_device_available(std::string* why) {
  *why = "qrt was built without CUDA (QRT_CUDA=OFF or no toolkit)";
  return false;
}

}  // namespace qrt::test
