// The mock hub: plain sockets, a thread per connection, one request per connection.
#include "mock_hub.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "test_util.h"

namespace strata::test {

namespace {

using Json = nlohmann::json;

std::string digest_hex(const EVP_MD* md, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, md, nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) {
    hex += kHex[out[i] >> 4];
    hex += kHex[out[i] & 15];
  }
  return hex;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Json fixture() { return Json::parse(read_all(test_fixture("hub/fake_hub.json"))); }

std::string url_decode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> parts;
  size_t start = 1;  // after the leading '/'
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    parts.push_back(url_decode(path.substr(start, end - start)));
    start = end + 1;
  }
  return parts;
}

struct Request {
  std::string method;
  std::string target;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string header(const std::string& name) const {
    const auto it = headers.find(name);
    return it == headers.end() ? "" : it->second;
  }
};

bool read_request(int fd, Request& request) {
  std::string data;
  char buffer[4096];
  while (data.find("\r\n\r\n") == std::string::npos) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0 || data.size() > (64 << 10)) return false;
    data.append(buffer, static_cast<size_t>(n));
  }
  std::istringstream lines(data.substr(0, data.find("\r\n\r\n")));
  std::string line;
  std::getline(lines, line);
  std::istringstream first(line);
  first >> request.method >> request.target;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    std::ranges::transform(name, name.begin(), [](unsigned char c) { return std::tolower(c); });
    const size_t value = line.find_first_not_of(' ', colon + 1);
    request.headers[name] = value == std::string::npos ? "" : line.substr(value);
  }
  return !request.method.empty();
}

void send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 206:
      return "Partial Content";
    case 302:
      return "Found";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 416:
      return "Range Not Satisfiable";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

struct Reply {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  size_t drop_at = std::string::npos;  // the body stops here and the connection closes
};

Reply error_reply(int status, const std::string& code, const std::string& message) {
  Reply r;
  r.status = status;
  if (!code.empty()) r.headers.emplace_back("X-Error-Code", code);
  r.headers.emplace_back("X-Error-Message", message);
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = Json{{"error", message}}.dump();
  return r;
}

void send_reply(int fd, const Reply& r, bool head) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\n", r.status, reason(r.status));
  for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
  out += fmt::format("Content-Length: {}\r\nConnection: close\r\n\r\n", r.body.size());
  send_all(fd, out);
  if (head) return;
  send_all(fd, std::string_view(r.body).substr(0, r.drop_at));
}

std::string lfs_pointer(const FakeFile& f) {
  return fmt::format("version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize {}\n",
                     sha256_hex(f.content), f.content.size());
}

}  // namespace

const FakeFile* FakeRepo::find(const std::string& path) const {
  for (const FakeFile& f : files)
    if (f.path == path) return &f;
  return nullptr;
}

std::vector<FakeRepo> fixture_repos() {
  std::vector<FakeRepo> repos;
  const Json all = fixture();
  for (const Json& r : all["repos"]) {
    FakeRepo repo{r["id"].get<std::string>(),
                  r["commit"].get<std::string>(),
                  r["revisions"].get<std::vector<std::string>>(),
                  {}};
    for (const Json& f : r["files"])
      repo.files.push_back(
          {f["path"].get<std::string>(), f["content"].get<std::string>(), f.value("lfs", false)});
    repos.push_back(std::move(repo));
  }
  return repos;
}

std::vector<FakePull> fixture_pulls() {
  std::vector<FakePull> pulls;
  const Json all = fixture();
  for (const Json& p : all["pulls"])
    pulls.push_back({p["ref"].get<std::string>(), p["repo"].get<std::string>(),
                     p["revision"].get<std::string>(), p["files"].get<std::vector<std::string>>()});
  return pulls;
}

FakeRepo repo_from_dir(const std::string& id, const std::string& commit, const std::string& dir) {
  FakeRepo repo{id, commit, {"main"}, {}};
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    repo.files.push_back({name, read_all(entry.path().string()),
                          name.ends_with(".safetensors") || name == "tokenizer.json"});
  }
  std::ranges::sort(repo.files, {}, &FakeFile::path);
  return repo;
}

std::string sha256_hex(const std::string& data) { return digest_hex(EVP_sha256(), data); }

std::string git_blob_id(const std::string& data) {
  return digest_hex(EVP_sha1(),
                    "blob " + std::to_string(data.size()) + std::string(1, '\0') + data);
}

MockHub::MockHub(std::vector<FakeRepo> repos) : repos_(std::move(repos)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("mock hub: no socket");
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("mock hub: cannot listen on 127.0.0.1");
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { serve(); });
}

MockHub::~MockHub() {
  stop_ = true;
  acceptor_.join();
  ::close(listen_fd_);
  std::vector<std::thread> connections;
  {
    const std::lock_guard lock(mutex_);
    connections.swap(connections_);
  }
  for (std::thread& t : connections) t.join();
}

std::string MockHub::endpoint() const { return fmt::format("http://127.0.0.1:{}", port_); }

void MockHub::gate(const std::string& repo, const std::string& token) {
  const std::lock_guard lock(mutex_);
  gates_[repo] = token;
}

void MockHub::fail_next(const std::string& needle, int status, int times,
                        const std::string& retry_after) {
  const std::lock_guard lock(mutex_);
  failures_.push_back({needle, status, times, retry_after});
}

void MockHub::drop_after(const std::string& path, size_t bytes) {
  const std::lock_guard lock(mutex_);
  drops_[path] = bytes;
}

void MockHub::corrupt(const std::string& path) {
  const std::lock_guard lock(mutex_);
  corrupt_.push_back(path);
}

std::vector<RecordedRequest> MockHub::requests() const {
  const std::lock_guard lock(mutex_);
  return requests_;
}

void MockHub::clear_requests() {
  const std::lock_guard lock(mutex_);
  requests_.clear();
}

std::vector<RecordedRequest> MockHub::requests(const std::string& method,
                                               const std::string& needle) const {
  std::vector<RecordedRequest> out;
  for (const RecordedRequest& r : requests())
    if (r.method == method && r.target.find(needle) != std::string::npos) out.push_back(r);
  return out;
}

void MockHub::serve() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    timeval timeout{5, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    const std::lock_guard lock(mutex_);
    connections_.emplace_back([this, fd] {
      handle(fd);
      ::close(fd);
    });
  }
}

void MockHub::handle(int fd) {
  Request req;
  if (!read_request(fd, req)) return;
  const bool head = req.method == "HEAD";
  const std::string path = req.target.substr(0, req.target.find('?'));
  std::unique_lock lock(mutex_);
  requests_.push_back({req.method, req.target, req.header("range"), req.header("authorization")});
  for (Failure& f : failures_) {
    if (f.times > 0 && req.target.find(f.needle) != std::string::npos) {
      --f.times;
      Reply r = error_reply(f.status, "", "the mock hub fails this request on purpose");
      if (!f.retry_after.empty()) r.headers.emplace_back("Retry-After", f.retry_after);
      lock.unlock();
      return send_reply(fd, r, head);
    }
  }

  // The bytes of `file`, whole or the Range asked for, as the hub or its CDN sends them.
  auto body = [&](const FakeFile& file, std::vector<std::pair<std::string, std::string>> headers) {
    Reply r;
    r.headers = std::move(headers);
    r.headers.emplace_back("Accept-Ranges", "bytes");
    std::string content = file.content;
    if (std::ranges::find(corrupt_, file.path) != corrupt_.end() && !content.empty())
      content[0] = static_cast<char>(content[0] ^ 0x20);
    const std::string range = req.header("range");
    if (range.starts_with("bytes=")) {
      const size_t dash = range.find('-');
      const size_t first = std::stoul(range.substr(6, dash - 6));
      size_t last = content.size() - 1;
      if (dash + 1 < range.size()) last = std::min(last, std::stoul(range.substr(dash + 1)));
      if (first >= content.size()) {
        Reply bad = error_reply(416, "", "range not satisfiable");
        bad.headers.emplace_back("Content-Range", fmt::format("bytes */{}", content.size()));
        return bad;
      }
      r.status = 206;
      r.headers.emplace_back("Content-Range",
                             fmt::format("bytes {}-{}/{}", first, last, content.size()));
      r.body = content.substr(first, last - first + 1);
    } else {
      r.body = content;
    }
    if (!head) {
      if (const auto drop = drops_.find(file.path); drop != drops_.end()) {
        r.drop_at = drop->second;
        drops_.erase(drop);
      }
    }
    return r;
  };

  const std::vector<std::string> parts = split_path(path);
  Reply reply = error_reply(404, "", "no such route on the mock hub");
  if (parts.size() == 2 && parts[0] == "lfs-blobs") {
    for (const FakeRepo& repo : repos_)
      for (const FakeFile& f : repo.files)
        if (f.lfs && sha256_hex(f.content) == parts[1])
          reply = body(f, {{"ETag", "\"" + parts[1] + "\""}});
  } else if (parts.size() >= 4) {
    const bool api = parts[0] == "api" && parts[1] == "models";
    const std::string id = api ? parts[2] + "/" + parts[3] : parts[0] + "/" + parts[1];
    const auto repo = std::ranges::find(repos_, id, &FakeRepo::id);
    const size_t verb = api ? 4 : 2;
    if (repo == repos_.end()) {
      reply = error_reply(404, "RepoNotFound", "Repository not found");
    } else if (parts.size() > verb + 1) {
      const std::string& revision = parts[verb + 1];
      const bool known = revision == repo->commit ||
                         std::ranges::find(repo->revisions, revision) != repo->revisions.end();
      const auto gate = gates_.find(id);
      if (!api && parts[verb] == "resolve" && gate != gates_.end() &&
          req.header("authorization") != "Bearer " + gate->second) {
        reply = req.header("authorization").empty()
                    ? error_reply(401, "GatedRepo",
                                  "Access to model " + id +
                                      " is restricted. You must have access "
                                      "to it and be authenticated to access it. Please log in.")
                    : error_reply(403, "GatedRepo", "Access to model " + id + " is restricted");
      } else if (!known) {
        reply = error_reply(404, "RevisionNotFound", "Invalid rev id: " + revision);
      } else if (api && parts[verb] == "revision" && parts.size() == verb + 2) {
        Json siblings = Json::array();
        for (const FakeFile& f : repo->files) siblings.push_back({{"rfilename", f.path}});
        reply = Reply{};
        reply.headers.emplace_back("Content-Type", "application/json");
        reply.body = Json{
            {"id", id},
            {"modelId", id},
            {"sha", repo->commit},
            {"private", false},
            {"gated", gate != gates_.end() ? Json("manual") : Json(false)},
            {"siblings",
             siblings}}.dump();
      } else if (!api && parts[verb] == "resolve" && parts.size() > verb + 2) {
        std::string file_path = parts[verb + 2];
        for (size_t i = verb + 3; i < parts.size(); ++i) file_path += "/" + parts[i];
        const FakeFile* f = repo->find(file_path);
        if (f == nullptr) {
          reply = error_reply(404, "EntryNotFound", "Entry not found");
          reply.headers.emplace_back("X-Repo-Commit", repo->commit);
        } else if (f->lfs) {
          const std::string sha = sha256_hex(f->content);
          reply = Reply{};
          reply.status = 302;
          reply.headers = {{"Location", endpoint() + "/lfs-blobs/" + sha},
                           {"X-Repo-Commit", repo->commit},
                           {"X-Linked-Etag", "\"" + sha + "\""},
                           {"X-Linked-Size", std::to_string(f->content.size())},
                           {"ETag", "\"" + git_blob_id(lfs_pointer(*f)) + "\""}};
          reply.body = "Found. Redirecting to " + endpoint() + "/lfs-blobs/" + sha;
        } else {
          reply = body(*f, {{"X-Repo-Commit", repo->commit},
                            {"ETag", "\"" + git_blob_id(f->content) + "\""}});
        }
      }
    }
  }
  lock.unlock();
  send_reply(fd, reply, head);
}

}  // namespace strata::test
