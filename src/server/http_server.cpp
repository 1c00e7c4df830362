// HttpServer on cpp-httplib, the one file that includes it. Two fixes over the library's defaults
// (see docs in shared/DEPENDENCIES.md): a thread pool as large as the connections we serve at
// once (its default is 8, and every open stream holds a thread), and a real listen backlog (the
// packaged library hard-codes 5, so bursts of connects were dropped and retried).
#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "server/http.h"

namespace strata::server {

std::string HttpRequest::header(const std::string& lower_case_name) const {
  auto it = headers.find(lower_case_name);
  return it == headers.end() ? std::string() : it->second;
}

namespace {

struct Route {
  std::string method;
  std::string path;  // a trailing '*' matches any rest of the path
  HttpHandler handler;

  bool matches_path(const std::string& p) const {
    if (!path.empty() && path.back() == '*')
      return p.compare(0, path.size() - 1, path, 0, path.size() - 1) == 0;
    return p == path;
  }
};

class SinkWriter : public BodyWriter {
 public:
  explicit SinkWriter(httplib::DataSink& sink) : sink_(sink) {}
  bool write(std::string_view data) override {
    ok_ = ok_ && sink_.write(data.data(), data.size());
    return ok_;
  }
  bool connected() override { return ok_ && sink_.is_writable(); }

 private:
  httplib::DataSink& sink_;
  bool ok_ = true;
};

HttpRequest convert(const httplib::Request& req) {
  HttpRequest out;
  out.method = req.method;
  out.path = req.path;
  for (const auto& [name, value] : req.headers) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    out.headers.emplace(std::move(lower), value);
  }
  out.body = req.body;
  return out;
}

void apply(HttpResponse&& from, httplib::Response& res) {
  res.status = from.status;
  for (const auto& [name, value] : from.headers) res.set_header(name, value);
  if (from.stream) {
    auto stream = std::move(from.stream);
    res.set_chunked_content_provider(from.content_type, [stream](size_t, httplib::DataSink& sink) {
      SinkWriter writer(sink);
      stream(writer);
      sink.done();
      return true;
    });
  } else {
    res.set_content(from.body, from.content_type);
  }
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  httplib::Server server;
  std::vector<Route> routes;
  std::function<std::optional<HttpResponse>(const HttpRequest&)> guard;
  std::function<HttpResponse(int)> error_body;
  std::atomic<int> listen_fd{-1};
  std::atomic<bool> run_called{false};
  std::atomic<bool> stop_requested{false};
  std::atomic<bool> run_returned{false};

  HttpResponse error_response(int status) {
    if (error_body) return error_body(status);
    HttpResponse r;
    r.status = status;
    r.content_type = "text/plain";
    return r;
  }

  HttpResponse dispatch(const HttpRequest& request) {
    bool path_known = false;
    for (const Route& route : routes) {
      if (!route.matches_path(request.path)) continue;
      path_known = true;
      if (route.method == request.method) return route.handler(request);
    }
    return error_response(path_known ? 405 : 404);
  }
};

HttpServer::HttpServer(HttpServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  Impl& impl = *impl_;
  const size_t threads = std::max<size_t>(impl.options.threads, 1);
  impl.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl.server.set_socket_options([&impl](socket_t fd) {
    httplib::default_socket_options(fd);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // inherited by accepted sockets
    impl.listen_fd = fd;
  });
  impl.server.set_payload_max_length(impl.options.max_body_bytes);
  impl.server.set_keep_alive_timeout(impl.options.keep_alive_seconds);

  impl.server.set_pre_routing_handler([&impl](const httplib::Request& req, httplib::Response& res) {
    if (!impl.guard) return httplib::Server::HandlerResponse::Unhandled;
    std::optional<HttpResponse> answer = impl.guard(convert(req));
    if (!answer) return httplib::Server::HandlerResponse::Unhandled;
    apply(std::move(*answer), res);
    return httplib::Server::HandlerResponse::Handled;
  });
  // The library calls this for every status >= 400, ours included: fill in only its own errors.
  impl.server.set_error_handler(httplib::Server::HandlerWithResponse(
      [&impl](const httplib::Request&, httplib::Response& res) {
        if (!res.body.empty() || res.is_chunked_content_provider_)
          return httplib::Server::HandlerResponse::Unhandled;
        apply(impl.error_response(res.status), res);
        return httplib::Server::HandlerResponse::Handled;
      }));
  auto handler = [&impl](const httplib::Request& req, httplib::Response& res) {
    apply(impl.dispatch(convert(req)), res);
  };
  impl.server.set_exception_handler(
      [&impl](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        try {
          std::rethrow_exception(error);
        } catch (const std::exception& e) {
          log::error("unhandled error in an HTTP handler: {}", e.what());
        } catch (...) {
          log::error("unhandled error in an HTTP handler");
        }
        apply(impl.error_response(500), res);
      });
  const std::string any = ".*";
  impl.server.Get(any, handler);
  impl.server.Post(any, handler);
  impl.server.Put(any, handler);
  impl.server.Patch(any, handler);
  impl.server.Delete(any, handler);
  impl.server.Options(any, handler);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::route(const std::string& method, const std::string& path, HttpHandler handler) {
  impl_->routes.push_back(Route{method, path, std::move(handler)});
}

void HttpServer::set_guard(std::function<std::optional<HttpResponse>(const HttpRequest&)> guard) {
  impl_->guard = std::move(guard);
}

void HttpServer::set_error_body(std::function<HttpResponse(int status)> make) {
  impl_->error_body = std::move(make);
}

int HttpServer::bind() {
  const HttpServerOptions& o = impl_->options;
  int port = o.port;
  if (port == 0) {
    port = impl_->server.bind_to_any_port(o.host);
    check(port > 0, ErrorKind::kIo, "cannot listen on {} (any port)", o.host);
  } else {
    check(impl_->server.bind_to_port(o.host, port), ErrorKind::kIo,
          "cannot listen on {}:{} (in use, or not an address of this machine?)", o.host, port);
  }
  // The library listened with a backlog of 5; raise it on the same socket.
  const int fd = impl_->listen_fd;
  check(fd >= 0 && ::listen(fd, o.listen_backlog) == 0, ErrorKind::kIo,
        "cannot set the listen backlog on {}:{}", o.host, port);
  return port;
}

void HttpServer::run() {
  impl_->run_called = true;
  if (!impl_->stop_requested) impl_->server.listen_after_bind();
  impl_->run_returned = true;
}

void HttpServer::stop() {
  // The library ignores stop() until its loop runs; wait for that when run() has begun.
  if (impl_->stop_requested.exchange(true)) return;  // the library asserts on a second stop
  if (!impl_->run_called) return;
  while (!impl_->server.is_running() && !impl_->run_returned)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->server.stop();
}

}  // namespace strata::server
