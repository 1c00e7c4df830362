// StateStore: atomic state files, the index from their headers, and the two I/O threads.
#include "runtime/state_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/fd.h"
#include "runtime/state_compression.h"
#include "core/log.h"

namespace strata::runtime {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kSuffix = ".state";
constexpr std::string_view kTemporary = ".tmp";
constexpr size_t kWriteBuffer = size_t{1} << 20;

[[noreturn]] void io_error(const std::string& what, const fs::path& p) {
  throw Error(ErrorKind::kIo, fmt::format("{} {}: {}", what, p.string(), std::strerror(errno)));
}

void write_all(int fd, const uint8_t* p, size_t n, const fs::path& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      io_error("cannot write", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void pwrite_all(int fd, const uint8_t* p, size_t n, uint64_t offset, const fs::path& path) {
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      io_error("cannot write", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
}

// The compressed form's reader when fd's file is one (runtime/state_compression.h), else null.
std::unique_ptr<CompressedStateReader> open_compressed(int fd, uint64_t file_bytes, bool ahead) {
  char magic[sizeof(kCompressedStateMagic)] = {};
  if (file_bytes < sizeof(magic) || ::pread(fd, magic, sizeof(magic), 0) != static_cast<ssize_t>(sizeof(magic)) ||
      std::memcmp(magic, kCompressedStateMagic, sizeof(magic)) != 0)
    return nullptr;
  return std::make_unique<CompressedStateReader>(fd, file_bytes, ahead);
}

// Fills exactly n bytes from fd; a file that ends first is truncated.
void read_all(int fd, uint8_t* p, size_t n, const fs::path& path) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      io_error("cannot read", path);
    }
    check(r > 0, ErrorKind::kInvalidInput, "the file is truncated");
    p += r;
    n -= static_cast<size_t>(r);
  }
}

// Fills the pieces in order from fd, a few at a time per call (larger reads run faster).
void read_pieces(int fd, std::span<const std::span<uint8_t>> pieces, const fs::path& path) {
  std::vector<iovec> io;
  for (const std::span<uint8_t> piece : pieces)
    if (!piece.empty()) io.push_back({piece.data(), piece.size()});
  size_t first = 0;
  while (first < io.size()) {
    const int count = static_cast<int>(std::min<size_t>(io.size() - first, 64));
    const ssize_t r = ::readv(fd, io.data() + first, count);
    if (r < 0) {
      if (errno == EINTR) continue;
      io_error("cannot read", path);
    }
    check(r > 0, ErrorKind::kInvalidInput, "the file is truncated");
    auto left = static_cast<size_t>(r);
    while (left > 0 && left >= io[first].iov_len) left -= io[first++].iov_len;  // whole pieces done
    if (left > 0) {  // part of one
      io[first].iov_base = static_cast<uint8_t*>(io[first].iov_base) + left;
      io[first].iov_len -= left;
    }
  }
}

bool parse_key(const std::string& name, uint64_t* key) {
  if (name.size() != 16 + kSuffix.size() || !name.ends_with(kSuffix)) return false;
  uint64_t k = 0;
  for (size_t i = 0; i < 16; ++i) {
    const char c = name[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return false;
    k = k << 4 | static_cast<uint64_t>(d);
  }
  *key = k;
  return true;
}

// Removes a file the index does not keep. One that cannot be removed is logged and left (the
// next start meets it again); it must not fail the listing of the others.
void remove_file(const fs::path& p) {
  std::error_code ec;
  if (!fs::remove(p, ec) && ec)
    log::warn("state cache: cannot remove {}: {}", p.string(), ec.message());
}

void sync_directory(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) io_error("cannot sync the directory", dir);
}

}  // namespace

fs::path state_directory(const fs::path& root, const std::string& fingerprint, std::string_view device,
                         int64_t chunk, const model::ModelState& layout) {
  std::string id = fmt::format("{}|{}|chunk {}", fingerprint, device, chunk);
  for (const StateSection& s : state_sections(layout, 0)) {
    id += fmt::format("|{} {} {}", s.name, dtype_name(s.dtype), s.token_indexed ? "rows" : "whole");
    for (int d = s.token_indexed ? 1 : 0; d < s.shape.rank(); ++d) id += fmt::format(" {}", s.shape[d]);
  }
  return root / fmt::format("{:016x}", hash64(id));
}

StateStore::StateStore(fs::path dir, std::string fingerprint, const model::ModelState& layout, int64_t max_tokens,
                       std::shared_ptr<HostPages> pages, bool compress)
    : dir_(std::move(dir)),
      fingerprint_(std::move(fingerprint)),
      max_tokens_(max_tokens),
      pages_(std::move(pages)),
      compress_(compress) {
  layout_ = state_sections(layout, 0);
  for (const StateSection& s : state_sections(layout, 1)) row_bytes_.push_back(s.token_indexed ? s.bytes : 0);
  std::error_code ec;
  fs::create_directories(dir_, ec);
  check(!ec, ErrorKind::kIo, "cannot create the state directory {}: {}", dir_.string(), ec.message());
  index();
  writes_.thread = std::thread([this] { run(writes_); });
  reads_.thread = std::thread([this] { run(reads_); });
}

StateStore::~StateStore() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    reads_.jobs.clear();  // nobody waits for them any more; writes still land
  }
  work_.notify_all();
  writes_.thread.join();
  reads_.thread.join();
}

std::vector<StateSection> StateStore::sections(int64_t n_tokens) const {
  std::vector<StateSection> out = layout_;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].token_indexed) out[i].bytes = row_bytes_[i] * static_cast<uint64_t>(n_tokens);
  return out;
}

uint64_t StateStore::file_bytes(int64_t n_tokens) const {
  return state_format_bytes(fingerprint_, sections(n_tokens), n_tokens);
}

fs::path StateStore::path(uint64_t key) const { return dir_ / fmt::format("{:016x}{}", key, kSuffix); }

void StateStore::index() {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_, ec)) {
    std::string name = entry.path().filename().string();
    const bool temporary = name.ends_with(kTemporary);
    if (temporary) name.resize(name.size() - kTemporary.size());
    uint64_t key = 0;
    if (!parse_key(name, &key)) continue;  // not one of ours
    if (temporary) {
      log::warn("state cache: removing {}: a write that never finished", entry.path().string());
      remove_file(entry.path());
      continue;
    }
    try {
      Fd fd(::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC));
      if (fd.get() < 0) io_error("cannot open", entry.path());
      const uint64_t size = fs::file_size(entry.path());
      const std::unique_ptr<CompressedStateReader> z = open_compressed(fd.get(), size, /*ahead=*/false);
      StateReader r([&](uint8_t* dst, size_t n) {
        if (z != nullptr) {
          z->read(dst, n);
        } else {
          read_all(fd.get(), dst, n, entry.path());
        }
      });
      StateHeader h = r.header(max_tokens_);
      check(h.fingerprint == fingerprint_, ErrorKind::kInvalidInput, "it was saved by another model ({})",
            h.fingerprint);
      const uint64_t stream = z != nullptr ? z->raw_bytes() : size;
      const uint64_t want = file_bytes(static_cast<int64_t>(h.tokens.size()));
      check(stream == want, ErrorKind::kInvalidInput, "it holds {} bytes; its header says {}", stream, want);
      index_.push_back({key, std::move(h.tokens), size, fs::last_write_time(entry.path())});
    } catch (const std::exception& e) {
      log::warn("state cache: removing {}: {}", entry.path().string(), e.what());
      remove_file(entry.path());
    }
  }
  check(!ec, ErrorKind::kIo, "cannot list the state directory {}: {}", dir_.string(), ec.message());
  std::sort(index_.begin(), index_.end(),
            [](const StoredState& a, const StoredState& b) { return a.modified < b.modified; });
}

void StateStore::write_now(uint64_t key, const StateBytes& state) const {
  const auto n = static_cast<int64_t>(state.tokens.size());
  const std::vector<StateSection> list = sections(n);
  uint64_t kv = 0, recurrent = 0;
  for (const StateSection& s : list) (s.token_indexed ? kv : recurrent) += s.bytes;
  check(kv == state.kv.size() && recurrent == state.recurrent.size(), ErrorKind::kInternal,
        "a state of {} tokens with {} + {} bytes; its layout takes {} + {}", n, state.kv.size(),
        state.recurrent.size(), kv, recurrent);
  const fs::path final_path = path(key);
  const fs::path temporary = fs::path(final_path).concat(kTemporary);
  Fd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) io_error("cannot create", temporary);
  try {
    std::vector<uint8_t> buffer;
    buffer.reserve(kWriteBuffer);
    auto drain = [&] {
      write_all(fd.get(), buffer.data(), buffer.size(), temporary);
      buffer.clear();
    };
    std::unique_ptr<CompressedStateWriter> z;
    if (compress_)
      z = std::make_unique<CompressedStateWriter>(
          file_bytes(n), [&](const uint8_t* p, size_t size) { write_all(fd.get(), p, size, temporary); },
          [&](uint64_t offset, const uint8_t* p, size_t size) { pwrite_all(fd.get(), p, size, offset, temporary); });
    StateWriter w([&](const uint8_t* p, size_t size) {
      if (z != nullptr) {
        z->push(p, size);
        return;
      }
      if (buffer.size() + size > kWriteBuffer) drain();
      if (size >= kWriteBuffer) {
        write_all(fd.get(), p, size, temporary);
      } else {
        buffer.insert(buffer.end(), p, p + size);
      }
    });
    w.begin(fingerprint_, state.tokens, list.size());
    size_t kv_at = 0, recurrent_at = 0;
    for (const StateSection& s : list) {
      w.section(s);
      size_t& at = s.token_indexed ? kv_at : recurrent_at;
      (s.token_indexed ? state.kv : state.recurrent).pieces(at, s.bytes, [&](const uint8_t* p, size_t n) { w.data(p, n); });
      at += s.bytes;
    }
    w.finish();
    if (z != nullptr) z->finish();
    drain();
    if (::fsync(fd.get()) != 0) io_error("cannot sync", temporary);
    if (::close(fd.release()) != 0) io_error("cannot close", temporary);
    if (::rename(temporary.c_str(), final_path.c_str()) != 0) io_error("cannot rename", temporary);
  } catch (...) {
    std::error_code ec;
    fs::remove(temporary, ec);
    throw;
  }
  sync_directory(dir_);
}

std::shared_ptr<StateBytes> StateStore::read_now(uint64_t key, const std::vector<int32_t>& tokens) const {
  const fs::path p = path(key);
  Fd fd(::open(p.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) io_error("cannot open", p);
  (void)::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);  // a larger read-ahead
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) io_error("cannot stat", p);
  auto out = std::make_shared<StateBytes>();  // (outlives the reader, whose hashing thread reads it)
  // A compressed file streams in on a thread while others decompress it.
  const std::unique_ptr<CompressedStateReader> z =
      open_compressed(fd.get(), static_cast<uint64_t>(st.st_size), /*ahead=*/true);
  StateReader r([&](uint8_t* dst, size_t n) {
    if (z != nullptr) {
      z->read(dst, n);
    } else {
      read_all(fd.get(), dst, n, p);
    }
  });
  r.hash_behind();  // the checksum overlaps the disk
  if (z == nullptr)
    r.gather_with([&](std::span<const std::span<uint8_t>> pieces) { read_pieces(fd.get(), pieces, p); });
  StateHeader h = r.header(max_tokens_);
  check(h.fingerprint == fingerprint_, ErrorKind::kInvalidInput, "it was saved by another model ({})",
        h.fingerprint);
  check(h.tokens == tokens, ErrorKind::kInvalidInput, "it holds another prefix than its name says");
  const auto n = static_cast<int64_t>(tokens.size());
  const uint64_t stream = z != nullptr ? z->raw_bytes() : static_cast<uint64_t>(st.st_size);
  check(stream == file_bytes(n), ErrorKind::kInvalidInput, "it holds {} bytes; its header says {}", stream,
        file_bytes(n));
  const std::vector<StateSection> list = sections(n);
  out->tokens = std::move(h.tokens);
  std::vector<uint64_t> offsets;
  uint64_t kv = 0, recurrent = 0;
  for (const StateSection& s : list) {
    uint64_t& at = s.token_indexed ? kv : recurrent;
    offsets.push_back(at);
    at += s.bytes;
  }
  out->kv = pages_->take(kv);
  out->recurrent = pages_->take(recurrent);
  r.sections(list, [&](size_t i) {
    std::vector<std::span<uint8_t>> pieces;
    (list[i].token_indexed ? out->kv : out->recurrent).pieces(offsets[i], list[i].bytes, [&](uint8_t* p, size_t n) {
      pieces.emplace_back(p, n);
    });
    return pieces;
  });
  r.finish();
  return out;
}

void StateStore::write(uint64_t key, std::shared_ptr<const StateBytes> state) {
  {
    std::lock_guard lock(mutex_);
    writes_.jobs.push_back({Job::Kind::kWrite, key, std::move(state), {}});
  }
  work_.notify_all();
}

void StateStore::read(uint64_t key, std::vector<int32_t> tokens) {
  {
    std::lock_guard lock(mutex_);
    reads_.jobs.push_back({Job::Kind::kRead, key, nullptr, std::move(tokens)});
  }
  work_.notify_all();
}

void StateStore::remove(uint64_t key) {
  {
    std::lock_guard lock(mutex_);
    writes_.jobs.push_back({Job::Kind::kRemove, key, nullptr, {}});
  }
  work_.notify_all();
}

void StateStore::touch(uint64_t key) {
  {
    std::lock_guard lock(mutex_);
    writes_.jobs.push_back({Job::Kind::kTouch, key, nullptr, {}});
  }
  work_.notify_all();
}

std::vector<StateStore::Done> StateStore::poll() {
  std::lock_guard lock(mutex_);
  return std::exchange(done_, {});
}

bool StateStore::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [&] { return !done_.empty(); });
}

void StateStore::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return writes_.jobs.empty() && !writes_.busy; });
}

void StateStore::run(Lane& lane) {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !lane.jobs.empty(); });
    if (lane.jobs.empty()) return;  // stopping, and nothing left
    Job job = std::move(lane.jobs.front());
    lane.jobs.pop_front();
    lane.busy = true;
    lock.unlock();
    const auto started = Clock::now();
    std::optional<Done> done;
    std::error_code ec;
    switch (job.kind) {
      case Job::Kind::kWrite:
        done.emplace(Done{Done::Kind::kWrite, job.key, {}, nullptr, 0, file_bytes(static_cast<int64_t>(job.state->tokens.size()))});
        try {
          write_now(job.key, *job.state);
        } catch (const std::exception& e) {
          done->error = e.what();
        }
        break;
      case Job::Kind::kRead:
        done.emplace(Done{Done::Kind::kRead, job.key, {}, nullptr, 0, 0});
        try {
          done->state = read_now(job.key, job.tokens);
          done->bytes = fs::file_size(path(job.key), ec);  // as stored (compressed or not)
        } catch (const std::exception& e) {
          done->error = e.what();
        }
        break;
      case Job::Kind::kRemove:
        fs::remove(path(job.key), ec);
        break;
      case Job::Kind::kTouch:
        fs::last_write_time(path(job.key), fs::file_time_type::clock::now(), ec);
        break;
    }
    if (done) done->seconds = std::chrono::duration<double>(Clock::now() - started).count();
    lock.lock();
    lane.busy = false;
    if (done) done_.push_back(std::move(*done));
    lock.unlock();
    idle_.notify_all();
    lock.lock();
  }
}

}  // namespace strata::runtime
