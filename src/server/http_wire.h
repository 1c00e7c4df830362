// The bytes a response goes out as: its status line and headers, and the chunks of a streamed
// body. Pure functions, so the framing is tested apart from any socket.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "server/http.h"

namespace strata::server {

// The reason phrase of a status ("Not Found"); "Unknown" for one we never send.
const char* reason_phrase(int status);

// Status line and headers. `content_length` set: a whole body of that many bytes follows;
// nullopt: the body is chunked (HTTP/1.1), or ends with the connection (HTTP/1.0, `chunked`
// false). Header values are ours, but any CR or LF in one is dropped so none can split the head.
std::string response_head(const HttpResponse& response, std::optional<size_t> content_length,
                          bool chunked, bool keep_alive);

// One chunk of a chunked body ("" gives nothing: an empty chunk would end the body).
std::string chunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

}  // namespace strata::server
