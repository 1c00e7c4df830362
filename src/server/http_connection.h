// One client connection of the HTTP server: reads requests one after another (pipelined ones in
// order), answers each, and keeps to the deadline of the phase it is in. Runs as a coroutine on
// the server's single event-loop thread; handlers run on workers. Internal to http_server.cpp.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "server/http.h"
#include "server/http_reader.h"

namespace strata::server {

using Clock = std::chrono::steady_clock;

// What a connection needs from its server. Every call is made on the event-loop thread.
class ConnectionHost {
 public:
  virtual ~ConnectionHost() = default;
  virtual const ConnectionPolicy& policy() const = 0;
  virtual bool stopping() const = 0;
  virtual std::optional<HttpResponse> guard(const HttpRequest& head) = 0;
  // `path`: the request's, or "" when its head was not read.
  virtual HttpResponse error_response(int status, const std::string& why,
                                      const std::string& path) = 0;
  // Runs the request's handler (on a worker, unless its route is inline).
  virtual boost::asio::awaitable<HttpResponse> dispatch(HttpRequest& request) = 0;
  // Runs a stream function on a worker.
  virtual void run_on_worker(std::function<void()> work) = 0;
  // Where reads land before they are appended to a connection's input: one buffer for the
  // loop, so an idle connection holds none.
  virtual std::span<char> read_buffer() = 0;
  // Request bodies held at once, over every connection: false when `bytes` more would pass
  // the budget.
  virtual bool take_body_memory(size_t bytes) = 0;
  virtual void give_body_memory(size_t bytes) = 0;
  virtual void count_rejected() = 0;
  // The connection has begun to close (once), and is gone (once, last).
  virtual void retire(class Connection& connection) = 0;
  virtual void forget(class Connection& connection) = 0;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  enum class Phase {
    kIdle,       // waiting for a request's first byte
    kHead,       // reading a request line and headers
    kBody,       // reading a body
    kHandling,   // a handler is computing the response
    kWriting,    // writing a response
    kStreaming,  // a stream function writes the body as it goes
    kDraining,   // answered and shut for writing; reading what the client still sends
  };

  Connection(ConnectionHost& host, boost::asio::ip::tcp::socket socket, std::string address);
  ~Connection();

  boost::asio::awaitable<void> serve();

  const std::string& address() const { return address_; }
  Phase phase() const { return phase_; }
  // Evictable: the connection holds no request being answered (idle, partial head, draining).
  bool evictable() const;
  Clock::time_point phase_since() const { return phase_since_; }
  // The time the current phase must end by; nullopt while a handler runs.
  std::optional<Clock::time_point> deadline() const;

  // The server's hands on a connection (event-loop thread). expire: its deadline passed (a
  // partial request gets a 408). close: evicted or the server stops; ends it quietly. shut:
  // shuts the socket both ways (what a handler is writing fails) when stopping must not wait.
  void expire();
  void close();
  void shut();
  // True the first time the connection begins to close (the server counts it out then).
  bool begin_closing();
  bool closing() const { return closing_; }

  std::list<std::shared_ptr<Connection>>::iterator registry_entry;

 private:
  class Stream;
  class Probe;

  boost::asio::awaitable<void> serve_requests();
  // Reads more bytes into input_; false at the end of the connection or on an error.
  boost::asio::awaitable<bool> read_more();
  // read_more() for a request under way; when its deadline passed, answers 408 first (if
  // `late_what` names what did not arrive, e.g. "headers").
  boost::asio::awaitable<bool> read_request_bytes(const char* late_what);
  boost::asio::awaitable<bool> write_all(std::string_view data);
  boost::asio::awaitable<bool> answer(const HttpResponse& response, bool keep_alive);
  // A last answer (an error): written, then the connection drains and closes.
  boost::asio::awaitable<void> refuse_with(const HttpResponse& response);
  boost::asio::awaitable<void> refuse(const HttpRefusal& refusal);
  boost::asio::awaitable<bool> stream_body(HttpResponse& response, bool chunked);
  boost::asio::awaitable<void> drain();
  void enter(Phase phase);

  ConnectionHost& host_;
  boost::asio::ip::tcp::socket socket_;
  std::string address_;
  std::shared_ptr<Probe> probe_;
  std::string input_;  // received, not yet parsed: a partial head, or a pipelined request
  Phase phase_ = Phase::kIdle;
  Clock::time_point phase_since_ = Clock::now();
  Clock::time_point write_progress_ = Clock::now();
  bool writing_ = false;  // a write is under way: its progress has a deadline
  bool first_request_ = true;
  bool head_request_ = false;  // the request being answered is a HEAD: no body goes out
  bool expired_ = false;
  bool closed_ = false;  // close() or shut() was called
  bool closing_ = false;
};

}  // namespace strata::server
