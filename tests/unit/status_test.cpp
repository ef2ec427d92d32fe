#include <gtest/gtest.h>

#include "qrt/log.hpp"
#include "qrt/status.hpp"

namespace qrt {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("value " + std::to_string(v) + " is not positive");
  return v;
}

Status add_positive(int a, int b, int* out) {
  QRT_ASSIGN_OR_RETURN(int x, parse_positive(a));
  QRT_ASSIGN_OR_RETURN(int y, parse_positive(b));
  *out = x + y;
  return ok_status();
}

TEST(Status, CarriesCodeAndMessage) {
  Status s = format_error("tensor 'a' truncated");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), ErrorCode::kFormatError);
  EXPECT_EQ(s.to_string(), "format error: tensor 'a' truncated");
  EXPECT_EQ(s.with_context("model.gguf").message(), "model.gguf: tensor 'a' truncated");
  EXPECT_TRUE(ok_status().ok());
}

TEST(Status, MacrosPropagateTheFirstError) {
  int out = 0;
  EXPECT_TRUE(add_positive(2, 3, &out).ok());
  EXPECT_EQ(out, 5);
  Status s = add_positive(2, -7, &out);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "value -7 is not positive");
}

TEST(Status, ResultFromOkStatusIsAnInternalError) {
  Result<int> r{Status{}};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInternal);
}

TEST(Log, ParsesLevelsAndFilters) {
  LogLevel l = LogLevel::kError;
  EXPECT_TRUE(parse_log_level("debug", &l));
  EXPECT_EQ(l, LogLevel::kDebug);
  EXPECT_FALSE(parse_log_level("loud", &l));
  const LogLevel saved = log_level();
  set_log_level(LogLevel::kError);
  testing::internal::CaptureStderr();
  log_warn("hidden ", 1);
  log_error("shown ", 2);
  const std::string err = testing::internal::GetCapturedStderr();
  set_log_level(saved);
  EXPECT_EQ(err, "qrt error: shown 2\n");
}

}  // namespace
}  // namespace qrt
