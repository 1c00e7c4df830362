// A small HTTP/1.1 server interface, so that the routes never see the library underneath
// (cpp-httplib today, in http_server.cpp only). Handlers get the whole request and return a
// response whose body is either complete or produced by a stream function that runs after the
// headers are sent (SSE, or a long generation whose client may go away meanwhile).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace strata::server {

struct HttpRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
  std::string header(const std::string& lower_case_name) const;  // "" when absent
};

// The writable end of a streamed response body.
class BodyWriter {
 public:
  virtual ~BodyWriter() = default;
  // False once the client has gone: the caller stops and cancels its work.
  virtual bool write(std::string_view data) = 0;
  // Checks the connection without writing (a peer that closed is seen here).
  virtual bool connected() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
  std::string body;
  // When set, the body is streamed (chunked): called once, on the connection's thread, after
  // the status and headers are sent.
  std::function<void(BodyWriter&)> stream;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;            // 0: any free port (see HttpServer::bind)
  size_t threads = 64;        // connections served at once; each open stream holds one
  int listen_backlog = 1024;  // pending connections the kernel queues before refusing
  size_t max_body_bytes = 16 << 20;
  int keep_alive_seconds = 5;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void route(const std::string& method, const std::string& path, HttpHandler handler);
  // Runs on every request before its body is read (headers only): return a response to answer
  // at once (e.g. 401), or nothing to go on.
  void set_guard(std::function<std::optional<HttpResponse>(const HttpRequest&)> guard);
  // Makes the body of an error the library answers by itself: unknown path (404), method not
  // allowed, body too large (413), malformed request (400).
  void set_error_body(std::function<HttpResponse(int status)> make);

  int bind();   // binds host:port and starts listening; returns the port (useful with port 0)
  void run();   // serves until stop(); call after bind()
  void stop();  // stops accepting; requests in progress finish; run() returns once they have

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
