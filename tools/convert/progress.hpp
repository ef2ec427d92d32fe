// Progress of a long step (quantizing, converting, loading) on stderr: on a terminal one line redrawn in place
// with a bar, bytes done of the total, the rate and the time left; otherwise a plain line every tenth of the work
// (and at the end), so that logs stay readable; nothing at all when quiet. A step that ends within a second shows
// nothing (QRT_PROGRESS_AFTER=SECONDS changes that delay; 0 shows every step). Thread-safe: workers call add().
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace qrt::convert {

class Progress {
 public:
  enum class Mode { kAuto, kQuiet, kLines, kBar };
  // kAuto: a bar when stderr is a terminal, lines otherwise.
  Progress(std::string label, uint64_t total_bytes, Mode mode = Mode::kAuto);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add(uint64_t bytes);
  // Ends the display (the bar's line is finished with a newline); called by the destructor too. `completed` false:
  // the step failed, and the last figures stay as they were instead of 100%.
  void finish(bool completed = true);

 private:
  void draw(bool final);
  std::string label_;
  double delay_s_ = 1.0;
  bool shown_ = false;
  uint64_t total_ = 0, done_ = 0;
  Mode mode_;
  int last_tenth_ = -1;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex mutex_;
};

// "1.23 GB", "456.7 MB", "12.0 kB" (decimal units, as rates are given).
std::string human_bytes(double bytes);

}  // namespace qrt::convert
