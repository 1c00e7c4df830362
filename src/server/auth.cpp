// API-key check with OpenAI's 401 messages (the Anthropic routes give the same words their shape).
#include "server/auth.h"

namespace strata::server {

bool constant_time_equals(std::string_view a, std::string_view b) {
  const size_t n = a.size() > b.size() ? a.size() : b.size();
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = diff | static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::optional<ApiError> check_api_key(std::string_view authorization, std::string_view x_api_key,
                                      std::string_view api_key) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.empty() && x_api_key.empty())
    return ApiError(401,
                    "You didn't provide an API key. Send it in an Authorization header "
                    "('Authorization: Bearer YOUR_KEY') or an x-api-key header.",
                    {}, "missing_api_key");
  std::string_view bearer;
  if (authorization.size() > kScheme.size() && authorization.substr(0, kScheme.size()) == kScheme)
    bearer = authorization.substr(kScheme.size());
  // Both are compared, whichever is given, so the time taken says nothing about which matched.
  const bool by_bearer = constant_time_equals(bearer, api_key);
  const bool by_header = constant_time_equals(x_api_key, api_key);
  if (!(by_bearer || by_header))
    return ApiError(401, "Incorrect API key provided.", {}, "invalid_api_key");
  return std::nullopt;
}

}  // namespace strata::server
