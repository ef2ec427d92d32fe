// Leveled logging to stderr. The level comes from QRT_LOG_LEVEL (error, warn, info, debug) or set_log_level.
#pragma once

#include <sstream>
#include <string_view>

namespace qrt {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
// Parses "error" / "warn" / "info" / "debug"; returns false for anything else.
bool parse_log_level(std::string_view text, LogLevel* out);
// Writes one whole line ("qrt warn: ...") so lines from several threads never interleave.
void log_line(LogLevel level, std::string_view message);

template <class... Args>
void log(LogLevel level, const Args&... args) {
  if (static_cast<int>(level) > static_cast<int>(log_level())) return;
  std::ostringstream out;
  (out << ... << args);
  log_line(level, out.str());
}
template <class... Args> void log_error(const Args&... a) { log(LogLevel::kError, a...); }
template <class... Args> void log_warn(const Args&... a) { log(LogLevel::kWarn, a...); }
template <class... Args> void log_info(const Args&... a) { log(LogLevel::kInfo, a...); }
template <class... Args> void log_debug(const Args&... a) { log(LogLevel::kDebug, a...); }

}  // namespace qrt
