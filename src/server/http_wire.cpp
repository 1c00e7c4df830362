// Response framing.
#include "server/http_wire.h"

#include <fmt/format.h>

#include <utility>

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
  static constexpr std::pair<int, const char*> kPhrases[] = {
      {100, "Continue"},
      {200, "OK"},
      {204, "No Content"},
      {400, "Bad Request"},
      {401, "Unauthorized"},
      {403, "Forbidden"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {409, "Conflict"},
      {411, "Length Required"},
      {413, "Content Too Large"},
      {414, "URI Too Long"},
      {415, "Unsupported Media Type"},
      {417, "Expectation Failed"},
      {422, "Unprocessable Content"},
      {429, "Too Many Requests"},
      {431, "Request Header Fields Too Large"},
      {499, "Client Closed Request"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {503, "Service Unavailable"},
      {505, "HTTP Version Not Supported"},
  };
  for (const auto& [code, phrase] : kPhrases)
    if (code == status) return phrase;
  return "Unknown";
}

std::string response_head(const HttpResponse& response, std::optional<size_t> content_length,
                          bool chunked, bool keep_alive) {
  std::string out =
      fmt::format("HTTP/1.1 {} {}\r\n", response.status, reason_phrase(response.status));
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
