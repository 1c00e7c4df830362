// HttpServer: one event-loop thread (the caller of run()) accepts connections, reads and writes
// them, and enforces every deadline with a sweep ten times a second; handlers run on a pool of
// workers. Only the loop touches the connection registry, so it needs no lock. Why not the
// cpp-httplib this replaced: it holds a thread per connection for as long as the connection
// lasts, so 80 clients sending a header byte a second blocked every route.
#include <malloc.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <list>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "server/http.h"
#include "server/http_connection.h"

namespace strata::server {

namespace asio = boost::asio;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

namespace {

constexpr std::chrono::milliseconds kSweepInterval{100};
constexpr size_t kReservedFiles = 64;   // descriptors kept for everything but connections
constexpr size_t kLargeBody = 1 << 20;  // after a request this large, free memory goes back

// A large request leaves its parse's garbage in the worker's malloc arena, and glibc keeps what
// an arena once held: after a hundred 16 MiB requests spread over the workers, the process held
// 860 MB more than before. Giving free pages back after each large request keeps it flat.
void return_free_memory() {
#ifdef __GLIBC__
  ::malloc_trim(0);
#endif
}

struct Route {
  std::string method;
  std::string path;  // a trailing '*' matches any rest of the path
  HttpHandler handler;
  bool inline_handler = false;

  bool matches_path(const std::string& p) const {
    if (!path.empty() && path.back() == '*')
      return p.compare(0, path.size() - 1, path, 0, path.size() - 1) == 0;
    return p == path;
  }
};

// The connections the process can hold: the configured cap, within the open-file limit.
size_t connection_cap(size_t configured) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return configured;
  const size_t files = static_cast<size_t>(limit.rlim_cur);
  return std::min(configured, files > 2 * kReservedFiles ? files - kReservedFiles : files / 2);
}

Clock::time_point after(Clock::time_point from, std::chrono::milliseconds wait) {
  const auto room =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::time_point::max() - from);
  return wait >= room ? Clock::time_point::max() : from + wait;
}

}  // namespace

struct HttpServer::Impl final : ConnectionHost {
  HttpServerOptions config;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  asio::thread_pool workers;
  asio::steady_timer sweep_timer{io};
  std::vector<Route> routes;
  std::function<std::optional<HttpResponse>(const HttpRequest&)> guard_fn;
  std::function<HttpResponse(int, const std::string&, const std::string&)> error_body;
  std::vector<char> scratch = std::vector<char>(64 << 10);

  // The loop's own state.
  std::list<std::shared_ptr<Connection>> connections;
  std::unordered_map<std::string, size_t> per_client;  // connections not closing, by address
  size_t cap = 0;
  size_t body_memory = 0;
  bool stopping_now = false;
  Clock::time_point force_at = Clock::time_point::max();

  std::atomic<bool> stop_requested{false};
  std::atomic<size_t> open{0};  // connections not closing (written by the loop, read by stats())
  std::atomic<uint64_t> accepted{0}, refused{0}, evicted{0}, timed_out{0}, rejected{0};

  explicit Impl(HttpServerOptions o)
      : config(std::move(o)), workers(std::max<size_t>(config.threads, 1)) {}

  ~Impl() override { workers.join(); }

  // ConnectionHost.
  const ConnectionPolicy& policy() const override { return config.policy; }
  bool stopping() const override { return stopping_now; }
  std::span<char> read_buffer() override { return scratch; }
  void count_rejected() override { ++rejected; }

  std::optional<HttpResponse> guard(const HttpRequest& head) override {
    if (!guard_fn) return std::nullopt;
    try {
      return guard_fn(head);
    } catch (const std::exception& e) {
      log::error("the request guard failed: {}", e.what());
      return error_response(500, "Internal server error.", head.path);
    }
  }

  HttpResponse error_response(int status, const std::string& why,
                              const std::string& path) override {
    if (error_body) return error_body(status, why, path);
    HttpResponse r;
    r.status = status;
    r.content_type = "text/plain";
    r.body = why;
    return r;
  }

  HttpResponse call(const Route& route, const HttpRequest& request) {
    try {
      return route.handler(request);
    } catch (const std::exception& e) {
      log::error("unhandled error in an HTTP handler: {}", e.what());
    } catch (...) {
      log::error("unhandled error in an HTTP handler");
    }
    return error_response(500, "Internal server error.", request.path);
  }

  asio::awaitable<HttpResponse> dispatch(HttpRequest& request) override {
    const Route* route = nullptr;
    bool path_known = false;
    for (const Route& r : routes) {
      if (!r.matches_path(request.path)) continue;
      path_known = true;
      if (r.method == request.method) {
        route = &r;
        break;
      }
    }
    if (route == nullptr) {
      ++rejected;
      co_return error_response(
          path_known ? 405 : 404,
          path_known ? "Method not allowed for this endpoint." : "Not found: no such endpoint.",
          request.path);
    }
    if (route->inline_handler) co_return call(*route, request);
    auto on_worker = [this, route, &request]() -> asio::awaitable<HttpResponse> {
      HttpResponse response = call(*route, request);
      if (request.body.size() >= kLargeBody) {
        std::string().swap(request.body);
        return_free_memory();
      }
      co_return response;
    };
    HttpResponse response = co_await asio::co_spawn(workers, std::move(on_worker), use_awaitable);
    co_return response;
  }

  void run_on_worker(std::function<void()> work) override { asio::post(workers, std::move(work)); }

  bool take_body_memory(size_t bytes) override {
    if (bytes >
        config.policy.max_body_memory - std::min(body_memory, config.policy.max_body_memory))
      return false;
    body_memory += bytes;
    return true;
  }
  void give_body_memory(size_t bytes) override { body_memory -= std::min(bytes, body_memory); }

  void retire(Connection& c) override {
    --open;
    auto it = per_client.find(c.address());
    if (it != per_client.end() && --it->second == 0) per_client.erase(it);
  }

  void forget(Connection& c) override {
    connections.erase(c.registry_entry);
    if (stopping_now && connections.empty()) sweep_timer.cancel();
  }

  // Closes the connection that has waited longest for a request it has not completed (of one
  // client, when `address` is given); false when every connection is busy with a request.
  bool evict_oldest(const std::string* address) {
    Connection* oldest = nullptr;
    for (const auto& c : connections) {
      if (c->closing() || !c->evictable()) continue;
      if (address != nullptr && c->address() != *address) continue;
      if (oldest == nullptr || c->phase_since() < oldest->phase_since()) oldest = c.get();
    }
    if (oldest == nullptr) return false;
    ++evicted;
    oldest->close();
    return true;
  }

  void admit(tcp::socket socket) {
    boost::system::error_code ec;
    const tcp::endpoint peer = socket.remote_endpoint(ec);
    if (ec) return;  // gone already
    ++accepted;
    std::string address = peer.address().to_string();
    if (open >= cap && !evict_oldest(nullptr)) {
      ++refused;
      return;  // the socket closes here
    }
    auto known = per_client.find(address);
    if (known != per_client.end() && known->second >= config.policy.max_connections_per_client &&
        !evict_oldest(&address)) {
      ++refused;
      return;
    }
    socket.set_option(tcp::no_delay(true), ec);
    socket.non_blocking(true, ec);
    if (ec) return;
    auto c = std::make_shared<Connection>(*this, std::move(socket), address);
    c->registry_entry = connections.insert(connections.end(), c);
    ++per_client[address];
    ++open;
    asio::co_spawn(io, c->serve(), asio::detached);
  }

  asio::awaitable<void> accept_loop() {
    asio::steady_timer pause(io);
    while (!stopping_now) {
      auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(use_awaitable));
      if (stopping_now || ec == asio::error::operation_aborted) break;
      if (!ec) {
        admit(std::move(socket));
        continue;
      }
      if (ec == asio::error::no_descriptors || ec.value() == EMFILE || ec.value() == ENFILE) {
        // Out of descriptors: make room, and give the loop a moment before accepting again.
        log::warn("HTTP server: out of file descriptors at {} connections", open.load());
        evict_oldest(nullptr);
        pause.expires_after(std::chrono::milliseconds(20));
        co_await pause.async_wait(asio::as_tuple(use_awaitable));
      }
    }
  }

  asio::awaitable<void> sweep_loop() {
    for (;;) {
      sweep_timer.expires_after(kSweepInterval);
      co_await sweep_timer.async_wait(asio::as_tuple(use_awaitable));
      if (stopping_now && connections.empty()) break;
      const Clock::time_point now = Clock::now();
      const bool force = stopping_now && now >= force_at;
      // Expiring cancels I/O; the connections then end in later steps, so the list holds.
      for (const auto& c : connections) {
        if (force) {
          c->shut();
        } else if (std::optional<Clock::time_point> d = c->deadline(); d && now >= *d) {
          ++timed_out;
          c->expire();
        }
      }
    }
  }

  void begin_stop(std::chrono::milliseconds force_after) {
    if (stopping_now) return;
    stopping_now = true;
    force_at = after(Clock::now(), force_after);
    boost::system::error_code ec;
    acceptor.close(ec);
    for (const auto& c : connections)
      if (c->evictable() || c->phase() == Connection::Phase::kBody) c->close();
    if (connections.empty()) sweep_timer.cancel();  // nothing to wait for
  }
};

HttpServer::HttpServer(HttpServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }

void HttpServer::route(const std::string& method, const std::string& path, HttpHandler handler,
                       bool inline_handler) {
  impl_->routes.push_back(Route{method, path, std::move(handler), inline_handler});
}

void HttpServer::set_guard(std::function<std::optional<HttpResponse>(const HttpRequest&)> guard) {
  impl_->guard_fn = std::move(guard);
}

void HttpServer::set_error_body(
    std::function<HttpResponse(int, const std::string&, const std::string&)> make) {
  impl_->error_body = std::move(make);
}

int HttpServer::bind() {
  Impl& impl = *impl_;
  const HttpServerOptions& o = impl.config;
  boost::system::error_code ec;
  tcp::resolver resolver(impl.io);
  const auto found = resolver.resolve(o.host, std::to_string(o.port),
                                      tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  check(!ec && !found.empty(), ErrorKind::kIo, "cannot listen on {}:{}: {}", o.host, o.port,
        ec ? ec.message() : "no such address");
  const tcp::endpoint endpoint = found.begin()->endpoint();
  impl.acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl.acceptor.bind(endpoint, ec);
  check(!ec, ErrorKind::kIo,
        "cannot listen on {}:{} ({}: in use, or not an address of this "
        "machine?)",
        o.host, o.port, ec.message());
  impl.acceptor.listen(o.listen_backlog, ec);
  check(!ec, ErrorKind::kIo, "cannot listen on {}:{}: {}", o.host, o.port, ec.message());
  impl.cap = connection_cap(o.policy.max_connections);
  if (impl.cap < o.policy.max_connections)
    log::info("serving at most {} connections at once (the open-file limit)", impl.cap);
  return impl.acceptor.local_endpoint().port();
}

void HttpServer::run() {
  Impl& impl = *impl_;
  if (impl.stop_requested) return;
  asio::co_spawn(impl.io, impl.accept_loop(), asio::detached);
  asio::co_spawn(impl.io, impl.sweep_loop(), asio::detached);
  impl.io.run();
}

void HttpServer::stop(std::chrono::milliseconds force_after) {
  impl_->stop_requested = true;
  asio::post(impl_->io, [impl = impl_.get(), force_after] { impl->begin_stop(force_after); });
}

HttpServer::Stats HttpServer::stats() const {
  const Impl& impl = *impl_;
  return Stats{impl.open, impl.accepted, impl.refused, impl.evicted, impl.timed_out, impl.rejected};
}

}  // namespace strata::server
