// A small HTTP/1.1 server, so that the routes never see what is underneath (an event loop on
// Boost.Asio with Boost.Beast's request parser, in http_server.cpp and http_connection.cpp).
// Handlers get the whole request and return a response whose body is either complete or produced
// by a stream function that runs after the headers are sent (SSE). Connections that are idle,
// slow or still sending cost a socket and a few kilobytes, never a thread: every phase of a
// request has a deadline, connections are capped in total and per client address (the oldest
// idle ones are evicted first), and every size a client controls is bounded (HttpLimits).
#pragma once

#include <chrono>
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
  std::string path;                            // percent-decoded, without the query
  std::string query;                           // after '?', as sent
  std::map<std::string, std::string> headers;  // names in lower case; repeats joined by ", "
  std::string body;                            // de-chunked
  std::string client_address;
  // False once the client has closed its connection (checked without reading or writing), so a
  // handler that waits for a long result can give up. Any thread may call it while the handler
  // runs; always true for a request that did not come from a connection (tests).
  std::function<bool()> connected;

  std::string header(const std::string& lower_case_name) const;  // "" when absent
  bool client_connected() const { return !connected || connected(); }
};

// The writable end of a streamed response body.
class BodyWriter {
 public:
  virtual ~BodyWriter() = default;
  // False once the client has gone (or stopped reading for longer than the write timeout): the
  // caller stops and cancels its work. Blocks while too much is queued for a slow reader.
  virtual bool write(std::string_view data) = 0;
  // Checks the connection without writing (a peer that closed is seen here).
  virtual bool connected() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
  std::string body;
  // When set, the body is streamed (chunked): called once, on a worker thread, after the status
  // and headers are sent.
  std::function<void(BodyWriter&)> stream;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// What a client may make the server hold: sizes are bytes, after de-chunking for the body.
struct HttpLimits {
  size_t max_head_bytes = 32 << 10;  // request line and headers together
  size_t max_line_bytes = 8 << 10;   // the request target; each header line
  size_t max_headers = 100;
  size_t max_body_bytes = 16 << 20;
};

// What a client may make the server hold, and for how long.
struct ConnectionPolicy {
  HttpLimits limits;
  // Request bodies held in memory at once, over all connections; a body that would pass it is
  // refused with 503 (a thousand slow uploads cannot take 16 GB between them).
  size_t max_body_memory = 256 << 20;
  // Open connections, in total (also bounded by the process's open-file limit) and per client
  // address. At a cap, the connection that has waited longest for a request it has not yet
  // completed is closed to make room; when there is none, the new connection is.
  size_t max_connections = 4096;
  size_t max_connections_per_client = 1024;
  // Deadlines: from a request's first byte to the end of its headers; for its body; for a
  // keep-alive connection to start its next request; for a write to make progress.
  std::chrono::milliseconds head_timeout{10'000};
  std::chrono::milliseconds body_timeout{60'000};
  std::chrono::milliseconds idle_timeout{5'000};
  std::chrono::milliseconds write_timeout{30'000};
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;            // 0: any free port (see HttpServer::bind)
  size_t threads = 64;        // handlers that run at once; each open stream holds one
  int listen_backlog = 1024;  // pending connections the kernel queues before refusing
  ConnectionPolicy policy;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // A handler runs on a worker thread, or on the event loop itself when `inline_handler` (only
  // for handlers that never block and finish in microseconds: they then answer even while every
  // worker is busy).
  void route(const std::string& method, const std::string& path, HttpHandler handler,
             bool inline_handler = false);
  // Runs on the event loop for every request once its headers are in, before any of its body is
  // read: return a response to answer at once (e.g. 401), or nothing to go on. Must not block.
  void set_guard(std::function<std::optional<HttpResponse>(const HttpRequest&)> guard);
  // Makes the body of an error the server answers by itself (unknown path 404, method 405, body
  // too large 413, malformed request 400, ...): called with the status, a sentence saying why and
  // the request's path ("" when the request line was not read), so each API can answer in its
  // own error shape.
  void set_error_body(
      std::function<HttpResponse(int status, const std::string& why, const std::string& path)>
          make);

  int bind();  // binds host:port and starts listening; returns the port (useful with port 0)
  void run();  // serves on the calling thread until stop(); call after bind()
  // Stops accepting and closes every connection that is not being answered (idle, or still
  // sending a request); requests being answered finish and their connections then close. After
  // `force_after`, the remaining connections are shut too (their writes fail). run() returns
  // once every connection is gone and every handler has returned. Any thread; returns at once.
  void stop(std::chrono::milliseconds force_after = std::chrono::milliseconds::max());

  struct Stats {
    size_t connections = 0;          // open now
    uint64_t accepted = 0;           // since start
    uint64_t refused = 0;            // closed at once: at a cap with nothing to evict
    uint64_t evicted = 0;            // closed to make room for a newer connection
    uint64_t timed_out = 0;          // closed at a deadline
    uint64_t rejected_requests = 0;  // answered by the server itself with a 4xx/5xx
  };
  Stats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
