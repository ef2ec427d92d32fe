// Helpers shared by the loader's unit tests: temporary files, fixtures and status assertions.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant/formats.hpp"
#include "loader/ggml_types.hpp"
#include "qrt/status.hpp"
#include "test_support.hpp"

namespace qrt::test {

// A fresh directory under the test temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::path(testing::TempDir()) /
            ("qrt_loader_" + std::to_string(rd()) + "_" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// Asserts a non-ok status whose message contains every fragment.
inline testing::AssertionResult FailsWith(const Status& s, std::initializer_list<std::string> fragments) {
  if (s.ok()) return testing::AssertionFailure() << "expected an error, got ok";
  for (const std::string& f : fragments)
    if (s.message().find(f) == std::string::npos)
      return testing::AssertionFailure() << "message \"" << s.message() << "\" lacks \"" << f << "\"";
  return testing::AssertionSuccess();
}

// A live GGML type with no qrt format (the format list grows, so this is looked up, not hard-coded).
inline std::optional<int> ggml_type_without_format() {
  for (int id = 0; id < kGgmlTypeCount; ++id)
    if (kGgmlTypes[id].block_elems != 0 && !quant::format_from_ggml_type(id)) return id;
  return std::nullopt;
}

}  // namespace qrt::test
