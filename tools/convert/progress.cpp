#include "tools/convert/progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace qrt::convert {

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 4) {
    bytes /= 1000.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", bytes, units[u]);
  return buf;
}

Progress::Progress(std::string label, uint64_t total_bytes, Mode mode)
    : label_(std::move(label)), total_(total_bytes), mode_(mode) {
  if (mode_ == Mode::kAuto) mode_ = isatty(STDERR_FILENO) ? Mode::kBar : Mode::kLines;
  if (const char* after = std::getenv("QRT_PROGRESS_AFTER")) delay_s_ = std::atof(after);
  start_ = last_draw_ = std::chrono::steady_clock::now();
}

Progress::~Progress() { finish(); }

void Progress::add(uint64_t bytes) {
  std::lock_guard lock(mutex_);
  done_ += bytes;
  if (done_ > total_) done_ = total_;
  draw(false);
}

void Progress::finish(bool completed) {
  std::lock_guard lock(mutex_);
  if (finished_) return;
  finished_ = true;
  if (completed) done_ = total_;
  draw(true);
}

void Progress::draw(bool final) {
  if (mode_ == Mode::kQuiet) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // Nothing for a step quicker than the delay; once shown, the end is shown too.
  if (!shown_ && elapsed < delay_s_) return;
  shown_ = true;
  const double fraction = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  const double rate = elapsed > 0.0 ? static_cast<double>(done_) / elapsed : 0.0;
  const double left = rate > 0.0 ? static_cast<double>(total_ - done_) / rate : 0.0;
  char tail[160];
  std::snprintf(tail, sizeof tail, "%s / %s, %s/s, %s %.0f s", human_bytes(static_cast<double>(done_)).c_str(),
                human_bytes(static_cast<double>(total_)).c_str(), human_bytes(rate).c_str(), final ? "took" : "ETA",
                final ? elapsed : left);
  if (mode_ == Mode::kLines) {
    const int tenth = static_cast<int>(fraction * 10.0);
    if (!final && tenth == last_tenth_) return;
    last_tenth_ = tenth;
    std::fprintf(stderr, "%s: %3.0f%% (%s)\n", label_.c_str(), fraction * 100.0, tail);
    return;
  }
  // A bar redrawn at most ten times a second.
  if (!final && std::chrono::duration<double>(now - last_draw_).count() < 0.1) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  std::string bar(static_cast<size_t>(kWidth), ' ');
  for (int i = 0; i < static_cast<int>(fraction * kWidth); ++i) bar[static_cast<size_t>(i)] = '#';
  std::fprintf(stderr, "\r%s [%s] %3.0f%% %s\033[K%s", label_.c_str(), bar.c_str(), fraction * 100.0, tail,
               final ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace qrt::convert
