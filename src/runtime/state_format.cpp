// The state format: sections from a state, a hashing writer and a checking reader.
#include "runtime/state_format.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "backend/memory.h"
#include "core/error.h"

namespace strata::runtime {

namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'S', 'T'};
constexpr uint32_t kVersion = 1;
constexpr size_t kChecksumBytes = 32;
constexpr uint32_t kMaxString = 4096;

}  // namespace

std::vector<StateSection> state_sections(const model::ModelState& state, int64_t n_tokens) {
  std::vector<StateSection> out;
  out.reserve(state.buffers.size());
  for (const model::StateBuffer& b : state.buffers) {
    const Tensor& t = b.tensor.view();
    StateSection s{b.name, t.dtype, b.token_indexed, t.shape, t.nbytes()};
    if (b.token_indexed) {
      if (state.paged()) s.shape[0] = state.capacity;
      s.bytes = t.rows(0, 1).nbytes() * static_cast<uint64_t>(n_tokens);
    }
    out.push_back(std::move(s));
  }
  return out;
}

uint64_t state_format_bytes(const std::string& fingerprint, std::span<const StateSection> sections,
                            int64_t n_tokens) {
  uint64_t total = sizeof(kMagic) + 4 + 4 + fingerprint.size() + 8 + 4 * static_cast<uint64_t>(n_tokens) + 4;
  for (const StateSection& s : sections)
    total += 4 + s.name.size() + 4 + 8 * static_cast<uint64_t>(s.shape.rank()) + 8 + s.bytes;
  return total + kChecksumBytes;
}

void check_state_checksum(std::span<const uint8_t> bytes) {
  check(bytes.size() >= sizeof(kMagic) + kChecksumBytes && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0,
        ErrorKind::kInvalidInput, "not a strata state (bad magic)");
  const std::span<const uint8_t> body = bytes.first(bytes.size() - kChecksumBytes);
  Hasher h;
  h.update(body.data(), body.size());
  check(std::memcmp(h.hex_digest().data(), bytes.data() + body.size(), kChecksumBytes) == 0,
        ErrorKind::kInvalidInput, "state is corrupted (checksum mismatch)");
}

StateWriter::StateWriter(Sink sink) : sink_(std::move(sink)) {}

void StateWriter::put(const void* p, size_t n) {
  hash_.update(p, n);
  sink_(static_cast<const uint8_t*>(p), n);
}

void StateWriter::begin(const std::string& fingerprint, std::span<const int32_t> tokens, size_t sections) {
  put(kMagic, sizeof(kMagic));
  put_value(kVersion);
  put_value(static_cast<uint32_t>(fingerprint.size()));
  put(fingerprint.data(), fingerprint.size());
  put_value(static_cast<int64_t>(tokens.size()));
  put(tokens.data(), tokens.size_bytes());
  put_value(static_cast<uint32_t>(sections));
}

void StateWriter::section(const StateSection& s) {
  put_value(static_cast<uint32_t>(s.name.size()));
  put(s.name.data(), s.name.size());
  put_value(static_cast<uint8_t>(s.dtype));
  put_value(static_cast<uint8_t>(s.token_indexed));
  put_value(static_cast<uint8_t>(s.shape.rank()));
  put_value(uint8_t{0});
  for (int i = 0; i < s.shape.rank(); ++i) put_value(s.shape[i]);
  put_value(s.bytes);
}

void StateWriter::data(const void* p, size_t n) { put(p, n); }

void StateWriter::data(const Tensor& t) {
  staging_.resize(t.nbytes());
  backend::copy_to_host(t, staging_.data());
  put(staging_.data(), staging_.size());
}

void StateWriter::finish() {
  const std::string sum = hash_.hex_digest();
  sink_(reinterpret_cast<const uint8_t*>(sum.data()), sum.size());
}

// Hashes pieces in the order given, on its own thread. A small piece (a header field, read into
// a local) is copied; a large one is hashed where it lies.
class StateReader::Behind {
 public:
  explicit Behind(Hasher& hash) : hash_(hash), thread_([this] { run(); }) {}
  ~Behind() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      pieces_.clear();  // nobody wants the digest now
    }
    more_.notify_one();
    thread_.join();
  }
  void add(const uint8_t* p, size_t n) {
    {
      std::lock_guard lock(mutex_);
      Piece& piece = pieces_.emplace_back();
      if (n < kCopyBelow) {
        piece.copy.assign(p, p + n);
      } else {
        piece.at = p;
        piece.n = n;
      }
    }
    more_.notify_one();
  }
  // Waits until every piece added is hashed.
  void drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return pieces_.empty() && !busy_; });
  }

 private:
  static constexpr size_t kCopyBelow = 4096;
  struct Piece {
    const uint8_t* at = nullptr;
    size_t n = 0;
    std::vector<uint8_t> copy;
  };
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      more_.wait(lock, [&] { return stop_ || !pieces_.empty(); });
      if (stop_) return;
      Piece piece = std::move(pieces_.front());
      pieces_.pop_front();
      busy_ = true;
      lock.unlock();
      if (piece.at != nullptr) {
        hash_.update(piece.at, piece.n);
      } else {
        hash_.update(piece.copy.data(), piece.copy.size());
      }
      lock.lock();
      busy_ = false;
      if (pieces_.empty()) idle_.notify_all();
    }
  }
  Hasher& hash_;
  std::mutex mutex_;
  std::condition_variable more_, idle_;
  std::deque<Piece> pieces_;
  bool busy_ = false, stop_ = false;
  std::thread thread_;
};

StateReader::StateReader(Source source) : source_(std::move(source)) {}

StateReader::~StateReader() = default;

void StateReader::hash_behind() {
  if (behind_ == nullptr) behind_ = std::make_unique<Behind>(hash_);
}

void StateReader::take(void* dst, size_t n, const char* what) {
  try {
    source_(static_cast<uint8_t*>(dst), n);
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("state: {} while reading {}", e.what(), what));
  }
  hashed(dst, n);
}

void StateReader::hashed(const void* p, size_t n) {
  if (behind_ != nullptr) {
    behind_->add(static_cast<const uint8_t*>(p), n);
  } else {
    hash_.update(p, n);
  }
}

std::string StateReader::get_string(const char* what) {
  const auto n = get<uint32_t>(what);
  check(n <= kMaxString, ErrorKind::kInvalidInput, "state: {} of {} bytes is implausible", what, n);
  std::string s(n, '\0');
  take(s.data(), n, what);
  return s;
}

StateHeader StateReader::header(int64_t max_tokens) {
  char magic[sizeof(kMagic)];
  take(magic, sizeof(magic), "magic");
  check(std::memcmp(magic, kMagic, sizeof(kMagic)) == 0, ErrorKind::kInvalidInput, "not a strata state (bad magic)");
  StateHeader h;
  h.version = get<uint32_t>("version");
  check(h.version == kVersion, ErrorKind::kUnsupported, "state version {} is not supported (this build reads {})",
        h.version, kVersion);
  h.fingerprint = get_string("fingerprint");
  const auto n = get<int64_t>("token count");
  check(n >= 0 && n <= max_tokens, ErrorKind::kInvalidInput, "state holds {} tokens; the capacity is {}", n, max_tokens);
  h.tokens.resize(static_cast<size_t>(n));
  take(h.tokens.data(), h.tokens.size() * sizeof(int32_t), "tokens");
  n_tokens_ = n;
  return h;
}

void StateReader::sections(std::span<const StateSection> expected, const Destination& dest) {
  check(n_tokens_ >= 0, ErrorKind::kInternal, "state sections read before the header");
  const auto count = get<uint32_t>("section count");
  check(count == expected.size(), ErrorKind::kInvalidInput, "state has {} sections; the model needs {}", count,
        expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const StateSection& e = expected[i];
    const std::string name = get_string("section name");
    check(name == e.name, ErrorKind::kInvalidInput, "state section {} is '{}'; expected '{}'", i, name, e.name);
    const auto dtype = get<uint8_t>("dtype");
    const auto token_indexed = get<uint8_t>("kind");
    const auto rank = get<uint8_t>("rank");
    get<uint8_t>("padding");
    bool same = dtype == static_cast<uint8_t>(e.dtype) && token_indexed == static_cast<uint8_t>(e.token_indexed) &&
                rank == e.shape.rank();
    for (int d = 0; same && d < rank; ++d) {
      const auto dim = get<int64_t>("shape");
      same = (d == 0 && e.token_indexed) ? dim >= n_tokens_ : dim == e.shape[d];
    }
    check(same, ErrorKind::kInvalidInput, "state section '{}' does not match this model's buffer ({} {}){}", name,
          dtype_name(e.dtype), e.shape.str(),
          e.token_indexed ? "; was it saved with another --kv-cache-type?" : "");
    const auto nbytes = get<uint64_t>("section size");
    check(nbytes == e.bytes, ErrorKind::kInvalidInput, "state section '{}' has {} bytes; expected {}", name, nbytes,
          e.bytes);
    uint64_t placed = 0;
    const std::vector<std::span<uint8_t>> pieces = dest(i);
    for (const std::span<uint8_t> piece : pieces) placed += piece.size();
    check(placed == nbytes, ErrorKind::kInternal, "state section '{}': {} bytes placed of {}", name, placed, nbytes);
    if (gather_ == nullptr) {
      for (const std::span<uint8_t> piece : pieces) take(piece.data(), piece.size(), "section data");
      continue;
    }
    try {
      gather_(pieces);
    } catch (const Error& e) {
      throw Error(e.kind(), fmt::format("state: {} while reading section data", e.what()));
    }
    for (const std::span<uint8_t> piece : pieces) hashed(piece.data(), piece.size());
  }
}

void StateReader::finish() {
  if (behind_ != nullptr) behind_->drain();
  const std::string want = hash_.hex_digest();
  char got[kChecksumBytes];
  try {
    source_(reinterpret_cast<uint8_t*>(got), sizeof(got));
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("state: {} while reading the checksum", e.what()));
  }
  check(std::memcmp(got, want.data(), kChecksumBytes) == 0, ErrorKind::kInvalidInput,
        "state is corrupted (checksum mismatch)");
}

}  // namespace strata::runtime
