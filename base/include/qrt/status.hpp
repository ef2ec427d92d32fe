// Errors as values. Library code never aborts or exits: every fallible call returns a Status or a Result<T>,
// and only the tools turn them into exit codes.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <variant>

namespace qrt {

enum class ErrorCode {
  kOk = 0,
  kInvalidArgument,  // the caller passed something unusable
  kNotFound,         // a file, key, tensor or model that does not exist
  kIoError,          // the operating system refused (open, mmap, read)
  kFormatError,      // a file's bytes contradict its format
  kUnsupported,      // valid input that qrt does not handle (yet)
  kOutOfRange,       // an index, size or span beyond its bound
  kCudaError,        // the CUDA runtime or a CUDA library failed
  kInternal,         // a broken invariant inside qrt
};

const char* error_code_name(ErrorCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok_status() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  explicit operator bool() const { return ok(); }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "format error: <message>"
  std::string to_string() const;

  // Prefixes context to the message ("while loading x: ..."), keeping the code.
  Status with_context(const std::string& context) const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status ok_status() { return {}; }
Status invalid_argument(std::string message);
Status not_found(std::string message);
Status io_error(std::string message);
Status format_error(std::string message);
Status unsupported(std::string message);
Status out_of_range(std::string message);
Status internal_error(std::string message);

// A value or the Status saying why there is none.
template <class T>
class [[nodiscard]] Result {
 public:
  static_assert(!std::is_same_v<std::decay_t<T>, Status>, "use Status directly");
  Result(T value) : v_(std::move(value)) {}                    // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {              // NOLINT: implicit by design
    if (std::get<Status>(v_).ok()) v_ = Status(ErrorCode::kInternal, "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace qrt

#define QRT_CONCAT_INNER(a, b) a##b
#define QRT_CONCAT(a, b) QRT_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is an error.
#define QRT_TRY(expr)                                  \
  do {                                                 \
    ::qrt::Status qrt_try_status_ = (expr);            \
    if (!qrt_try_status_.ok()) return qrt_try_status_; \
  } while (0)

// `QRT_ASSIGN_OR_RETURN(auto x, make_x());` binds the value or returns the error.
#define QRT_ASSIGN_OR_RETURN(lhs, expr) QRT_ASSIGN_OR_RETURN_IMPL(QRT_CONCAT(qrt_result_, __LINE__), lhs, expr)
#define QRT_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
