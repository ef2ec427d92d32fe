// The real stories260K model and its recorded greedy continuation of "Once upon a time"
// (data/stories260K/golden_greedy_once_upon_a_time.txt, produced by llama2.c), for the API tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace qrt::test {

struct StoriesGolden {
  std::vector<int32_t> prompt, generated;
  std::string text;  // prompt and continuation, as recorded
};

inline StoriesGolden read_stories_golden(const std::filesystem::path& data) {
  StoriesGolden g;
  std::ifstream in(data / "stories260K/golden_greedy_once_upon_a_time.txt");
  auto ints = [](const std::string& s) {
    std::vector<int32_t> v;
    std::istringstream ss(s);
    int32_t x;
    while (ss >> x) v.push_back(x);
    return v;
  };
  std::string line;
  bool in_text = false;
  while (std::getline(in, line)) {
    if (in_text) {
      g.text += (g.text.empty() ? "" : "\n") + line;
    } else if (line.rfind("prompt_ids:", 0) == 0) {
      g.prompt = ints(line.substr(11));
    } else if (line.rfind("generated_ids:", 0) == 0) {
      g.generated = ints(line.substr(14));
    } else if (line == "text:") {
      in_text = true;
    }
  }
  return g;
}

inline std::string stories_gguf(const std::filesystem::path& data) {
  return (data / "stories260K/stories260K.gguf").string();
}
inline std::string stories_hf(const std::filesystem::path& data) { return (data / "stories260K-hf").string(); }

inline std::vector<int32_t> first_n(const std::vector<int32_t>& v, size_t n) {
  return {v.begin(), v.begin() + static_cast<long>(std::min(n, v.size()))};
}

}  // namespace qrt::test
