// Response framing.
#include "server/http_wire.h"

#include <fmt/format.h>

namespace strata::server {

namespace {

void append_header(std::string& out, std::string_view name, std::string_view value) {
  out += name;
  out += ": ";
  for (char c : value)
    if (c != '\r' && c != '\n') out += c;
  out += "\r\n";
}

}  // namespace

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string response_head(const HttpResponse& response, std::optional<size_t> content_length,
                          bool chunked, bool keep_alive) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", response.status, reason_phrase(response.status));
  append_header(out, "Content-Type", response.content_type);
  if (content_length)
    append_header(out, "Content-Length", std::to_string(*content_length));
  else if (chunked)
    append_header(out, "Transfer-Encoding", "chunked");
  append_header(out, "Connection", keep_alive ? "keep-alive" : "close");
  for (const auto& [name, value] : response.headers) append_header(out, name, value);
  out += "\r\n";
  return out;
}

std::string chunk(std::string_view data) {
  if (data.empty()) return {};
  std::string out = fmt::format("{:x}\r\n", data.size());
  out.reserve(out.size() + data.size() + 2);
  out += data;
  out += "\r\n";
  return out;
}

}  // namespace strata::server
