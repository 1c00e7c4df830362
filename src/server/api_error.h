// ApiError: a failed API request: an HTTP status and what went wrong, as OpenAI reports it
// ({"error": {"message", "type", "param", "code"}}) or as Anthropic does ({"type": "error",
// "error": {"type", "message"}}), depending on the route. Thrown by request parsing and the
// handlers, turned into the response at the HTTP boundary.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace strata::server {

// Whose error shape a route answers in.
enum class ErrorFormat { kOpenAi, kAnthropic };

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error")
      : std::runtime_error(std::move(message)),
        status_(status),
        param_(std::move(param)),
        code_(std::move(code)),
        type_(std::move(type)) {}

  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }
  const std::string& type() const { return type_; }
  // OpenAI: {"error": {...}}, empty param and code as null. Anthropic: {"type": "error", "error":
  // {"type": anthropic_error_type(status), "message"}}.
  nlohmann::ordered_json to_json(ErrorFormat format = ErrorFormat::kOpenAi) const;

 private:
  int status_;
  std::string param_;
  std::string code_;
  std::string type_;
};

// Anthropic's error type for an HTTP status: invalid_request_error (400 and other 4xx),
// authentication_error (401), permission_error (403), not_found_error (404), request_too_large
// (413), rate_limit_error (429), overloaded_error (503, 529), api_error (500 and other 5xx).
const char* anthropic_error_type(int status);

// 400 invalid_request_error naming the offending field.
[[noreturn]] void bad_request(const std::string& param, const std::string& message,
                              const std::string& code = {});

// The API form of a strata::Error thrown below the server (tokenizer, template, engine):
// invalid input and unsupported features are the client's fault (400), the rest are 500.
ApiError api_error_from(const Error& error);

}  // namespace strata::server
