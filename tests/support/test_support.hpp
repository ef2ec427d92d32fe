// Shared helpers for qrt's tests: where the real data lives, random inputs, error measures, GPU presence.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kernels/quant/format_list.hpp"

namespace qrt::test {

// The shared data folder (QRT_TEST_DATA, else ../shared/data beside the source root), or nullopt with the
// reason in *why.
std::optional<std::filesystem::path> test_data_dir(std::string* why);

// Whether a CUDA device can be used; when not, *why says why (no CUDA build, no device, driver error).
bool cuda_device_available(std::string* why);

// Fresh random inputs (never zeros): Gaussian floats and uniform bytes from a seeded generator.
std::vector<float> random_normal(size_t n, uint64_t seed, float stddev = 1.0f);
std::vector<uint8_t> random_bytes(size_t n, uint64_t seed);

// A gtest-safe parameter name for a format ("q4_k" -> "q4_k", "afq4" -> "afq4").
std::string format_test_name(const testing::TestParamInfo<quant::FormatId>& info);

// ||a - b|| / ||b|| in double.
double relative_l2(const float* a, const float* b, size_t n);

}  // namespace qrt::test

// Skips the current test, saying why, when the shared data folder is absent. Binds `dir` to its path.
#define QRT_REQUIRE_TEST_DATA(dir)                                         \
  std::filesystem::path dir;                                               \
  do {                                                                     \
    std::string qrt_why_;                                                  \
    auto qrt_dir_ = ::qrt::test::test_data_dir(&qrt_why_);                 \
    if (!qrt_dir_) GTEST_SKIP() << "test data unavailable: " << qrt_why_;  \
    dir = *qrt_dir_;                                                       \
  } while (0)

// Skips the current test, saying why, when no CUDA device is usable.
#define QRT_REQUIRE_GPU()                                                            \
  do {                                                                               \
    std::string qrt_why_;                                                            \
    if (!::qrt::test::cuda_device_available(&qrt_why_)) GTEST_SKIP() << qrt_why_;    \
  } while (0)
