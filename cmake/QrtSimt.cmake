# The SIMT layer (tests/simt, docs/simt.md): the CUDA sources compiled a second time as C++ against replacement
# headers, so that every kernel, the CUDA backend and NCCL run on the CPU under the gpu-sim tests.
#
#   QRT_SIMT AUTO (default): on when Boost.Context (libboost-context-dev) and Python are found; ON fails without
#   them; OFF never builds it. QRT_SIMT_ENABLED says what was decided. No CUDA toolkit is needed.
#
#   qrt_simt_sources(<out_var> <files...>)
#     .cu files become rewritten C++ (tests/simt/tools/rewrite_cu.py) under <build>/simt-src/ and are returned as
#     sources; .cuh headers are rewritten beside them (that folder comes first on the include path, so a .cu that
#     includes "kernels/linear/gemv_staged.cuh" gets the rewritten one); other files pass through unchanged.
#   qrt_simt_target(<target>)
#     Compiles <target> against the layer: its headers before any other, QRT_SIMT defined, and for the rewritten
#     .cu files what nvcc defines (__CUDACC__, __CUDA_ARCH__ = 900: the H100 paths) and includes (cuda_runtime.h).

set(QRT_SIMT AUTO CACHE STRING "Build the SIMT layer and the gpu-sim tests: AUTO, ON, OFF")
set_property(CACHE QRT_SIMT PROPERTY STRINGS AUTO ON OFF)
set(QRT_SIMT_ENABLED OFF)
if(NOT QRT_SIMT STREQUAL "OFF" AND QRT_BUILD_TESTS)
  find_path(QRT_BOOST_CONTEXT_INCLUDE boost/context/fiber.hpp ${_qrt_dep_hints} PATH_SUFFIXES include)
  find_library(QRT_BOOST_CONTEXT_LIBRARY NAMES boost_context ${_qrt_dep_hints}
               PATH_SUFFIXES lib lib/x86_64-linux-gnu)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(QRT_BOOST_CONTEXT_INCLUDE AND QRT_BOOST_CONTEXT_LIBRARY AND Python3_Interpreter_FOUND)
    set(QRT_SIMT_ENABLED ON)
    add_library(qrt::boost_context INTERFACE IMPORTED GLOBAL)
    target_include_directories(qrt::boost_context SYSTEM INTERFACE ${QRT_BOOST_CONTEXT_INCLUDE})
    target_link_libraries(qrt::boost_context INTERFACE ${QRT_BOOST_CONTEXT_LIBRARY})
  elseif(QRT_SIMT STREQUAL "ON")
    message(FATAL_ERROR "QRT_SIMT=ON needs Boost.Context (libboost-context-dev) and Python 3")
  endif()
endif()

set(QRT_SIMT_ROOT ${PROJECT_SOURCE_DIR}/tests/simt)
set(QRT_SIMT_GENERATED ${CMAKE_BINARY_DIR}/simt-src)

function(qrt_simt_sources out_var)
  set(result)
  foreach(file IN LISTS ARGN)
    get_filename_component(abs ${file} ABSOLUTE)
    get_filename_component(ext ${abs} LAST_EXT)
    if(ext STREQUAL ".cu" OR ext STREQUAL ".cuh")
      file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${abs})
      if(ext STREQUAL ".cu")
        set(generated ${QRT_SIMT_GENERATED}/${rel}.cpp)
      else()
        set(generated ${QRT_SIMT_GENERATED}/${rel})
      endif()
      add_custom_command(OUTPUT ${generated}
        COMMAND ${Python3_EXECUTABLE} ${QRT_SIMT_ROOT}/tools/rewrite_cu.py ${abs} ${generated}
        DEPENDS ${abs} ${QRT_SIMT_ROOT}/tools/rewrite_cu.py
        COMMENT "SIMT: rewriting ${rel}" VERBATIM)
      if(ext STREQUAL ".cu")
        set_source_files_properties(${generated} PROPERTIES
          COMPILE_OPTIONS "-include;cuda_runtime.h"
          COMPILE_DEFINITIONS "__CUDACC__;__CUDA_ARCH__=900")
      else()
        set_source_files_properties(${generated} PROPERTIES HEADER_FILE_ONLY ON)
      endif()
      list(APPEND result ${generated})
    else()
      list(APPEND result ${abs})
    endif()
  endforeach()
  set(${out_var} ${result} PARENT_SCOPE)
endfunction()

function(qrt_simt_target target)
  target_include_directories(${target} BEFORE PRIVATE ${QRT_SIMT_GENERATED} ${QRT_SIMT_ROOT}/include)
  target_compile_definitions(${target} PRIVATE QRT_SIMT=1)
  # CUDA code reinterprets memory freely and nvcc does not assume strict aliasing; #pragma unroll means nothing to
  # the host compiler; contraction stays off so that __fmul_rn and friends are single roundings.
  target_compile_options(${target} PRIVATE -fno-strict-aliasing -Wno-unknown-pragmas -ffp-contract=off)
  target_link_libraries(${target} PRIVATE qrt_simt)
endfunction()
