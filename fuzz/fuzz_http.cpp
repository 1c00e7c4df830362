// libFuzzer target: any bytes as what a client sends on a connection (request lines, headers,
// Content-Length and chunked bodies, pipelined requests, garbage). Two paths:
//  - RequestReader in process, fed in pieces whose size the first byte picks, request after
//    request as a connection would: it must never take more than it was given, never hold a body
//    past the limit, answer every failure with a 4xx/5xx status, and stop taking bytes once failed;
//  - the same bytes sent to a real HttpServer on loopback (started once; a small head deadline),
//    the client then half-closing: every answer must be well-formed HTTP, and the server must go
//    on answering a plain request afterwards.
// A crash, a sanitizer report, a hang or a broken invariant (abort) is a finding.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>

#include "server/http.h"
#include "server/http_reader.h"

// Boost's assertions stay on in this build (they are extra checks for the fuzzer), with one
// exception: Beast 1.81 asserts that a final chunk's header is re-read with at least 5 bytes
// ("0\r\n\r\n"), which a peer sending a byte at a time breaks. Read in release terms (the server
// is built with NDEBUG), that path only scans within the bytes given and asks for more, so it is
// no fault of the input; every other assertion aborts.
namespace boost {
void assertion_failed_msg(char const* expr, char const* msg, char const* function, char const* file,
                          long line) {
  if (std::strcmp(expr, "n >= 5") == 0 && std::strstr(file, "beast/http/impl/basic_parser.ipp"))
    return;
  std::fprintf(stderr, "%s:%ld: %s: Assertion '%s' failed%s%s\n", file, line, function, expr,
               msg != nullptr ? ": " : "", msg != nullptr ? msg : "");
  std::abort();
}
void assertion_failed(char const* expr, char const* function, char const* file, long line) {
  assertion_failed_msg(expr, nullptr, function, file, line);
}
}  // namespace boost

namespace {

using namespace strata::server;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_http: broken invariant: %s\n", what);
  std::abort();
}

HttpLimits fuzz_limits() {
  HttpLimits l;
  l.max_head_bytes = 2048;
  l.max_line_bytes = 512;
  l.max_headers = 16;
  l.max_body_bytes = 4096;
  return l;
}

void read_requests(std::string_view input, size_t step) {
  const HttpLimits limits = fuzz_limits();
  std::string pending;
  size_t next = 0;
  for (int requests = 0; requests < 64; ++requests) {
    RequestReader reader(limits);
    for (;;) {
      if (reader.stage() == RequestReader::Stage::kComplete ||
          reader.stage() == RequestReader::Stage::kFailed)
        break;
      const bool more = next < input.size();
      if (more) {
        const size_t n = std::min(step, input.size() - next);
        pending.append(input.substr(next, n));
        next += n;
      }
      const size_t before = pending.size();
      const size_t taken = reader.feed(pending);
      require(taken <= before, "took more bytes than it was given");
      pending.erase(0, taken);
      require(reader.body_size() <= limits.max_body_bytes, "held a body past the limit");
      if (!more && taken == 0) {
        reader.feed_eof();
        break;
      }
    }
    if (reader.stage() == RequestReader::Stage::kFailed) {
      const int status = reader.refusal().status;
      require(status >= 400 && status < 600, "a refusal that is not an error status");
      require(!reader.refusal().why.empty(), "a refusal without a reason");
      require(reader.feed("GET / HTTP/1.1\r\n\r\n") == 0, "took bytes after failing");
      return;
    }
    const HttpRequest r = reader.take();
    require(!r.method.empty() && !r.path.empty(), "a request without method or path");
    require(r.body.size() <= limits.max_body_bytes, "a body past the limit");
    if (pending.empty() && next >= input.size()) return;
  }
}

// The loopback server, started on first use and kept for the whole run.
class LoopbackServer {
 public:
  LoopbackServer() {
    ConnectionPolicy policy;
    policy.limits = fuzz_limits();
    policy.head_timeout = std::chrono::milliseconds(500);
    policy.body_timeout = std::chrono::milliseconds(500);
    policy.idle_timeout = std::chrono::milliseconds(500);
    policy.write_timeout = std::chrono::milliseconds(500);
    http_ = new HttpServer(HttpServerOptions{.port = 0, .threads = 4, .policy = policy});
    http_->route("POST", "/echo", [](const HttpRequest& r) {
      HttpResponse out;
      out.body = r.body;
      return out;
    });
    http_->route("GET", "/stream", [](const HttpRequest&) {
      HttpResponse out;
      out.stream = [](BodyWriter& w) {
        if (w.write("a")) w.write("b");
      };
      return out;
    });
    http_->route(
        "GET", "/ping",
        [](const HttpRequest&) {
          HttpResponse out;
          out.body = "pong";
          return out;
        },
        /*inline_handler=*/true);
    port_ = http_->bind();
    std::thread([server = http_] { server->run(); }).detach();  // lives as long as the process
  }

  // Sends `bytes`, half-closes, and returns everything the server sent back before closing.
  std::string exchange(std::string_view bytes) const {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {  // ports may be short a moment
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        fd = -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    require(fd >= 0, "cannot connect to the server");
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;  // the server may close early (a refusal): fine
      sent += static_cast<size_t>(n);
    }
    ::shutdown(fd, SHUT_WR);
    std::string got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::steady_clock::now())
                                            .count());
      require(left > 0, "the server neither answered nor closed within 5 s");
      if (::poll(&p, 1, left) <= 0) continue;
      char buf[8192];
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return got;
  }

 private:
  HttpServer* http_;
  int port_ = 0;
};

void check_answers(const std::string& got) {
  // Every answer begins with a status line; 100 Continue may precede one.
  size_t pos = 0;
  while (pos < got.size()) {
    require(got.compare(pos, 9, "HTTP/1.1 ") == 0, "an answer that is not HTTP/1.1");
    const int status = std::atoi(got.c_str() + pos + 9);
    require(status >= 100 && status < 600, "a status out of range");
    const size_t head_end = got.find("\r\n\r\n", pos);
    require(head_end != std::string::npos, "an answer without the end of its head");
    const std::string head = got.substr(pos, head_end - pos);
    pos = head_end + 4;
    if (status == 100) continue;
    const size_t length_at = head.find("Content-Length: ");
    if (length_at == std::string::npos) return;  // chunked or close-delimited: the rest is its body
    // The body follows, unless the request was a HEAD: then the next answer (or the end) comes
    // at once. Which request it was is not known here, so either reading must hold.
    const size_t after_body = pos + std::strtoull(head.c_str() + length_at + 16, nullptr, 10);
    auto answer_or_end = [&](size_t at) {
      return at == got.size() || (at < got.size() && got.compare(at, 9, "HTTP/1.1 ") == 0);
    };
    if (answer_or_end(after_body) || !answer_or_end(pos)) pos = after_body;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t step = data[0] == 0 ? SIZE_MAX : data[0];
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  read_requests(input, step);

  static const LoopbackServer server;
  check_answers(server.exchange(input));
  static unsigned runs = 0;
  if (++runs % 64 == 0) {
    const std::string pong = server.exchange("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
    require(pong.find("pong") != std::string::npos, "the server stopped answering");
  }
  return 0;
}
