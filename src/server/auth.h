// API-key check for `--api-key`: "Authorization: Bearer KEY" (OpenAI's clients) or "x-api-key: KEY"
// (Anthropic's), compared in constant time so that response timing reveals nothing about how much
// of a guess was right.
#pragma once

#include <optional>
#include <string_view>

#include "server/api_error.h"

namespace strata::server {

// Compares every byte of both strings whatever their contents (the length is not secret).
bool constant_time_equals(std::string_view a, std::string_view b);

// The 401 error for a request's Authorization and x-api-key header values ("" when absent), or
// nothing when either carries the key.
std::optional<ApiError> check_api_key(std::string_view authorization, std::string_view x_api_key,
                                      std::string_view api_key);

}  // namespace strata::server
