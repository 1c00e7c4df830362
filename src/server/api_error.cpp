// OpenAI's error JSON, and how errors from the layers below map onto HTTP statuses.
#include "server/api_error.h"

namespace strata::server {

nlohmann::ordered_json ApiError::to_json() const {
  using J = nlohmann::ordered_json;
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
