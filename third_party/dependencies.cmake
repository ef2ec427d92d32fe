# How qrt finds its external dependencies. Nothing is vendored.
#
# Normal machines: the Debian packages (see scripts/setup). Machines with only the CUDA toolkit, CMake and
# Python (a GPU box): a staging folder made by third_party/stage-deps on a machine that has the packages,
# passed as -DQRT_DEPS_ROOT=<folder>. When QRT_DEPS_ROOT is set, only that folder is searched, so a configure
# that succeeds proves the folder is complete.

if(QRT_DEPS_ROOT)
  set(_qrt_dep_hints HINTS ${QRT_DEPS_ROOT} NO_DEFAULT_PATH)
  set(CMAKE_BUILD_RPATH ${CMAKE_BUILD_RPATH} ${QRT_DEPS_ROOT}/lib)
else()
  set(_qrt_dep_hints)
endif()

# qrt_find_dependency(<target> HEADER <file> [LIBS <name>...] [DEPENDS <target>...])
# Defines an imported target from a header and zero or more libraries, failing with the dependency's name.
function(qrt_find_dependency target)
  cmake_parse_arguments(ARG "" "HEADER;PACKAGE" "LIBS;DEPENDS" ${ARGN})
  if(TARGET ${target})
    return()
  endif()
  string(MAKE_C_IDENTIFIER "QRT_DEP_${target}" var)
  find_path(${var}_INCLUDE ${ARG_HEADER} ${_qrt_dep_hints} PATH_SUFFIXES include)
  if(NOT ${var}_INCLUDE)
    message(FATAL_ERROR "qrt: ${ARG_PACKAGE} not found (looked for ${ARG_HEADER}). "
            "Run scripts/setup, or pass -DQRT_DEPS_ROOT=<folder made by third_party/stage-deps>.")
  endif()
  set(libs)
  foreach(lib IN LISTS ARG_LIBS)
    find_library(${var}_${lib}_LIB NAMES ${lib} ${_qrt_dep_hints} PATH_SUFFIXES lib lib/x86_64-linux-gnu)
    if(NOT ${var}_${lib}_LIB)
      message(FATAL_ERROR "qrt: ${ARG_PACKAGE} library '${lib}' not found. "
              "Run scripts/setup, or pass -DQRT_DEPS_ROOT=<folder made by third_party/stage-deps>.")
    endif()
    list(APPEND libs ${${var}_${lib}_LIB})
  endforeach()
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  target_include_directories(${target} SYSTEM INTERFACE ${${var}_INCLUDE})
  target_link_libraries(${target} INTERFACE ${libs} ${ARG_DEPENDS})
endfunction()

find_package(Threads REQUIRED)

qrt_find_dependency(qrt::json HEADER nlohmann/json.hpp PACKAGE "nlohmann_json (nlohmann-json3-dev)")
qrt_find_dependency(qrt::cli11 HEADER CLI/CLI.hpp PACKAGE "CLI11 (libcli11-dev)")
qrt_find_dependency(qrt::pcre2 HEADER pcre2.h LIBS pcre2-8 PACKAGE "PCRE2 (libpcre2-dev)")
target_compile_definitions(qrt::pcre2 INTERFACE PCRE2_CODE_UNIT_WIDTH=8)
qrt_find_dependency(qrt::utf8proc HEADER utf8proc.h LIBS utf8proc PACKAGE "utf8proc (libutf8proc-dev)")
qrt_find_dependency(qrt::crypto HEADER openssl/evp.h LIBS crypto PACKAGE "OpenSSL libcrypto (libssl-dev)")
# cpp-httplib for serve-model. Debian builds it as a library with TLS, zlib and brotli support; its header must
# be compiled with the same switches. A staging folder (GPU machines) has none, and builds no server.
set(QRT_HAVE_HTTPLIB OFF)
if(QRT_DEPS_ROOT)
  find_path(QRT_HTTPLIB_INCLUDE httplib.h ${_qrt_dep_hints} PATH_SUFFIXES include)
  if(QRT_HTTPLIB_INCLUDE)
    message(FATAL_ERROR "qrt: staged builds do not take cpp-httplib (found ${QRT_HTTPLIB_INCLUDE}/httplib.h)")
  endif()
else()
  qrt_find_dependency(qrt::httplib HEADER httplib.h LIBS cpp-httplib PACKAGE "cpp-httplib (libcpp-httplib-dev)"
                      DEPENDS Threads::Threads)
  target_compile_definitions(qrt::httplib INTERFACE CPPHTTPLIB_OPENSSL_SUPPORT CPPHTTPLIB_ZLIB_SUPPORT
                             CPPHTTPLIB_BROTLI_SUPPORT)
  set(QRT_HAVE_HTTPLIB ON)
endif()
if(QRT_BUILD_TESTS)
  qrt_find_dependency(qrt::gtest HEADER gtest/gtest.h LIBS gtest PACKAGE "GoogleTest (libgtest-dev)"
                      DEPENDS Threads::Threads)
  qrt_find_dependency(qrt::gtest_main HEADER gtest/gtest.h LIBS gtest_main PACKAGE "GoogleTest (libgtest-dev)"
                      DEPENDS qrt::gtest)
  include(GoogleTest)
endif()
if(QRT_BUILD_BENCHMARKS)
  qrt_find_dependency(qrt::benchmark HEADER benchmark/benchmark.h LIBS benchmark
                      PACKAGE "Google Benchmark (libbenchmark-dev)" DEPENDS Threads::Threads)
endif()

# MPI: the CPU communicator for multi-rank tests and the NCCL bootstrap. Never staged (a job needs the MPI's own
# launcher and runtime on the machine), so it is searched on the system even with QRT_DEPS_ROOT. QRT_HAVE_MPI
# becomes the compile definition of the same name (runtime/CMakeLists.txt) and adds *_mpi.cpp sources.
set(QRT_HAVE_MPI OFF)
if(NOT QRT_MPI STREQUAL "OFF")
  find_package(MPI COMPONENTS CXX QUIET)
  if(MPI_CXX_FOUND)
    set(QRT_HAVE_MPI ON)
  elseif(QRT_MPI STREQUAL "ON")
    message(FATAL_ERROR "QRT_MPI=ON but no MPI was found (install libopenmpi-dev openmpi-bin)")
  endif()
endif()
