// A `strata serve` child process on a free loopback port, for tests that need the real binary:
// its resident memory, how it answers signals, how long it takes to exit. With no --model it
// serves the built-in strata-demo.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace strata::test {

class ServeProcess {
 public:
  explicit ServeProcess(std::vector<std::string> extra_args = {}) {
    std::vector<std::string> args = {std::string(STRATA_BINARY_DIR) + "/strata", "serve", "--port",
                                     "0"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    ::setenv("OMP_NUM_THREADS", "1", 1);
    const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
    err_fd_ = fds[0];
    reader_ = std::thread([this] { read_log(); });
    // "strata: serving 'NAME' (...) on http://HOST:PORT"
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (port_ == 0 && std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mutex_);
        const size_t at = log_.find(" on http://");
        const size_t eol = at == std::string::npos ? at : log_.find('\n', at);
        if (eol != std::string::npos) port_ = std::stoi(log_.substr(log_.rfind(':', eol) + 1));
      }
      if (exited()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (port_ == 0) throw std::runtime_error("strata serve did not start: " + log());
  }

  ~ServeProcess() {
    if (!status_) {
      ::kill(pid_, SIGKILL);
      wait(std::chrono::seconds(10));
    }
    if (reader_.joinable()) reader_.join();
    ::close(err_fd_);
  }

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }

  // VmRSS from /proc, in bytes.
  uint64_t resident_bytes() const {
    std::ifstream status("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
    return 0;
  }

  // Waits up to `timeout` for the process to end; its wait status, or nullopt while it runs.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!status_) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = st;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status_;
  }

  std::string log() const {
    std::lock_guard lock(mutex_);
    return log_;
  }

 private:
  bool exited() { return wait(std::chrono::milliseconds(0)).has_value(); }

  void read_log() {
    char buf[4096];
    for (ssize_t n; (n = ::read(err_fd_, buf, sizeof buf)) > 0;) {
      std::lock_guard lock(mutex_);
      if (log_.size() < (1 << 20)) log_.append(buf, static_cast<size_t>(n));
    }
  }

  pid_t pid_ = 0;
  int err_fd_ = -1;
  int port_ = 0;
  std::optional<int> status_;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::string log_;
};

}  // namespace strata::test
