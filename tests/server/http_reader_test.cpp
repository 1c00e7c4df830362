// RequestReader: what the HTTP layer accepts and refuses before any handler runs, byte by byte:
// limits, smuggling through Content-Length and Transfer-Encoding, compressed bodies, chunked
// bodies over the limit, pipelining, and the request target.
#include "server/http_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/http_wire.h"

namespace strata::server {
namespace {

using Stage = RequestReader::Stage;

HttpLimits small_limits() {
  HttpLimits l;
  l.max_head_bytes = 4096;
  l.max_line_bytes = 1024;
  l.max_headers = 20;
  l.max_body_bytes = 1000;
  return l;
}

// Feeds `bytes` in pieces of `step` (the way they may arrive), through the head and the body;
// returns the reader and how many bytes it consumed.
struct Fed {
  std::unique_ptr<RequestReader> reader;
  size_t consumed = 0;
};
Fed feed(const std::string& bytes, size_t step = 1 << 20, HttpLimits limits = small_limits()) {
  Fed f{std::make_unique<RequestReader>(limits), 0};
  std::string pending;
  size_t next = 0;
  while (f.reader->stage() == Stage::kHead || f.reader->stage() == Stage::kBody) {
    if (next < bytes.size()) {
      pending += bytes.substr(next, step);
      next += std::min(step, bytes.size() - next);
    }
    const size_t n = f.reader->feed(pending);
    pending.erase(0, n);
    f.consumed += n;
    if (n == 0 && next >= bytes.size()) break;
  }
  return f;
}

TEST(HttpReader, ReadsAPostWithContentLengthInAnySplit) {
  const std::string req =
      "POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
      "X-Twice: a\r\nx-twice: b\r\n\r\nhello";
  for (size_t step : {1, 2, 7, 1000}) {
    Fed f = feed(req, step);
    ASSERT_EQ(f.reader->stage(), Stage::kComplete) << step;
    EXPECT_EQ(f.consumed, req.size());
    EXPECT_TRUE(f.reader->keep_alive());
    HttpRequest r = f.reader->take();
    EXPECT_EQ(r.method, "POST");
    EXPECT_EQ(r.path, "/v1/chat/completions");
    EXPECT_EQ(r.query, "x=1");
    EXPECT_EQ(r.header("x-twice"), "a, b");
    EXPECT_EQ(r.body, "hello");
  }
}

TEST(HttpReader, StopsAtTheHeadSoTheCallerCanCheckItBeforeTheBody) {
  RequestReader reader(small_limits());
  const std::string req =
      "POST /x HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\nabc";
  const size_t n = reader.feed(req);
  EXPECT_EQ(reader.stage(), Stage::kBody);
  EXPECT_EQ(n, req.size() - 3);  // the body is not touched yet
  EXPECT_TRUE(reader.expects_continue());
  EXPECT_EQ(reader.content_length(), 3u);
  EXPECT_EQ(reader.feed(std::string_view(req).substr(n)), 3u);
  EXPECT_EQ(reader.stage(), Stage::kComplete);
}

TEST(HttpReader, ChunkedBodiesAreDecodedAndLimitedAfterDecoding) {
  for (size_t step : {1, 2, 3, 1000}) {  // a byte at a time too: the last chunk's trailers
    Fed f = feed(
        "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
        "3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: x\r\n\r\n",
        step);
    ASSERT_EQ(f.reader->stage(), Stage::kComplete) << step;
    EXPECT_EQ(f.reader->take().body, "abcde");
  }

  std::string big = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; ++i) big += "64\r\n" + std::string(100, 'z') + "\r\n";  // 2000 > 1000
  Fed over = feed(big, 50);
  EXPECT_EQ(over.reader->stage(), Stage::kFailed);
  EXPECT_EQ(over.reader->refusal().status, 413);
  EXPECT_LE(over.reader->body_size(), 1000u);
}

TEST(HttpReader, AContentLengthOverTheLimitIsRefusedAtTheHead) {
  RequestReader reader(small_limits());
  reader.feed("POST /x HTTP/1.1\r\nContent-Length: 1001\r\n\r\n");
  EXPECT_EQ(reader.stage(), Stage::kFailed);
  EXPECT_EQ(reader.refusal().status, 413);
}

TEST(HttpReader, SmugglingShapesAreRefused) {
  struct Case {
    std::string head;
    int status;
  };
  const std::vector<Case> cases = {
      {"Content-Length: 5\r\nContent-Length: 6\r\n", 400},
      {"Content-Length: 5, 6\r\n", 400},
      {"Content-Length: -1\r\n", 400},
      {"Content-Length: 99999999999999999999999\r\n", 400},
      {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400},
      {"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", 400},
      {"Transfer-Encoding: chunked, gzip\r\n", 501},
      {"Transfer-Encoding: gzip, chunked\r\n", 501},
      {"Transfer-Encoding: identity\r\n", 501},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400},
      {"Content-Encoding: gzip\r\nContent-Length: 5\r\n", 415},
      {"Content-Encoding: br\r\n", 415},
      {"Expect: 200-ok\r\n", 417},
      {"Bad Header: x\r\n", 400},
      {std::string("X: a\0b\r\n", 9), 400},
  };
  for (const Case& c : cases) {
    RequestReader reader(small_limits());
    reader.feed("POST /x HTTP/1.1\r\n" + c.head + "\r\nhello");
    EXPECT_EQ(reader.stage(), Stage::kFailed) << c.head;
    EXPECT_EQ(reader.refusal().status, c.status) << c.head << ": " << reader.refusal().why;
  }
  // The same Content-Length twice says one thing: accepted.
  Fed same = feed("POST /x HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(same.reader->stage(), Stage::kComplete);
  // Obsolete line folding is unfolded (RFC 9112 5.2 allows that or a 400).
  Fed folded = feed("GET /x HTTP/1.1\r\nX: a\r\n b\r\n\r\n");
  ASSERT_EQ(folded.reader->stage(), Stage::kComplete);
  EXPECT_EQ(folded.reader->request().header("x").find('\n'), std::string::npos);
  Fed identity =
      feed("POST /x HTTP/1.1\r\nContent-Encoding: identity\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(identity.reader->stage(), Stage::kComplete);
}

TEST(HttpReader, HeadLimits) {
  // A request line that never ends is refused once it passes the line limit, not buffered.
  RequestReader endless(small_limits());
  const std::string line = "GET /" + std::string(5000, 'a');
  endless.feed(line);
  EXPECT_EQ(endless.stage(), Stage::kFailed);
  EXPECT_EQ(endless.refusal().status, 414);

  RequestReader long_target(small_limits());
  long_target.feed("GET /" + std::string(1100, 'a') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(long_target.refusal().status, 414);

  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 21; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  RequestReader too_many(small_limits());
  too_many.feed(many + "\r\n");
  EXPECT_EQ(too_many.refusal().status, 431);

  RequestReader long_header(small_limits());
  long_header.feed("GET / HTTP/1.1\r\nX: " + std::string(1100, 'v') + "\r\n\r\n");
  EXPECT_EQ(long_header.refusal().status, 431);

  std::string huge_head = "GET / HTTP/1.1\r\n";
  while (huge_head.size() < 5000) huge_head += "X: " + std::string(500, 'v') + "\r\n";
  RequestReader too_big(small_limits());
  too_big.feed(huge_head);  // never ends: refused at the head limit
  EXPECT_EQ(too_big.refusal().status, 431);
}

TEST(HttpReader, VersionsAndTargets) {
  RequestReader v2(small_limits());
  v2.feed("GET / HTTP/2.0\r\n\r\n");
  EXPECT_EQ(v2.stage(), Stage::kFailed);

  Fed v10 = feed("GET /health HTTP/1.0\r\n\r\n");
  ASSERT_EQ(v10.reader->stage(), Stage::kComplete);
  EXPECT_FALSE(v10.reader->http11());
  EXPECT_FALSE(v10.reader->keep_alive());

  Fed absolute = feed("GET http://example.com:8080/v1/models%2Fa?q HTTP/1.1\r\n\r\n");
  ASSERT_EQ(absolute.reader->stage(), Stage::kComplete);
  HttpRequest r = absolute.reader->take();
  EXPECT_EQ(r.path, "/v1/models/a");
  EXPECT_EQ(r.query, "q");

  for (const char* bad :
       {"GET x HTTP/1.1\r\n\r\n", "GET /%zz HTTP/1.1\r\n\r\n", "GET /a%00b HTTP/1.1\r\n\r\n",
        "GET /a% HTTP/1.1\r\n\r\n", "GET * HTTP/1.1\r\n\r\n", "GET ftp://x/ HTTP/1.1\r\n\r\n"}) {
    RequestReader reader(small_limits());
    reader.feed(bad);
    EXPECT_EQ(reader.stage(), Stage::kFailed) << bad;
    EXPECT_EQ(reader.refusal().status, 400) << bad;
  }
}

TEST(HttpReader, PipelinedRequestsAreReadOneAtATime) {
  const std::string two = "POST /a HTTP/1.1\r\nContent-Length: 1\r\n\r\nxGET /b HTTP/1.1\r\n\r\n";
  RequestReader first(small_limits());
  size_t n = first.feed(two);
  n += first.feed(std::string_view(two).substr(n));
  ASSERT_EQ(first.stage(), Stage::kComplete);
  EXPECT_EQ(first.take().body, "x");
  RequestReader second(small_limits());
  n += second.feed(std::string_view(two).substr(n));
  ASSERT_EQ(second.stage(), Stage::kComplete);
  EXPECT_EQ(second.take().path, "/b");
  EXPECT_EQ(n, two.size());
}

TEST(HttpReader, EmptyLinesBeforeARequestAndEndOfInput) {
  Fed f = feed("\r\n\r\nGET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(f.reader->stage(), Stage::kComplete);

  RequestReader cut(small_limits());
  cut.feed("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  cut.feed_eof();
  EXPECT_EQ(cut.stage(), Stage::kFailed);
}

TEST(HttpWire, ResponseHeadAndChunks) {
  HttpResponse r;
  r.status = 503;
  r.headers["Retry-After"] = "1\r\nX-Injected: yes";
  const std::string head = response_head(r, 12, false, true);
  EXPECT_EQ(head.rfind("HTTP/1.1 503 Service Unavailable\r\n", 0), 0u);
  EXPECT_NE(head.find("Content-Length: 12\r\n"), std::string::npos);
  EXPECT_NE(head.find("Connection: keep-alive\r\n"), std::string::npos);
  EXPECT_EQ(head.find("\r\nX-Injected"), std::string::npos);  // CR/LF in a value cannot split it
  EXPECT_EQ(head.substr(head.size() - 4), "\r\n\r\n");
  EXPECT_NE(response_head(r, std::nullopt, true, false).find("Transfer-Encoding: chunked\r\n"),
            std::string::npos);
  EXPECT_EQ(chunk("hello"), "5\r\nhello\r\n");
  EXPECT_EQ(chunk(std::string(26, 'a')).substr(0, 4), "1a\r\n");
  EXPECT_EQ(chunk(""), "");
}

}  // namespace
}  // namespace strata::server
