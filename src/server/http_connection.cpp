// A connection's requests, one after another. Reads wait for readability and then read what has
// arrived into the loop's one buffer, so a connection keeps only the unparsed bytes of its
// request. Each phase has a deadline the server's sweep enforces (deadline(), expire()); a body
// is counted against the server's body-memory budget while it is held.
#include "server/http_connection.h"

// Two GCC 12 coroutine bugs shape this file: a co_await inside a condition (`if (co_await f())`,
// `a && co_await b`) miscompiled (SIGILL), and a temporary with a destructor among a co_await's
// arguments was destroyed twice (a double free). So each co_await stands alone in its statement,
// and its arguments are named objects.

#include <fmt/format.h>
#include <poll.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <condition_variable>
#include <mutex>

#include "core/log.h"
#include "server/http_wire.h"

namespace strata::server {

namespace asio = boost::asio;
using asio::use_awaitable;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kWriteSlice = 256 << 10;     // a write's progress is seen at least this often
constexpr size_t kStreamHighWater = 1 << 20;  // a stream function waits while more is queued
constexpr size_t kDrainLimit = 1 << 20;       // bytes read and dropped after a final answer
constexpr std::chrono::seconds kDrainTime{2};

// The part of the server's body-memory budget one request holds; given back when it goes.
class BodyMemory {
 public:
  explicit BodyMemory(ConnectionHost& host) : host_(host) {}
  ~BodyMemory() { release(); }
  BodyMemory(const BodyMemory&) = delete;
  BodyMemory& operator=(const BodyMemory&) = delete;

  // Holds at least `bytes` in total; false when the budget has no room for them.
  bool hold(size_t bytes) {
    if (bytes <= held_) return true;
    if (!host_.take_body_memory(bytes - held_)) return false;
    held_ = bytes;
    return true;
  }
  void release() {
    if (held_ > 0) host_.give_body_memory(held_);
    held_ = 0;
  }

 private:
  ConnectionHost& host_;
  size_t held_ = 0;
};

}  // namespace

// Whether the client is still there, asked from a worker without touching the socket's state:
// poll() for a peer that closed. The descriptor stays open while any handler of the connection
// runs (the connection closes it only after), so asking is safe then.
class Connection::Probe {
 public:
  explicit Probe(int fd) : fd_(fd) {}
  bool connected() const {
    if (shut_) return false;
    pollfd p{fd_, POLLRDHUP, 0};
    if (::poll(&p, 1, 0) < 0) return true;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) == 0;
  }
  std::atomic<bool> shut_{false};

 private:
  const int fd_;
};

// A streamed body: the stream function (on a worker) queues bytes; the connection (on the loop)
// writes them. The worker waits while more than kStreamHighWater bytes are queued, so a client
// that reads slowly slows its generation instead of growing memory; a failed write ends it.
class Connection::Stream : public BodyWriter, public std::enable_shared_from_this<Stream> {
 public:
  Stream(asio::any_io_executor loop, std::shared_ptr<Probe> probe, bool chunked)
      : timer_(loop), probe_(std::move(probe)), chunked_(chunked) {}

  bool write(std::string_view data) override {
    std::unique_lock lock(mutex_);
    if (broken_) return false;
    if (data.empty()) return true;
    queued_ += chunked_ ? chunk(data) : std::string(data);
    wake_loop();
    room_.wait(lock, [&] { return broken_ || queued_.size() + in_flight_ < kStreamHighWater; });
    return !broken_;
  }

  bool connected() override {
    {
      std::lock_guard lock(mutex_);
      if (broken_) return false;
    }
    return probe_->connected();
  }

  // Worker: the stream function returned (`ok` false: it threw, so the body is cut short).
  void finish(bool ok) {
    std::lock_guard lock(mutex_);
    finished_ = true;
    if (!ok) broken_ = true;
    wake_loop();
  }

  struct Taken {
    std::string bytes;
    bool finished = false;
    bool broken = false;
  };
  // Loop: what is queued now (it is then in flight until written()).
  Taken take() {
    std::lock_guard lock(mutex_);
    Taken t{std::move(queued_), finished_, broken_};
    queued_.clear();
    in_flight_ = t.bytes.size();
    return t;
  }
  void written(bool ok) {
    std::lock_guard lock(mutex_);
    in_flight_ = 0;
    if (!ok) broken_ = true;
    room_.notify_all();
  }
  // Loop: waits for the next write or the end. A wake posted before the wait began is not
  // lost: take() and the wait run in one step of the loop, and the wake is a later step.
  asio::awaitable<void> wait() {
    timer_.expires_at(Clock::time_point::max());
    co_await timer_.async_wait(asio::as_tuple(use_awaitable));
  }

 private:
  void wake_loop() {
    asio::post(timer_.get_executor(), [self = shared_from_this()] { self->timer_.cancel(); });
  }

  asio::steady_timer timer_;
  std::shared_ptr<Probe> probe_;
  const bool chunked_;
  std::mutex mutex_;
  std::condition_variable room_;
  std::string queued_;
  size_t in_flight_ = 0;
  bool finished_ = false;
  bool broken_ = false;
};

Connection::Connection(ConnectionHost& host, tcp::socket socket, std::string address)
    : host_(host),
      socket_(std::move(socket)),
      address_(std::move(address)),
      probe_(std::make_shared<Probe>(socket_.native_handle())) {}

Connection::~Connection() = default;

bool Connection::evictable() const {
  return phase_ == Phase::kIdle || phase_ == Phase::kHead || phase_ == Phase::kDraining;
}

std::optional<Clock::time_point> Connection::deadline() const {
  const ConnectionPolicy& o = host_.policy();
  switch (phase_) {
    case Phase::kIdle:
      return phase_since_ + (first_request_ ? o.head_timeout : o.idle_timeout);
    case Phase::kHead:
      return phase_since_ + o.head_timeout;
    case Phase::kBody:
      return phase_since_ + o.body_timeout;
    case Phase::kHandling:
      return std::nullopt;
    case Phase::kWriting:
    case Phase::kStreaming:
      if (!writing_) return std::nullopt;
      return write_progress_ + o.write_timeout;
    case Phase::kDraining:
      return phase_since_ + kDrainTime;
  }
  return std::nullopt;
}

bool Connection::begin_closing() {
  if (closing_) return false;
  closing_ = true;
  return true;
}

void Connection::expire() {
  expired_ = true;
  if (begin_closing()) host_.retire(*this);
  boost::system::error_code ec;
  socket_.cancel(ec);
}

void Connection::close() {
  closed_ = true;
  if (begin_closing()) host_.retire(*this);
  boost::system::error_code ec;
  socket_.cancel(ec);
}

void Connection::shut() {
  if (probe_->shut_.exchange(true)) return;
  closed_ = true;
  if (begin_closing()) host_.retire(*this);
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_both, ec);
  socket_.cancel(ec);
}

void Connection::enter(Phase phase) {
  phase_ = phase;
  phase_since_ = Clock::now();
}

asio::awaitable<void> Connection::serve() {
  const auto self = shared_from_this();  // alive until this coroutine ends
  try {
    co_await serve_requests();
  } catch (const std::exception& e) {
    log::warn("HTTP connection from {}: {}", address_, e.what());
  }
  if (begin_closing()) host_.retire(*this);
  probe_->shut_ = true;
  boost::system::error_code ec;
  socket_.close(ec);
  host_.forget(*this);
}

asio::awaitable<bool> Connection::read_more() {
  if (closed_ || expired_) co_return false;
  auto [wait_error] =
      co_await socket_.async_wait(tcp::socket::wait_read, asio::as_tuple(use_awaitable));
  if (wait_error || closed_ || expired_) co_return false;
  const std::span<char> buffer = host_.read_buffer();
  boost::system::error_code ec;
  const size_t n = socket_.read_some(asio::buffer(buffer.data(), buffer.size()), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) co_return true;
  if (ec || n == 0) co_return false;
  input_.append(buffer.data(), n);
  co_return true;
}

asio::awaitable<bool> Connection::read_request_bytes(const char* late_what) {
  const bool more = co_await read_more();
  if (more) co_return true;
  if (expired_ && late_what != nullptr) {
    expired_ = false;  // the answer gets its own write deadline
    const HttpRefusal late{408, fmt::format("The request's {} did not arrive in time.", late_what)};
    co_await refuse(late);
  }
  co_return false;
}

asio::awaitable<bool> Connection::write_all(std::string_view data) {
  writing_ = true;
  write_progress_ = Clock::now();
  while (!data.empty() && !expired_) {
    const size_t slice = std::min(data.size(), kWriteSlice);
    auto [ec, n] = co_await socket_.async_write_some(asio::buffer(data.data(), slice),
                                                     asio::as_tuple(use_awaitable));
    if (ec) break;
    data.remove_prefix(n);
    write_progress_ = Clock::now();
  }
  writing_ = false;
  co_return data.empty();
}

asio::awaitable<bool> Connection::answer(const HttpResponse& response, bool keep_alive) {
  enter(Phase::kWriting);
  std::string head = response_head(response, response.body.size(), false, keep_alive);
  if (head_request_) co_return co_await write_all(head);  // HEAD: the length, never the body
  if (response.body.size() <= kWriteSlice) {
    head += response.body;
    co_return co_await write_all(head);
  }
  const bool head_written = co_await write_all(head);
  if (!head_written) co_return false;
  const bool body_written = co_await write_all(response.body);
  co_return body_written;
}

asio::awaitable<void> Connection::refuse_with(const HttpResponse& response) {
  host_.count_rejected();
  const bool answered = co_await answer(response, /*keep_alive=*/false);
  if (answered) co_await drain();
}

asio::awaitable<void> Connection::refuse(const HttpRefusal& refusal) {
  const HttpResponse response = host_.error_response(refusal.status, refusal.why, refusal.path);
  co_await refuse_with(response);
}

// After a last answer: shut our side, then read and drop what the client still sends for a
// moment, so that a client still sending its request gets our answer instead of a reset.
asio::awaitable<void> Connection::drain() {
  boost::system::error_code ec;
  socket_.shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  enter(Phase::kDraining);
  size_t dropped = 0;
  while (dropped < kDrainLimit) {
    input_.clear();
    const bool more = co_await read_more();
    if (!more) break;
    dropped += input_.size();
  }
}

asio::awaitable<bool> Connection::stream_body(HttpResponse& response, bool chunked) {
  auto stream = std::make_shared<Stream>(socket_.get_executor(), probe_, chunked);
  enter(Phase::kStreaming);
  host_.run_on_worker([stream, produce = std::move(response.stream), address = address_] {
    bool ok = true;
    try {
      produce(*stream);
    } catch (const std::exception& e) {
      log::error("a streamed response to {} failed: {}", address, e.what());
      ok = false;
    }
    stream->finish(ok);
  });
  // Write what the worker queues until it returns. Once a write fails the rest is dropped, but
  // the loop still waits for the worker: the descriptor it may probe must stay open till then.
  bool ok = true;
  for (;;) {
    Stream::Taken taken = stream->take();
    if (!taken.bytes.empty()) {
      if (ok) {
        const bool written = co_await write_all(taken.bytes);
        ok = written;
      }
      stream->written(ok);
      continue;
    }
    if (taken.finished) {
      ok = ok && !taken.broken;
      break;
    }
    co_await stream->wait();
  }
  if (!ok || !chunked) co_return ok;
  const bool ended = co_await write_all(kLastChunk);
  co_return ended;
}

asio::awaitable<void> Connection::serve_requests() {
  const ConnectionPolicy& policy = host_.policy();
  for (;;) {
    RequestReader reader(policy.limits);
    enter(Phase::kIdle);
    // The head: request line and headers, within the head deadline from its first byte.
    for (;;) {
      input_.erase(0, reader.feed(input_));
      if (reader.started() && phase_ == Phase::kIdle) enter(Phase::kHead);
      if (reader.stage() != RequestReader::Stage::kHead) break;
      const bool more = co_await read_request_bytes(reader.started() ? "headers" : nullptr);
      if (!more) co_return;
    }
    if (reader.stage() == RequestReader::Stage::kFailed) {
      co_await refuse(reader.refusal());
      co_return;
    }
    first_request_ = false;
    head_request_ = reader.request().method == "HEAD";
    reader.request().client_address = address_;
    if (std::optional<HttpResponse> answer = host_.guard(reader.request())) {
      co_await refuse_with(*answer);  // its body, if any, is never read
      co_return;
    }

    // The body, within the body deadline and the server's body-memory budget.
    BodyMemory memory(host_);
    if (reader.stage() == RequestReader::Stage::kBody) {
      auto busy = [this, &reader] {
        HttpResponse r = host_.error_response(
            503, "The server is receiving too many request bodies at once; retry shortly.",
            reader.request().path);
        r.headers["Retry-After"] = "1";
        return r;
      };
      if (!memory.hold(reader.content_length().value_or(0))) {
        const HttpResponse busy_answer = busy();
        co_await refuse_with(busy_answer);
        co_return;
      }
      if (reader.expects_continue()) {
        const bool continued = co_await write_all(kContinue);
        if (!continued) co_return;
      }
      enter(Phase::kBody);
      for (;;) {
        input_.erase(0, reader.feed(input_));
        if (!memory.hold(reader.body_size())) {  // chunked: held as it grows
          const HttpResponse busy_answer = busy();
          co_await refuse_with(busy_answer);
          co_return;
        }
        if (reader.stage() != RequestReader::Stage::kBody) break;
        const bool more = co_await read_request_bytes("body");
        if (!more) co_return;
      }
      if (reader.stage() == RequestReader::Stage::kFailed) {
        co_await refuse(reader.refusal());
        co_return;
      }
    }

    const bool http11 = reader.http11();
    bool keep_alive = reader.keep_alive();
    HttpRequest request = reader.take();
    request.connected = [probe = probe_] { return probe->connected(); };
    enter(Phase::kHandling);
    HttpResponse response = co_await host_.dispatch(request);
    request = HttpRequest{};  // the body is freed before the answer is written
    memory.release();
    keep_alive = keep_alive && !host_.stopping() && !closed_;
    if (response.stream) {
      enter(Phase::kWriting);
      keep_alive = keep_alive && http11;  // HTTP/1.0: the body ends with the connection
      const std::string head = response_head(response, std::nullopt, http11, keep_alive);
      const bool head_written = co_await write_all(head);
      if (!head_written) co_return;
      const bool streamed = co_await stream_body(response, http11);
      if (!streamed) co_return;
    } else {
      const bool answered = co_await answer(response, keep_alive);
      if (!answered) co_return;
    }
    if (!keep_alive || host_.stopping() || closed_) {
      co_await drain();
      co_return;
    }
  }
}

}  // namespace strata::server
