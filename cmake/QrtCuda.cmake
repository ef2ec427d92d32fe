# Decide whether the CUDA backend is built. QRT_CUDA=ON fails loudly without a toolkit.
set(QRT_HAVE_CUDA OFF)
if(NOT QRT_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER)
    if(DEFINED ENV{CUDAToolkit_ROOT})
      set(_qrt_nvcc_hint $ENV{CUDAToolkit_ROOT}/bin)
    endif()
    find_program(QRT_NVCC nvcc HINTS ${CUDAToolkit_ROOT}/bin ${_qrt_nvcc_hint} /usr/local/cuda/bin)
    if(QRT_NVCC)
      set(CMAKE_CUDA_COMPILER ${QRT_NVCC})
    endif()
  endif()
  if(CMAKE_CUDA_COMPILER)
    # Default architectures: Ampere datacenter (80), Ampere/Ada consumer (86, 89) and Hopper (90) cover the GPUs
    # people run quantized models on today; CUDA 13 no longer targets anything older than Turing anyway.
    # Override with -DCMAKE_CUDA_ARCHITECTURES=90 (CI) or =native (a build machine with a GPU).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "80;86;89;90" CACHE STRING "CUDA architectures")
    endif()
    enable_language(CUDA)
    # CMake 3.25 predates nvcc's C++20 support and would refuse the dialect; teach it the flag.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_SEPARABLE_COMPILATION OFF)
    find_package(CUDAToolkit REQUIRED)
    set(QRT_HAVE_CUDA ON)
  elseif(QRT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "QRT_CUDA=ON but no CUDA toolkit (nvcc) was found; set CUDAToolkit_ROOT or install it under /usr/local/cuda")
  endif()
endif()

# NCCL ships with the CUDA toolkit images we target, as libnccl-dev, or as NVIDIA's Python wheel (nvidia-nccl-cu*,
# which PyTorch installs: <site-packages>/nvidia/nccl with include/nccl.h and lib/libnccl.so.2 only, hence the
# versioned name). QRT_NCCL_ROOT names such a folder.
set(QRT_NCCL_ROOT "" CACHE PATH "a folder with include/nccl.h and lib/libnccl.so* (e.g. a wheel's nvidia/nccl)")
set(QRT_HAVE_NCCL OFF)
if(QRT_HAVE_CUDA AND NOT QRT_NCCL STREQUAL "OFF")
  find_path(QRT_NCCL_INCLUDE nccl.h HINTS ${QRT_NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS} ${QRT_DEPS_ROOT}/include
            PATH_SUFFIXES ../../targets/x86_64-linux/include)
  find_library(QRT_NCCL_LIBRARY NAMES nccl libnccl.so.2 NAMES_PER_DIR
               HINTS ${QRT_NCCL_ROOT}/lib ${CUDAToolkit_LIBRARY_DIR} ${QRT_DEPS_ROOT}/lib)
  if(QRT_NCCL_INCLUDE AND QRT_NCCL_LIBRARY)
    add_library(qrt::nccl UNKNOWN IMPORTED)
    set_target_properties(qrt::nccl PROPERTIES IMPORTED_LOCATION ${QRT_NCCL_LIBRARY}
                          INTERFACE_INCLUDE_DIRECTORIES ${QRT_NCCL_INCLUDE})
    set(QRT_HAVE_NCCL ON)
  endif()
endif()
if(QRT_NCCL STREQUAL "ON" AND NOT QRT_HAVE_NCCL)
  message(FATAL_ERROR "QRT_NCCL=ON but NCCL was not found (needs the CUDA backend and nccl.h/libnccl)")
endif()
