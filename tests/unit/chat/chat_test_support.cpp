#include "chat_test_support.hpp"

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>

namespace qrt::chat::test {

std::filesystem::path case_dir() { return std::filesystem::path(QRT_SOURCE_DIR) / "tests" / "unit" / "chat" / "data"; }

std::string read_file(const std::filesystem::path& path, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *error = "cannot open " + path.string();
    return {};
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

nlohmann::ordered_json read_json(const std::filesystem::path& path, std::string* error) {
  const std::string text = read_file(path, error);
  if (!error->empty()) return nullptr;
  auto json = nlohmann::ordered_json::parse(text, nullptr, false);
  if (json.is_discarded()) *error = path.string() + " is not valid JSON";
  return json;
}

RenderOptions fixed_time_options() {
  setenv("TZ", "UTC", 1);
  tzset();
  RenderOptions options;
  options.now = std::chrono::system_clock::time_point(std::chrono::seconds(kFixedNow));
  return options;
}

}  // namespace qrt::chat::test
