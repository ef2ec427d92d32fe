// The real stories260K model and its recorded greedy continuation (tests/support/stories_golden.hpp), for the API
// tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "stories_golden.hpp"
#include "test_support.hpp"

namespace qrt::test {

// A test on the real stories260K model: the shared data folder and the recorded continuation, skipped when the
// data is absent.
class StoriesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto dir = test_data_dir(&why);
    if (!dir) GTEST_SKIP() << "test data unavailable: " << why;
    data_ = *dir;
    golden_ = read_stories_golden(data_);
    ASSERT_EQ(golden_.generated.size(), 60u);
  }
  std::filesystem::path data_;
  StoriesGolden golden_;
};

inline std::string stories_gguf(const std::filesystem::path& data) {
  return (data / "stories260K/stories260K.gguf").string();
}
inline std::string stories_hf(const std::filesystem::path& data) { return (data / "stories260K-hf").string(); }

inline std::vector<int32_t> first_n(const std::vector<int32_t>& v, size_t n) {
  return {v.begin(), v.begin() + static_cast<long>(std::min(n, v.size()))};
}

}  // namespace qrt::test
