#include "qrt/log.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace qrt {
namespace {

LogLevel level_from_environment() {
  LogLevel level = LogLevel::kWarn;
  if (const char* env = std::getenv("QRT_LOG_LEVEL")) parse_log_level(env, &level);
  return level;
}

// The level is process-wide by nature (it mirrors an environment variable); it is atomic so that reading it
// from any thread is safe.
std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(level_from_environment())};
  return level;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarn: return "warn";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
  }
  return "?";
}

}  // namespace

LogLevel log_level() { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }
void set_log_level(LogLevel level) { level_storage().store(static_cast<int>(level)); }

bool parse_log_level(std::string_view text, LogLevel* out) {
  for (LogLevel l : {LogLevel::kError, LogLevel::kWarn, LogLevel::kInfo, LogLevel::kDebug}) {
    if (text == level_name(l)) {
      *out = l;
      return true;
    }
  }
  return false;
}

void log_line(LogLevel level, std::string_view message) {
  static std::mutex mutex;
  std::string line = std::string("qrt ") + level_name(level) + ": ";
  line.append(message);
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace qrt
