// A minimal HTTP/1.1 client for the server tests, on plain sockets so that a test controls the
// connection: send any bytes, read a streamed body piece by piece, hang up in the middle.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::test {

struct HttpResult {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;                            // de-chunked
};

class HttpConnection {
 public:
  explicit HttpConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~HttpConnection() { close(); }
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }

  // True when the peer closes the connection within `within` (what it sends first is dropped).
  bool peer_closed(std::chrono::milliseconds within = std::chrono::milliseconds(3000)) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 100};
      if (::poll(&p, 1, 100) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return true;  // an orderly close, or a reset
    }
    return false;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  bool send_all(const std::string& data) {
    size_t sent = 0;
    while (sent < data.size()) {
      const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  // Sends a request with "Connection: close" (so the response ends with the connection).
  bool send_request(const std::string& method, const std::string& path, const std::string& body,
                    const std::map<std::string, std::string>& headers = {}) {
    std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
    for (const auto& [k, v] : headers) r += k + ": " + v + "\r\n";
    if (!body.empty() || method == "POST") {
      r += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
           "\r\n";
    }
    return send_all(r + "\r\n" + body);
  }

  // Reads what has arrived (waiting up to the socket timeout); "" at the end.
  std::string read_some() {
    char buf[65536];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }

  // Reads until `needle` has arrived (raw bytes, chunk framing included) or the connection ends.
  std::string read_until(const std::string& needle) {
    while (raw_.find(needle) == std::string::npos) {
      std::string more = read_some();
      if (more.empty()) break;
      raw_ += more;
    }
    return raw_;
  }

  HttpResult read_response() {
    for (std::string more; !(more = read_some()).empty();) raw_ += more;
    return parse(raw_);
  }

  static HttpResult parse(const std::string& raw) {
    HttpResult r;
    const size_t head_end = raw.find("\r\n\r\n");
    if (raw.size() < 12 || head_end == std::string::npos) return r;
    r.status = std::stoi(raw.substr(9, 3));
    size_t pos = raw.find("\r\n") + 2;
    while (pos < head_end) {
      const size_t eol = raw.find("\r\n", pos);
      const std::string line = raw.substr(pos, eol - pos);
      const size_t colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
      pos = eol + 2;
    }
    std::string body = raw.substr(head_end + 4);
    if (r.headers["transfer-encoding"] == "chunked") {
      std::string out;
      size_t p = 0;
      while (p < body.size()) {
        const size_t eol = body.find("\r\n", p);
        if (eol == std::string::npos) break;
        const size_t len = std::stoul(body.substr(p, eol - p), nullptr, 16);
        if (len == 0) break;
        out += body.substr(eol + 2, len);
        p = eol + 2 + len + 2;
      }
      body = out;
    }
    r.body = body;
    return r;
  }

 private:
  int fd_ = -1;
  std::string raw_;
};

inline HttpResult http_request(int port, const std::string& method, const std::string& path,
                               const std::string& body = {},
                               const std::map<std::string, std::string>& headers = {}) {
  HttpConnection c(port);
  if (!c.connected()) throw std::runtime_error("cannot connect to port " + std::to_string(port));
  c.send_request(method, path, body, headers);
  return c.read_response();
}

// The JSON payloads of an SSE body's "data:" lines, "[DONE]" included as the string itself.
inline std::vector<std::string> sse_data(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    events.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end == std::string::npos ? body.size() : end;
  }
  return events;
}

}  // namespace strata::test
