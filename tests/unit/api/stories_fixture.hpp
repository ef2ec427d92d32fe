// The real stories260K model and its recorded greedy continuation (tests/support/stories_golden.hpp), for the API
// tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "stories_golden.hpp"

namespace qrt::test {

inline std::string stories_gguf(const std::filesystem::path& data) {
  return (data / "stories260K/stories260K.gguf").string();
}
inline std::string stories_hf(const std::filesystem::path& data) { return (data / "stories260K-hf").string(); }

inline std::vector<int32_t> first_n(const std::vector<int32_t>& v, size_t n) {
  return {v.begin(), v.begin() + static_cast<long>(std::min(n, v.size()))};
}

}  // namespace qrt::test
