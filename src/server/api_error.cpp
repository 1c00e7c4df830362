// OpenAI's and Anthropic's error JSON, and how errors from the layers below map onto HTTP statuses.
#include "server/api_error.h"

namespace strata::server {

const char* anthropic_error_type(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

nlohmann::ordered_json ApiError::to_json(ErrorFormat format) const {
  using J = nlohmann::ordered_json;
  if (format == ErrorFormat::kAnthropic)
    return {{"type", "error"},
            {"error", {{"type", anthropic_error_type(status_)}, {"message", what()}}}};
  auto or_null = [](const std::string& s) { return s.empty() ? J(nullptr) : J(s); };
  return {{"error",
           {{"message", what()},
            {"type", type_},
            {"param", or_null(param_)},
            {"code", or_null(code_)}}}};
}

void bad_request(const std::string& param, const std::string& message, const std::string& code) {
  throw ApiError(400, message, param, code);
}

ApiError api_error_from(const Error& error) {
  switch (error.kind()) {
    case ErrorKind::kInvalidInput:
      return ApiError(400, error.what());
    case ErrorKind::kUnsupported:
      return ApiError(400, error.what(), {}, "unsupported");
    case ErrorKind::kNotFound:
      return ApiError(404, error.what(), {}, "not_found");
    case ErrorKind::kIo:
    case ErrorKind::kInternal:
      break;
  }
  return ApiError(500, error.what(), {}, {}, "server_error");
}

}  // namespace strata::server
