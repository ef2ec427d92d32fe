#pragma once

namespace qrt {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace qrt
