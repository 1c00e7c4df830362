// RequestReader: a connection's bytes to one HTTP/1.1 request, under HttpLimits. Boost.Beast's
// parser does the grammar (request line, header fields, Content-Length, chunked bodies); this adds
// what a server must refuse that the grammar allows (request smuggling through Transfer-Encoding,
// compressed bodies, unknown expectations, oversized targets and headers) and turns every failure
// into the status to answer with. No I/O: the connection feeds it, tests and the HTTP fuzzer too.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "server/http.h"

namespace strata::server {

// Why a request cannot be served: the status to answer with and a sentence for the client.
struct HttpRefusal {
  int status = 400;
  std::string why;
  std::string path = {};  // the request's, when its request line was read (its error shape)
};

class RequestReader {
 public:
  enum class Stage {
    kHead,      // reading the request line and headers
    kBody,      // the head is in and checked: the caller decides, then feeds the body
    kComplete,  // a whole request: take() it
    kFailed,    // refusal() says why; the connection cannot be read further
  };

  explicit RequestReader(const HttpLimits& limits);
  ~RequestReader();
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // Consumes bytes from the front of `input` and returns how many it took. Stops at the end of
  // the head (stage kBody, or kComplete when there is no body) and at the end of the request:
  // bytes after it belong to the next one (pipelining). Consumes nothing once failed.
  size_t feed(std::string_view input);
  // The peer closed its side: a request that has begun is now incomplete.
  void feed_eof();

  Stage stage() const { return stage_; }
  bool started() const { return started_; }  // some byte of this request has arrived
  const HttpRefusal& refusal() const { return refusal_; }

  // From kBody on: the request so far (its body arrives with kComplete).
  const HttpRequest& request() const { return request_; }
  HttpRequest& request() { return request_; }
  bool http11() const { return http11_; }  // else HTTP/1.0: no chunked responses
  bool keep_alive() const { return keep_alive_; }
  bool expects_continue() const { return expects_continue_; }
  std::optional<uint64_t> content_length() const { return content_length_; }
  size_t body_size() const;  // bytes of body received so far (de-chunked)

  // At kComplete: the request, body included; the reader is then spent.
  HttpRequest take();

 private:
  struct Parser;

  void fail(int status, std::string why);
  void check_head();

  HttpLimits limits_;
  std::unique_ptr<Parser> parser_;
  Stage stage_ = Stage::kHead;
  bool started_ = false;
  HttpRefusal refusal_;
  HttpRequest request_;
  bool http11_ = false;
  bool keep_alive_ = false;
  bool expects_continue_ = false;
  std::optional<uint64_t> content_length_;
  std::optional<size_t> needs_more_than_;  // Beast said "need more" with this many bytes left
};

}  // namespace strata::server
