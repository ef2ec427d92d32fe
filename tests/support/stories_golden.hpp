// The real stories260K model's recorded greedy continuation of "Once upon a time"
// (data/stories260K/golden_greedy_once_upon_a_time.txt, produced by llama2.c), shared by the tests that check it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace qrt::test {

struct StoriesGolden {
  std::vector<int32_t> prompt, generated;
  float first_max_logit = 0;  // the largest logit before the first generated token
  std::string text;           // prompt and continuation, as recorded
};

// `data`: the shared data folder.
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
  const std::string max_logit = "first generated token: max logit ";
  std::string line;
  bool in_text = false;
  while (std::getline(in, line)) {
    if (in_text) {
      g.text += (g.text.empty() ? "" : "\n") + line;
    } else if (line.rfind("prompt_ids:", 0) == 0) {
      g.prompt = ints(line.substr(11));
    } else if (line.rfind("generated_ids:", 0) == 0) {
      g.generated = ints(line.substr(14));
    } else if (line.rfind(max_logit, 0) == 0) {
      g.first_max_logit = std::stof(line.substr(max_logit.size()));
    } else if (line == "text:") {
      in_text = true;
    }
  }
  return g;
}

}  // namespace qrt::test
