// API-key check for `--api-key`: "Authorization: Bearer KEY", compared in constant time so that
// response timing reveals nothing about how much of a guess was right.
#pragma once

#include <optional>
#include <string_view>

#include "server/api_error.h"

namespace strata::server {

// Compares every byte of both strings whatever their contents (the length is not secret).
bool constant_time_equals(std::string_view a, std::string_view b);

// The 401 error for an Authorization header value ("" when absent), or nothing when it carries
// the key.
std::optional<ApiError> check_bearer(std::string_view authorization, std::string_view api_key);

}  // namespace strata::server
