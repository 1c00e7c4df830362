// One blob: lock, resume, retry, verify, rename.
#include "hub/download.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>

#include "core/log.h"
#include "core/fd.h"
#include "hub/api.h"

namespace strata::hub {

namespace fs = std::filesystem;

namespace {

// The lock huggingface_hub takes for a blob too (an flock on the same file), held for a scope.
class BlobLock {
 public:
  BlobLock(const fs::path& path, const std::string& file, const std::atomic<bool>* cancel) {
    fs::create_directories(path.parent_path());
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    check(fd_ >= 0, ErrorKind::kIo, "cannot open the lock {}: {}", path.string(),
          std::strerror(errno));
    bool told = false;
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      check(errno == EWOULDBLOCK || errno == EINTR, ErrorKind::kIo, "cannot lock {}: {}",
            path.string(), std::strerror(errno));
      if (!told) log::info("waiting for another download of {} to finish", file);
      told = true;
      if (cancel != nullptr && cancel->load()) {
        ::close(fd_);
        fail(ErrorKind::kIo, "the download of {} was cancelled", file);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~BlobLock() { ::close(fd_); }
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

 private:
  int fd_ = -1;
};

void write_all(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    check(n > 0, ErrorKind::kIo, "cannot write {}: {}", path.string(), std::strerror(errno));
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void truncate_to_zero(int fd, const fs::path& path) {
  check(::ftruncate(fd, 0) == 0 && ::lseek(fd, 0, SEEK_SET) == 0, ErrorKind::kIo,
        "cannot truncate {}: {}", path.string(), std::strerror(errno));
}

bool is_sha256(std::string_view etag) {
  return etag.size() == 64 && etag.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// "bytes START-END/TOTAL" -> START; -1 when it does not parse.
int64_t content_range_start(const std::string& header) {
  if (!header.starts_with("bytes ")) return -1;
  char* end = nullptr;
  const long long start = std::strtoll(header.c_str() + 6, &end, 10);
  return end != nullptr && *end == '-' ? start : -1;
}

// The server sent what does not continue the file (another range, more bytes than the file has):
// start over from the first byte.
struct StartOver {
  std::string why;
};

}  // namespace

std::string sha256_file(const fs::path& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  check(fd.get() >= 0, ErrorKind::kIo, "cannot open {}: {}", path.string(), std::strerror(errno));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  check(ctx && EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr) == 1, ErrorKind::kInternal,
        "OpenSSL could not start a sha256");
  std::vector<char> buffer(1 << 20);
  for (;;) {
    const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    check(n >= 0, ErrorKind::kIo, "cannot read {}: {}", path.string(), std::strerror(errno));
    if (n == 0) break;
    EVP_DigestUpdate(ctx.get(), buffer.data(), static_cast<size_t>(n));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

uint64_t download_blob(HttpClient& client, const HubOptions& options, const BlobDownload& d,
                       const std::function<void(int64_t)>& on_bytes,
                       const std::atomic<bool>* cancel) {
  std::error_code ec;
  if (fs::exists(d.blob, ec)) return 0;
  fs::create_directories(d.blob.parent_path());
  const BlobLock lock(d.lock, d.file, cancel);
  if (fs::exists(d.blob, ec)) return 0;  // another writer finished it while we waited

  Fd fd(::open(d.incomplete.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  check(fd.get() >= 0, ErrorKind::kIo, "cannot open {}: {}", d.incomplete.string(),
        std::strerror(errno));
  const off_t end = ::lseek(fd.get(), 0, SEEK_END);
  check(end >= 0, ErrorKind::kIo, "cannot seek {}: {}", d.incomplete.string(),
        std::strerror(errno));
  uint64_t have = static_cast<uint64_t>(end);
  if (have > d.size) {  // not a prefix of this file: start over
    truncate_to_zero(fd.get(), d.incomplete);
    have = 0;
  }
  if (have > 0) {
    log::info("resuming {} at byte {} of {}", d.file, have, d.size);
    on_bytes(static_cast<int64_t>(have));
  }

  uint64_t downloaded = 0;
  int failures = 0;  // in a row, without a byte received
  while (have < d.size) {
    HttpRequest request;
    request.url = d.url;
    request.headers = hub_headers(options, d.url);
    if (have > 0) request.headers.push_back(fmt::format("Range: bytes={}-", have));
    const uint64_t asked_from = have;
    bool started = false;
    uint64_t got = 0;
    request.sink = [&](std::string_view chunk, const HttpResponse& response) {
      if (!started) {
        started = true;
        if (response.status == 200 && have > 0) {  // the server ignored the Range: all of it
          truncate_to_zero(fd.get(), d.incomplete);
          on_bytes(-static_cast<int64_t>(have));
          have = 0;
        } else if (response.status == 206 &&
                   content_range_start(response.header("content-range")) !=
                       static_cast<int64_t>(asked_from)) {
          throw StartOver{"a range starting elsewhere: " + response.header("content-range")};
        }
      }
      if (have + chunk.size() > d.size)
        throw StartOver{fmt::format("more than the {} bytes the hub announced", d.size)};
      write_all(fd.get(), chunk, d.incomplete);
      have += chunk.size();
      got += chunk.size();
      on_bytes(static_cast<int64_t>(chunk.size()));
      return true;
    };

    HttpResponse response;
    std::string problem;
    const HttpResponse* retry_after = nullptr;
    try {
      response = client.perform(request, cancel);
      downloaded += got;
      if (response.status == 200 || response.status == 206) {
        if (have == d.size) break;
        problem = fmt::format("the answer ended at byte {} of {}", have, d.size);
      } else if (response.status == 416) {  // what we hold is no prefix the server knows
        truncate_to_zero(fd.get(), d.incomplete);
        on_bytes(-static_cast<int64_t>(have));
        have = 0;
        problem = "HTTP 416 to a Range request";
      } else if (retryable_status(response.status)) {
        problem = fmt::format("HTTP {} {}", response.status, response.reason);
        retry_after = &response;
      } else {
        fail(response.status == 404 ? ErrorKind::kNotFound : ErrorKind::kIo,
             "downloading {} from {} failed: HTTP {} {}", d.file, d.url, response.status,
             response.reason);
      }
    } catch (const TransportError& e) {
      downloaded += got;
      if (cancel != nullptr && cancel->load()) throw;
      problem = e.what();
    } catch (const StartOver& s) {
      downloaded += got;
      truncate_to_zero(fd.get(), d.incomplete);
      on_bytes(-static_cast<int64_t>(have));
      have = 0;
      problem = "the server sent " + s.why;
    }
    failures = got > 0 ? 1 : failures + 1;
    check(failures <= options.max_retries, ErrorKind::kIo,
          "downloading {} failed after {} tries: {}; the {} bytes received so far stay in {}, and "
          "the next pull resumes from there",
          d.file, failures, problem, have, d.incomplete.string());
    const double wait = backoff_seconds(options, failures, retry_after);
    log::warn("downloading {}: {}; resuming at byte {} in {:.1f} s", d.file, problem, have, wait);
    sleep_for(wait, cancel);
    check(cancel == nullptr || !cancel->load(), ErrorKind::kIo, "the download of {} was cancelled",
          d.file);
  }

  check(::fsync(fd.get()) == 0, ErrorKind::kIo, "cannot write {}: {}", d.incomplete.string(),
        std::strerror(errno));
  ::close(fd.release());
  const uint64_t size = fs::file_size(d.incomplete);
  std::string mismatch;
  if (size != d.size) {
    mismatch = fmt::format("{} bytes where the hub announced {}", size, d.size);
  } else if (is_sha256(d.etag)) {  // an LFS file: its etag is its sha256
    if (const std::string sum = sha256_file(d.incomplete); sum != d.etag)
      mismatch = fmt::format("sha256 {} where the hub gave {}", sum, d.etag);
  }
  if (!mismatch.empty()) {
    fs::remove(d.incomplete, ec);
    fail(ErrorKind::kIo,
         "checksum mismatch: {} downloaded from {} has {}; the download was refused and removed",
         d.file, d.url, mismatch);
  }
  fs::rename(d.incomplete, d.blob, ec);
  check(!ec, ErrorKind::kIo, "cannot rename {} to {}: {}", d.incomplete.string(), d.blob.string(),
        ec.message());
  return downloaded;
}

}  // namespace strata::hub
