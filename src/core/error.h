// strata::Error: the one exception type. Thrown at the point of failure with a kind, caught at the
// boundary (HTTP handler, CLI main) and turned into a clear message or an OpenAI error JSON.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace strata {

enum class ErrorKind { kInvalidInput, kNotFound, kUnsupported, kIo, kInternal };

const char* error_kind_name(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// fail(kind, "format {}", args...): throws Error with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(kind, fmt::format(format, std::forward<Args>(args)...));
}

// check(cond, kind, ...): fail unless cond holds.
template <typename... Args>
void check(bool condition, ErrorKind kind, fmt::format_string<Args...> format, Args&&... args) {
  if (!condition) fail(kind, format, std::forward<Args>(args)...);
}

}  // namespace strata
