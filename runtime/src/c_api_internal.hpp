// What the C ABI's translation units share: the handle types, the per-thread error, exception guarding, and the
// conversion of C parameters to qrt::GenerateOptions.
#pragma once

#include <exception>
#include <new>
#include <string>
#include <vector>

#include "qrt/c_api.h"
#include "qrt/runtime.hpp"

struct qrt_model {
  qrt::Model model;
};

namespace qrt::c_api {

// The message qrt_last_error() returns on this thread.
std::string& last_error();

inline int fail(const qrt::Status& status) {
  last_error() = status.to_string();
  return static_cast<int>(status.code());
}

inline int fail(int code, std::string message) {
  last_error() = std::move(message);
  return code;
}

inline int report(const qrt::Status& status) { return status.ok() ? QRT_OK : fail(status); }

// Runs `body` (which returns a status code), turning exceptions (allocation failures) into errors.
template <class F>
int guarded(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(QRT_ERR_OUT_OF_RANGE, "out of memory");
  } catch (const std::exception& e) {
    return fail(QRT_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(QRT_ERR_INTERNAL, "internal error: unknown exception");
  }
}

// `params` as qrt::GenerateOptions; `who` names the calling function in errors.
qrt::Result<qrt::GenerateOptions> generate_options(const qrt_generate_params& params, const char* who);
// `n` C messages as qrt::ChatMessage (each role and content must be non-NULL).
qrt::Result<std::vector<qrt::ChatMessage>> chat_messages(const qrt_chat_message* messages, size_t n, const char* who);

}  // namespace qrt::c_api
