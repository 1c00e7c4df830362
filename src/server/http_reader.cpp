// The request parser: Beast's grammar, our limits and refusals. Beast keeps the head in the
// caller's buffer until it is whole (and refuses one longer than the head limit), then appends
// body bytes to the request as they come, counting them against the body limit after de-chunking.
#include "server/http_reader.h"

#include <algorithm>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cctype>

namespace strata::server {

namespace http = boost::beast::http;

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

bool iequals(std::string_view a, std::string_view b) { return lower(a) == lower(b); }

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// What Beast's parse errors mean to the client.
HttpRefusal refusal_for(const boost::system::error_code& ec, size_t max_body_bytes) {
  switch (static_cast<http::error>(ec.value())) {
    case http::error::body_limit:
    case http::error::buffer_overflow:
      return {413, "The request body is too large: the limit is " + std::to_string(max_body_bytes) +
                       " bytes."};
    case http::error::header_limit:
      return {431, "The request's headers are too large."};
    case http::error::bad_version:
      return {505, "Only HTTP/1.0 and HTTP/1.1 are supported."};
    case http::error::bad_content_length:
    case http::error::multiple_content_length:
      return {400, "The request has an invalid or conflicting Content-Length."};
    case http::error::bad_transfer_encoding:
      return {400, "The request's Transfer-Encoding conflicts with its other headers."};
    case http::error::bad_chunk:
    case http::error::bad_chunk_extension:
      return {400, "The request's chunked body is malformed."};
    case http::error::partial_message:
      return {400, "The request ended before it was complete."};
    default:
      break;
  }
  return {400, "The HTTP request is malformed (" + ec.message() + ")."};
}

// The request target's path, percent-decoded, and its query; nullopt when it is malformed.
struct RequestTarget {
  std::string path;
  std::string query;
};

std::optional<RequestTarget> split_target(std::string_view target, std::string_view method) {
  if (target == "*") {
    if (method != "OPTIONS") return std::nullopt;
    return RequestTarget{"*", ""};
  }
  if (target.empty()) return std::nullopt;
  if (target.front() != '/') {  // absolute form: "http://host:port/path?query"
    const size_t scheme_end = target.find("://");
    if (scheme_end == std::string_view::npos) return std::nullopt;
    const std::string scheme = lower(target.substr(0, scheme_end));
    if (scheme != "http" && scheme != "https") return std::nullopt;
    const size_t path_start = target.find_first_of("/?", scheme_end + 3);
    if (path_start == std::string_view::npos) return RequestTarget{"/", ""};
    target = target.substr(path_start);
    if (target.front() == '?') return RequestTarget{"/", std::string(target.substr(1))};
  }
  RequestTarget out;
  const size_t query = target.find('?');
  if (query != std::string_view::npos) out.query = std::string(target.substr(query + 1));
  const std::string_view raw = target.substr(0, query);
  out.path.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '%') {
      if (i + 2 >= raw.size()) return std::nullopt;
      const int hi = hex_digit(raw[i + 1]), lo = hex_digit(raw[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      c = static_cast<char>(hi * 16 + lo);
      if (c == '\0') return std::nullopt;
      i += 2;
    }
    out.path += c;
  }
  return out;
}

}  // namespace

std::string HttpRequest::header(const std::string& lower_case_name) const {
  auto it = headers.find(lower_case_name);
  return it == headers.end() ? std::string() : it->second;
}

struct RequestReader::Parser {
  http::request_parser<http::string_body> beast;
};

RequestReader::RequestReader(const HttpLimits& limits)
    : limits_(limits), parser_(std::make_unique<Parser>()) {
  parser_->beast.header_limit(static_cast<uint32_t>(limits_.max_head_bytes));
  parser_->beast.body_limit(limits_.max_body_bytes);
  parser_->beast.eager(false);  // stop at the end of the head, so the caller can check it first
}

RequestReader::~RequestReader() = default;

void RequestReader::fail(int status, std::string why) {
  stage_ = Stage::kFailed;
  std::string path = request_.path;
  if (path.empty()) {  // a head refused as it was read (a body past the limit): its request line
    const http::request<http::string_body>& m = parser_->beast.get();
    const std::string_view target(m.target().data(), m.target().size());
    if (!target.empty() && target.size() <= limits_.max_line_bytes)
      if (std::optional<RequestTarget> split = split_target(
              target, std::string_view(m.method_string().data(), m.method_string().size())))
        path = std::move(split->path);
  }
  refusal_ = HttpRefusal{status, std::move(why), std::move(path)};
}

size_t RequestReader::body_size() const { return parser_->beast.get().body().size(); }

size_t RequestReader::feed(std::string_view input) {
  size_t taken = 0;
  if (stage_ == Stage::kHead && !started_) {
    // Empty lines before a request line are ignored (RFC 9112 2.2): some clients end a body
    // with a stray CRLF.
    while (taken < input.size() && (input[taken] == '\r' || input[taken] == '\n')) ++taken;
    input.remove_prefix(taken);
    if (input.empty()) return taken;
    started_ = true;
  }
  if (stage_ == Stage::kHead) {
    // Beast refuses a head past max_head_bytes; a request line alone has a smaller limit.
    const size_t line_end = input.find('\n');
    const size_t line_length = line_end == std::string_view::npos ? input.size() : line_end;
    if (line_length > limits_.max_line_bytes + 16) {  // + "METHOD ", " HTTP/1.1"
      fail(414, "The request line is too long: the limit is " +
                    std::to_string(limits_.max_line_bytes) + " bytes.");
      return taken;
    }
  }
  if (stage_ != Stage::kHead && stage_ != Stage::kBody) return taken;

  // After "need more", Beast must be given more: its parser assumes each call brings new bytes
  // (a debug build asserts on a chunk header otherwise).
  if (needs_more_than_ && input.size() <= *needs_more_than_) return taken;
  needs_more_than_.reset();
  boost::system::error_code ec;
  http::request_parser<http::string_body>& p = parser_->beast;
  while (!input.empty() && !p.is_done()) {
    const size_t n = p.put(boost::asio::const_buffer(input.data(), input.size()), ec);
    taken += n;
    input.remove_prefix(n);
    if (ec == http::error::need_more) {
      ec = {};
      needs_more_than_ = input.size();
      break;
    }
    if (ec) {
      HttpRefusal r = refusal_for(ec, limits_.max_body_bytes);
      fail(r.status, std::move(r.why));
      return taken;
    }
    if (stage_ == Stage::kHead && p.is_header_done()) {
      check_head();
      if (stage_ == Stage::kFailed) return taken;
      p.eager(true);
      stage_ = p.is_done() ? Stage::kComplete : Stage::kBody;
      return taken;  // the caller looks at the head before any body is read
    }
    if (n == 0) break;
  }
  if (stage_ == Stage::kBody && p.is_done()) stage_ = Stage::kComplete;
  return taken;
}

void RequestReader::feed_eof() {
  if (stage_ == Stage::kComplete || stage_ == Stage::kFailed) return;
  if (!started_) {
    fail(400, "The connection closed before a request arrived.");
    return;
  }
  fail(400, "The request ended before it was complete.");
}

void RequestReader::check_head() {
  const http::request<http::string_body>& m = parser_->beast.get();
  if (m.version() != 10 && m.version() != 11)
    return fail(505, "Only HTTP/1.0 and HTTP/1.1 are supported.");
  request_.method = std::string(m.method_string());
  const std::string_view target(m.target().data(), m.target().size());
  if (target.size() > limits_.max_line_bytes)
    return fail(414, "The request target is too long: the limit is " +
                         std::to_string(limits_.max_line_bytes) + " bytes.");
  std::optional<RequestTarget> split = split_target(target, request_.method);
  if (!split) return fail(400, "The request target is malformed.");
  request_.path = std::move(split->path);
  request_.query = std::move(split->query);

  size_t count = 0;
  for (const auto& field : m) {
    const std::string_view name(field.name_string().data(), field.name_string().size());
    const std::string_view value(field.value().data(), field.value().size());
    if (++count > limits_.max_headers)
      return fail(431, "The request has too many headers: the limit is " +
                           std::to_string(limits_.max_headers) + ".");
    if (name.size() + value.size() + 2 > limits_.max_line_bytes)
      return fail(431, "A request header is too long: the limit is " +
                           std::to_string(limits_.max_line_bytes) + " bytes.");
    auto [it, inserted] = request_.headers.emplace(lower(name), std::string(value));
    if (!inserted) it->second += ", " + std::string(value);
  }

  // Transfer-Encoding: only "chunked" alone. Anything else would leave the body's end to a
  // coding we do not decode (and "chunked" not last would let the body be read as a request).
  if (const std::string te = request_.header("transfer-encoding"); !te.empty()) {
    if (!iequals(trim(te), "chunked") || !parser_->beast.chunked())
      return fail(501, "Transfer-Encoding '" + te +
                           "' is not supported: send the body with "
                           "Content-Length, or chunked.");
  }
  // Compressed bodies are refused: a small one could inflate past every limit.
  if (const std::string ce = request_.header("content-encoding");
      !ce.empty() && !iequals(trim(ce), "identity"))
    return fail(415, "Content-Encoding '" + ce + "' is not supported: send the body uncompressed.");
  if (const std::string expect = request_.header("expect"); !expect.empty()) {
    if (!iequals(trim(expect), "100-continue"))
      return fail(417, "Expect '" + expect + "' is not supported.");
    expects_continue_ = true;
  }
  http11_ = m.version() == 11;
  keep_alive_ = parser_->beast.keep_alive();
  if (const auto length = parser_->beast.content_length()) content_length_ = *length;
}

HttpRequest RequestReader::take() {
  http::request<http::string_body> message = parser_->beast.release();
  request_.body = std::move(message.body());
  return std::move(request_);
}

}  // namespace strata::server
