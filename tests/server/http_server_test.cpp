// HttpServer on loopback with small limits and deadlines: pipelining and keep-alive, each phase's
// deadline, eviction at the connection caps, auth before the body, the body-memory budget, slow
// readers of a stream, a client that goes away, and stop() with connections in every state.
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "http_client.h"
#include "server/http.h"

namespace strata::server {
namespace {

using namespace std::chrono_literals;
using test::HttpConnection;
using test::HttpResult;
using Clock = std::chrono::steady_clock;

// An HttpServer with test routes, running on its own thread.
class TestHttp {
 public:
  explicit TestHttp(ConnectionPolicy policy = small_policy(), size_t threads = 8)
      : http_(HttpServerOptions{.port = 0, .threads = threads, .policy = policy}) {
    http_.route("GET", "/ping", [](const HttpRequest&) { return text("pong"); });
    http_.route("POST", "/echo", [](const HttpRequest& r) { return text(r.body); });
    http_.route("GET", "/stream", [](const HttpRequest&) {
      HttpResponse r;
      r.content_type = "text/plain";
      r.stream = [](BodyWriter& out) {
        for (int i = 0; i < 3; ++i) out.write("part" + std::to_string(i) + ";");
      };
      return r;
    });
    // Streams a megabyte at a time until the client stops taking it.
    http_.route("GET", "/flood", [this](const HttpRequest&) {
      HttpResponse r;
      r.stream = [this](BodyWriter& out) {
        const std::string block(1 << 20, 'x');
        while (out.write(block)) {
        }
        flood_ended = true;
      };
      return r;
    });
    // Holds its worker until the client goes away.
    http_.route("GET", "/wait", [this](const HttpRequest& r) {
      ++waiting;
      while (r.client_connected() && !release) std::this_thread::sleep_for(5ms);
      if (!r.client_connected()) saw_disconnect = true;
      --waiting;
      return text("released");
    });
    http_.set_guard([](const HttpRequest& r) -> std::optional<HttpResponse> {
      if (r.path != "/private" || r.header("authorization") == "Bearer key") return std::nullopt;
      HttpResponse denied = text("denied");
      denied.status = 401;
      return denied;
    });
    http_.route("POST", "/private", [](const HttpRequest& r) { return text(r.body); });
    port_ = http_.bind();
    thread_ = std::thread([this] { http_.run(); });
  }
  ~TestHttp() { stop(0ms); }

  static ConnectionPolicy small_policy() {
    ConnectionPolicy p;
    p.limits.max_body_bytes = 1 << 20;
    p.head_timeout = 400ms;
    p.body_timeout = 400ms;
    p.idle_timeout = 400ms;
    p.write_timeout = 400ms;
    return p;
  }

  static HttpResponse text(std::string body) {
    HttpResponse r;
    r.content_type = "text/plain";
    r.body = std::move(body);
    return r;
  }

  // Stops the server; returns how long run() took to return.
  std::chrono::milliseconds stop(std::chrono::milliseconds force_after) {
    if (!thread_.joinable()) return 0ms;
    const auto start = Clock::now();
    http_.stop(force_after);
    thread_.join();
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  }

  int port() const { return port_; }
  HttpServer::Stats stats() const { return http_.stats(); }

  std::atomic<int> waiting{0};
  std::atomic<bool> release{false};
  std::atomic<bool> saw_disconnect{false};
  std::atomic<bool> flood_ended{false};

 private:
  HttpServer http_;
  int port_ = 0;
  std::thread thread_;
};

// Reads from `c` until the peer closes or `timeout` passes; returns everything read.
std::string read_all(HttpConnection& c) { return c.read_until("\x01never"); }

bool closed_by_peer(HttpConnection& c) { return c.peer_closed(); }

template <typename F>
bool eventually(F condition, std::chrono::milliseconds within = 3000ms) {
  const auto deadline = Clock::now() + within;
  while (Clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return condition();
}

TEST(HttpServer, PipelinedRequestsAreAnsweredInOrderOnOneConnection) {
  TestHttp s;
  HttpConnection c(s.port());
  ASSERT_TRUE(
      c.send_all("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n"
                 "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                 "GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string all = read_all(c);
  const size_t first = all.find("pong"), second = all.find("hello"), third = all.rfind("pong");
  ASSERT_NE(first, std::string::npos) << all;
  ASSERT_NE(second, std::string::npos) << all;
  EXPECT_LT(first, second);
  EXPECT_LT(second, third);
  size_t responses = 0;
  for (size_t p = 0; (p = all.find("HTTP/1.1 200", p)) != std::string::npos; ++p) ++responses;
  EXPECT_EQ(responses, 3u) << all;
}

TEST(HttpServer, AHeadThatDoesNotFinishInTimeGetsA408AndTheConnectionCloses) {
  TestHttp s;
  HttpConnection c(s.port());
  c.send_all("GET /ping HTTP/1.1\r\nHost: x\r\n");
  const auto start = Clock::now();
  const std::string answer = read_all(c);
  EXPECT_EQ(HttpConnection::parse(answer).status, 408) << answer;
  EXPECT_LT(Clock::now() - start, 2s);
  EXPECT_EQ(s.stats().timed_out, 1u);
}

TEST(HttpServer, SlowHeaderBytesDoNotExtendTheHeadDeadline) {
  TestHttp s;
  HttpConnection c(s.port());
  const auto start = Clock::now();
  bool refused = false;
  for (int i = 0; i < 40 && !refused; ++i) {  // a byte every 50 ms: 2 s if never cut
    refused = !c.send_all("G");
    pollfd p{c.fd(), POLLIN, 0};
    refused = refused || ::poll(&p, 1, 50) > 0;
  }
  EXPECT_TRUE(refused);
  EXPECT_LT(Clock::now() - start, 1500ms);
}

TEST(HttpServer, IdleAndSilentConnectionsAreClosedAtTheirDeadlines) {
  TestHttp s;
  HttpConnection silent(s.port());  // never sends a byte
  HttpConnection idle(s.port());    // one request, then nothing
  idle.send_all("GET /ping HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_NE(idle.read_until("pong").find("pong"), std::string::npos);
  const auto start = Clock::now();
  EXPECT_TRUE(closed_by_peer(silent));
  EXPECT_NE(read_all(idle).find("pong"), std::string::npos);  // then the end of the connection
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST(HttpServer, ABodyThatDoesNotArriveInTimeGetsA408) {
  TestHttp s;
  HttpConnection c(s.port());
  c.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc");
  EXPECT_EQ(HttpConnection::parse(read_all(c)).status, 408);
}

TEST(HttpServer, AtThePerClientCapTheOldestIdleConnectionMakesRoom) {
  ConnectionPolicy p = TestHttp::small_policy();
  p.max_connections_per_client = 3;
  p.head_timeout = p.idle_timeout = 10s;
  TestHttp s(p);
  std::vector<std::unique_ptr<HttpConnection>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<HttpConnection>(s.port()));
    ASSERT_TRUE(eventually([&] { return s.stats().connections == idle.size(); }));
  }
  // A fourth client request is served; the first idle connection was closed for it.
  EXPECT_EQ(test::http_request(s.port(), "GET", "/ping").body, "pong");
  EXPECT_TRUE(closed_by_peer(*idle[0]));
  EXPECT_GE(s.stats().evicted, 1u);
}

TEST(HttpServer, WhenEveryConnectionIsBusyANewOneIsRefused) {
  ConnectionPolicy p = TestHttp::small_policy();
  p.max_connections = 2;
  TestHttp s(p);
  HttpConnection a(s.port()), b(s.port());
  a.send_request("GET", "/wait", "");
  b.send_request("GET", "/wait", "");
  ASSERT_TRUE(eventually([&] { return s.waiting == 2; }));
  HttpConnection c(s.port());
  c.send_request("GET", "/ping", "");
  EXPECT_EQ(read_all(c), "");  // closed unanswered: nothing to evict
  EXPECT_GE(s.stats().refused, 1u);
  s.release = true;
  EXPECT_NE(read_all(a).find("released"), std::string::npos);
}

TEST(HttpServer, TheGuardAnswersBeforeAnyOfTheBodyIsRead) {
  TestHttp s;
  HttpConnection c(s.port());
  // A large body is announced but never sent: the 401 must not wait for it.
  c.send_all("POST /private HTTP/1.1\r\nHost: x\r\nContent-Length: 900000\r\n\r\n");
  const auto start = Clock::now();
  const HttpResult r = HttpConnection::parse(c.read_until("denied"));
  EXPECT_EQ(r.status, 401);
  EXPECT_LT(Clock::now() - start, 300ms);
  HttpConnection ok(s.port());
  ok.send_request("POST", "/private", "secret", {{"Authorization", "Bearer key"}});
  EXPECT_EQ(ok.read_response().body, "secret");
}

TEST(HttpServer, ExpectContinueIsAnsweredThenTheBodyRead) {
  TestHttp s;
  HttpConnection c(s.port());
  c.send_all(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n"
      "Connection: close\r\n\r\n");
  EXPECT_NE(c.read_until("\r\n\r\n").find("HTTP/1.1 100 Continue"), std::string::npos);
  c.send_all("hello");
  EXPECT_NE(read_all(c).find("hello"), std::string::npos);
}

TEST(HttpServer, StreamsAreChunkedOnHttp11AndCloseDelimitedOnHttp10) {
  TestHttp s;
  HttpConnection v11(s.port());
  v11.send_request("GET", "/stream", "");
  const HttpResult r = v11.read_response();
  EXPECT_EQ(r.headers.at("transfer-encoding"), "chunked");
  EXPECT_EQ(r.body, "part0;part1;part2;");
  HttpConnection v10(s.port());
  v10.send_all("GET /stream HTTP/1.0\r\n\r\n");
  const std::string raw = read_all(v10);
  EXPECT_EQ(raw.find("chunked"), std::string::npos);
  EXPECT_EQ(raw.substr(raw.size() - 18), "part0;part1;part2;");
}

TEST(HttpServer, AClientThatStopsReadingAStreamEndsItAtTheWriteDeadline) {
  TestHttp s;
  HttpConnection c(s.port());
  c.send_request("GET", "/flood", "");
  ASSERT_TRUE(eventually([&] { return s.flood_ended.load(); }, 5000ms));
}

TEST(HttpServer, AHandlerSeesItsClientGo) {
  TestHttp s;
  {
    HttpConnection c(s.port());
    c.send_request("GET", "/wait", "");
    ASSERT_TRUE(eventually([&] { return s.waiting == 1; }));
  }
  EXPECT_TRUE(eventually([&] { return s.saw_disconnect.load(); }));
}

TEST(HttpServer, BodiesHeldAtOnceStayWithinTheBodyMemoryBudget) {
  ConnectionPolicy p = TestHttp::small_policy();
  p.max_body_memory = 1000;
  p.body_timeout = 5s;
  TestHttp s(p);
  HttpConnection first(s.port());
  first.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\n\r\nabc");
  ASSERT_TRUE(eventually([&] { return s.stats().connections == 1; }));
  std::this_thread::sleep_for(50ms);
  HttpConnection second(s.port());
  second.send_all("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 800\r\n\r\n");
  const HttpResult r = HttpConnection::parse(second.read_until("\r\n\r\n"));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers.at("retry-after"), "1");
  first.send_all(std::string(797, 'x'));  // the first completes within the budget
  EXPECT_EQ(HttpConnection::parse(first.read_until(std::string(797, 'x'))).status, 200);
}

TEST(HttpServer, AHeadRequestGetsNoBodySoTheConnectionStaysInStep) {
  TestHttp s;
  HttpConnection c(s.port());
  c.send_all(
      "HEAD /ping HTTP/1.1\r\nHost: x\r\n\r\nGET /ping HTTP/1.1\r\nHost: x\r\n"
      "Connection: close\r\n\r\n");
  const std::string all = read_all(c);
  // The HEAD's answer (405: no such route) has its length but no body; the GET's follows it.
  const size_t second = all.find("HTTP/1.1 200 OK");
  ASSERT_NE(second, std::string::npos) << all;
  EXPECT_EQ(all.rfind("HTTP/1.1 405", 0), 0u) << all;
  EXPECT_EQ(all.substr(second - 4, 4), "\r\n\r\n") << all;
  EXPECT_EQ(all.substr(all.size() - 4), "pong");
}

TEST(HttpServer, RangeIsIgnored) {
  TestHttp s;
  std::string ranges = "bytes=0-0";
  for (int i = 0; i < 200; ++i) ranges += ",0-0";
  EXPECT_EQ(test::http_request(s.port(), "GET", "/ping", "", {{"Range", ranges}}).body, "pong");
}

TEST(HttpServer, StopClosesWaitingConnectionsAndShutsBusyOnesAfterTheGrace) {
  TestHttp s;
  HttpConnection slow(s.port()), idle(s.port()), busy(s.port()), reader(s.port());
  slow.send_all("GET /pi");
  busy.send_request("GET", "/wait", "");
  reader.send_request("GET", "/flood", "");  // never read: its writes block
  ASSERT_TRUE(eventually([&] { return s.waiting == 1; }));
  const auto took = s.stop(300ms);
  EXPECT_LT(took, 1500ms);
  EXPECT_GE(took, 250ms);  // the busy handler ran until the grace ended
  EXPECT_TRUE(closed_by_peer(slow));
}

}  // namespace
}  // namespace strata::server
