// ApiError: a failed API request as OpenAI reports it: an HTTP status and the error object
// {"error": {"message", "type", "param", "code"}}. Thrown by request parsing and the handlers,
// turned into the response at the HTTP boundary.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace strata::server {

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
  nlohmann::ordered_json to_json() const;  // {"error": {...}}; empty param and code become null

 private:
  int status_;
  std::string param_;
  std::string code_;
  std::string type_;
};

// 400 invalid_request_error naming the offending field.
[[noreturn]] void bad_request(const std::string& param, const std::string& message,
                              const std::string& code = {});

// The API form of a strata::Error thrown below the server (tokenizer, template, engine):
// invalid input and unsupported features are the client's fault (400), the rest are 500.
ApiError api_error_from(const Error& error);

}  // namespace strata::server
