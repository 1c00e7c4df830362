// Hostile connections held open from a background thread, as an attacker on the loopback port
// would: "slow" ones send a request head one byte at a time and never finish it; "idle" ones
// connect and send nothing. A connection the server closes is opened again (after `reopen_delay`),
// so the flood keeps its size for as long as it runs. Source addresses may be any of
// 127.0.0.0/8, so a test can spread the flood over several client addresses.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace strata::test {

class ConnectionFlood {
 public:
  struct Options {
    int port = 0;
    size_t slow = 0;
    size_t idle = 0;
    std::vector<std::string> sources = {"127.0.0.1"};
    std::chrono::milliseconds byte_interval{1000};  // slow connections: one head byte each
    std::chrono::milliseconds reopen_delay{100};    // after the server closed a connection
  };

  explicit ConnectionFlood(Options options) : options_(std::move(options)) {
    slots_.resize(options_.slow + options_.idle);
    for (size_t i = 0; i < slots_.size(); ++i) {
      slots_[i].slow = i < options_.slow;
      slots_[i].source = options_.sources[i % options_.sources.size()];
    }
    thread_ = std::thread([this] { run(); });
  }
  ~ConnectionFlood() { stop(); }
  ConnectionFlood(const ConnectionFlood&) = delete;
  ConnectionFlood& operator=(const ConnectionFlood&) = delete;

  void stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  size_t connected() const { return connected_; }  // established and open now
  uint64_t reopened() const { return reopened_; }  // closed by the server, opened again
  uint64_t head_bytes() const { return head_bytes_; }

 private:
  using Clock = std::chrono::steady_clock;

  struct Slot {
    bool slow = false;
    std::string source;
    int fd = -1;
    bool established = false;
    size_t sent = 0;
    Clock::time_point next_action{};
  };

  void open(size_t i, int epoll) {
    Slot& s = slots_[i];
    s.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (s.fd < 0) return;
    sockaddr_in src{};
    src.sin_family = AF_INET;
    ::inet_pton(AF_INET, s.source.c_str(), &src.sin_addr);
    ::bind(s.fd, reinterpret_cast<sockaddr*>(&src), sizeof src);
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    dst.sin_port = htons(static_cast<uint16_t>(options_.port));
    dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::connect(s.fd, reinterpret_cast<sockaddr*>(&dst), sizeof dst);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP;
    ev.data.u64 = i;
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, s.fd, &ev);
    s.established = false;
    s.sent = 0;
  }

  void close_slot(size_t i) {
    Slot& s = slots_[i];
    if (s.fd < 0) return;
    if (s.established) --connected_;
    ::close(s.fd);  // also leaves the epoll set
    s.fd = -1;
    s.established = false;
    s.next_action = Clock::now() + options_.reopen_delay;
  }

  void run() {
    const int epoll = ::epoll_create1(0);
    for (size_t i = 0; i < slots_.size(); ++i) open(i, epoll);
    static const std::string head =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(1 << 20, 'a');
    std::vector<epoll_event> events(1024);
    while (!stop_) {
      const int n = ::epoll_wait(epoll, events.data(), static_cast<int>(events.size()), 20);
      for (int e = 0; e < n; ++e) {
        const size_t i = events[e].data.u64;
        Slot& s = slots_[i];
        if (s.fd < 0) continue;
        if (events[e].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP | EPOLLIN)) {
          char buf[4096];
          const ssize_t got = ::recv(s.fd, buf, sizeof buf, MSG_DONTWAIT);
          if (got <= 0 || (events[e].events & (EPOLLERR | EPOLLHUP | EPOLLRDHUP))) {
            close_slot(i);
            ++reopened_;
            continue;
          }
        }
        if ((events[e].events & EPOLLOUT) && !s.established) {
          s.established = true;
          ++connected_;
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLRDHUP;  // writable from now on: stop hearing it
          ev.data.u64 = i;
          ::epoll_ctl(epoll, EPOLL_CTL_MOD, s.fd, &ev);
          s.next_action = Clock::now();
        }
      }
      const auto now = Clock::now();
      for (size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_[i];
        if (s.fd < 0) {
          if (now >= s.next_action) open(i, epoll);
          continue;
        }
        if (!s.slow || !s.established || now < s.next_action) continue;
        if (::send(s.fd, head.data() + (s.sent % head.size()), 1, MSG_NOSIGNAL | MSG_DONTWAIT) ==
            1) {
          ++s.sent;
          ++head_bytes_;
        }
        s.next_action = now + options_.byte_interval;
      }
    }
    for (size_t i = 0; i < slots_.size(); ++i) close_slot(i);
    ::close(epoll);
  }

  Options options_;
  std::vector<Slot> slots_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> connected_{0};
  std::atomic<uint64_t> reopened_{0};
  std::atomic<uint64_t> head_bytes_{0};
  std::thread thread_;
};

}  // namespace strata::test
