// Helpers shared by the chat template tests: the case files under tests/unit/chat/data and the fixed clock.
#pragma once

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "models/chat/chat_template.hpp"

namespace qrt::chat::test {

// The instant strftime_now formats in the tests (2025-03-14 09:26:53 UTC), the same one the Jinja2 oracle uses.
inline constexpr long long kFixedNow = 1741944413;

// tests/unit/chat/data
std::filesystem::path case_dir();
// Whole file as bytes; empty with *error set when unreadable.
std::string read_file(const std::filesystem::path& path, std::string* error);
nlohmann::ordered_json read_json(const std::filesystem::path& path, std::string* error);

// Options rendering at kFixedNow, with the process time zone set to UTC so local time is UTC.
RenderOptions fixed_time_options();

}  // namespace qrt::chat::test
