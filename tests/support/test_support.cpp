#include "test_support.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <random>

namespace qrt::test {

std::optional<std::filesystem::path> test_data_dir(std::string* why) {
  std::filesystem::path dir;
  if (const char* env = std::getenv("QRT_TEST_DATA"); env && *env) {
    dir = env;
  } else {
    dir = QRT_TEST_DATA_DEFAULT;
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    *why = "no directory " + dir.string() + " (set QRT_TEST_DATA to the shared data folder)";
    return std::nullopt;
  }
  return dir;
}

std::vector<float> random_normal(size_t n, uint64_t seed, float stddev) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(gen() & 0xFF);
  return v;
}

std::string format_test_name(const testing::TestParamInfo<quant::FormatId>& info) {
  std::string s(quant::format_name(info.param));
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

double relative_l2(const float* a, const float* b, size_t n) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    num += d * d;
    den += static_cast<double>(b[i]) * b[i];
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return std::sqrt(num / den);
}

}  // namespace qrt::test
