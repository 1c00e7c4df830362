// The checked state format (runtime/state_format.h) and the prefix cache's disk tier built on it
// (runtime/state_store.h): the format's bytes are as documented and every damage is refused with
// its kind; a store's file is byte for byte the sequence's serialized state and resumes exactly;
// the index keeps exactly this model's whole files, oldest first; kill -9 at any moment leaves
// only whole files; a full disk fails a write cleanly; states of another model, layout or prefix
// are refused; and the asynchronous jobs run in order, report, and are waited for by flush().
#include "runtime/state_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "backend/memory.h"
#include "core/error.h"
#include "core/hash.h"
#include "runtime/sequence.h"
#include "runtime/state_compression.h"
#include "runtime/state_format.h"
#include "runtime/state_pool.h"
#include "model_util.h"
#include "test_util.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using runtime::Sequence;
using runtime::StateBytes;
using runtime::StateReader;
using runtime::StateSection;
using runtime::StateStore;
using runtime::StateWriter;
using runtime::StoredState;

constexpr char kFingerprint[] = "0123456789abcdef0123456789abcdef";
constexpr char kOtherFingerprint[] = "fedcba9876543210fedcba9876543210";

// A fresh directory of the test's own under gtest's temporary directory, removed at its end.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& name)
      : path_(fs::path(::testing::TempDir()) /
              fmt::format("strata-state-store-{}-{}", ::getpid(), name)) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::set<std::string> names_in(const fs::path& dir) {
  std::set<std::string> out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir))
    out.insert(e.path().filename().string());
  return out;
}

std::vector<uint8_t> file_contents(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Overwrites bytes of a file at `offset`.
void patch(const fs::path& p, size_t offset, const void* data, size_t n) {
  std::fstream f(p, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  ASSERT_TRUE(f.good()) << p;
}

// Where two byte strings first differ ("" when they are equal), for messages about megabytes.
std::string difference(std::span<const uint8_t> a, std::span<const uint8_t> b) {
  if (a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin())) return "";
  const auto at = std::mismatch(a.begin(), a.end(), b.begin(), b.end()).first - a.begin();
  return fmt::format("sizes {} and {}, first difference at byte {}", a.size(), b.size(), at);
}

// bytes in host pages (small ones, so that states span several).
runtime::PagedBytes paged(std::span<const uint8_t> bytes) {
  static const std::shared_ptr<runtime::HostPages> pages = runtime::HostPages::create(Device::kCpu, 256);
  return pages->take_copy(bytes);
}

// "" when a and b hold the same tokens and bytes, else what differs.
std::string difference(const StateBytes& a, const StateBytes& b) {
  if (a.tokens != b.tokens) return "the tokens differ";
  if (const std::string d = difference(a.kv.to_vector(), b.kv.to_vector()); !d.empty()) return "kv: " + d;
  if (const std::string d = difference(a.recurrent.to_vector(), b.recurrent.to_vector()); !d.empty())
    return "recurrent: " + d;
  return "";
}

// Waits until the store reports n finished jobs (never returning before; a hang is a failure of
// the test's time limit, not a timing assertion here).
std::vector<StateStore::Done> wait_for(StateStore& store, size_t n) {
  std::vector<StateStore::Done> out;
  while (out.size() < n) {
    store.wait(std::chrono::milliseconds(100));
    for (StateStore::Done& d : store.poll()) out.push_back(std::move(d));
  }
  return out;
}

// ---- Models and their sequences ----

using test::argmax;
using test::random_tokens;

std::span<const uint8_t> bytes_of(const HostTensor& t) {
  return {static_cast<const uint8_t*>(t.as<void>()), t.view().nbytes()};
}

// A sequence's state as the prefix cache hands it to the store: its tokens, its KV rows
// (save_kv) and its recurrent buffers' bytes in the model's order.
StateBytes state_of(const Sequence& seq) {
  StateBytes s;
  s.tokens = seq.tokens();
  std::vector<uint8_t> kv(seq.kv_bytes(seq.n_tokens())), recurrent;
  seq.save_kv(seq.n_tokens(), kv.data());
  for (const model::StateBuffer& b : seq.state().buffers) {
    if (b.token_indexed) continue;
    const size_t at = recurrent.size();
    recurrent.resize(at + b.tensor.view().nbytes());
    backend::copy_to_host(b.tensor.view(), recurrent.data() + at);
  }
  s.kv = paged(kv);
  s.recurrent = paged(recurrent);
  return s;
}

// The way back: the rows and recurrent buffers put in place, then the sequence assumes the tokens.
void load_state(Sequence& seq, const StateBytes& s) {
  seq.load_kv(static_cast<int64_t>(s.tokens.size()), s.kv.to_vector().data());
  const std::vector<uint8_t> recurrent = s.recurrent.to_vector();
  const uint8_t* src = recurrent.data();
  for (const model::StateBuffer& b : seq.state().buffers) {
    if (b.token_indexed) continue;
    backend::copy_from_host(src, b.tensor.view());
    src += b.tensor.view().nbytes();
  }
  seq.assume(s.tokens);
}

// ---- Synthetic states: a model's kind of layout, sized freely, with bytes that follow from
// their key and tokens alone (so whoever reads a file knows what it must hold) ----

// Recurrent and KV buffers interleaved, as a hybrid model's: `row` elements per token in each of
// two KV buffers, `recurrent` floats of recurrent state.
model::ModelState synthetic_layout(int64_t capacity, int64_t row, int64_t recurrent,
                                   DType kv = DType::kF32) {
  model::ModelState s;
  s.capacity = capacity;
  auto add = [&](const char* name, DType dtype, Shape shape, bool token_indexed) {
    s.buffers.push_back({name, backend::Buffer(Device::kCpu, dtype, shape), token_indexed});
  };
  add("layers.0.conv", DType::kF32, {3, 8}, false);
  add("layers.1.k", kv, {capacity, row}, true);
  add("layers.0.ssm", DType::kF32, {recurrent}, false);
  add("layers.1.v", kv, {capacity, row}, true);
  return s;
}

size_t recurrent_bytes(const model::ModelState& layout) {
  size_t n = 0;
  for (const model::StateBuffer& b : layout.buffers)
    if (!b.token_indexed) n += b.tensor.view().nbytes();
  return n;
}

void fill(std::vector<uint8_t>& bytes, uint64_t seed) {
  for (size_t at = 0; at < bytes.size(); at += 8) {
    uint64_t z = (seed += 0x9e3779b97f4a7c15);  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    z ^= z >> 31;
    std::memcpy(bytes.data() + at, &z, std::min<size_t>(8, bytes.size() - at));
  }
}

StateBytes synthetic_state(const model::ModelState& layout, uint64_t key,
                           std::vector<int32_t> tokens) {
  StateBytes s;
  s.tokens = std::move(tokens);
  const uint64_t seed = hash64(s.tokens.data(), s.tokens.size() * sizeof(int32_t), key);
  std::vector<uint8_t> kv(Sequence::kv_bytes(layout, static_cast<int64_t>(s.tokens.size())));
  std::vector<uint8_t> recurrent(recurrent_bytes(layout));
  fill(kv, seed);
  fill(recurrent, ~seed);
  s.kv = paged(kv);
  s.recurrent = paged(recurrent);
  return s;
}

std::vector<int32_t> some_tokens(int64_t n, uint64_t salt) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    t[static_cast<size_t>(i)] = static_cast<int32_t>((i * 13 + salt * 7) % 50000);
  return t;
}

// ---- The format itself ----

// Four sections of a state of n tokens (recurrent and token-indexed, two dtypes), and their data.
std::vector<StateSection> format_sections(int64_t n, int64_t capacity = 16) {
  const auto rows = static_cast<uint64_t>(n) * 8;  // BF16 [capacity, 4]: 8 bytes a token
  return {{"layers.0.conv", DType::kF32, false, {3, 8}, 96},
          {"layers.1.k", DType::kBF16, true, {capacity, 4}, rows},
          {"layers.0.ssm", DType::kF32, false, {5}, 20},
          {"layers.1.v", DType::kBF16, true, {capacity, 4}, rows}};
}

std::vector<std::vector<uint8_t>> format_data(std::span<const StateSection> sections) {
  std::vector<std::vector<uint8_t>> data;
  for (size_t i = 0; i < sections.size(); ++i) {
    data.emplace_back(sections[i].bytes);
    fill(data.back(), i);
  }
  return data;
}

// The format's bytes, each section's data handed to the writer in pieces of `piece` bytes.
std::vector<uint8_t> write_format(const std::string& fingerprint, std::span<const int32_t> tokens,
                                  std::span<const StateSection> sections,
                                  const std::vector<std::vector<uint8_t>>& data, size_t piece) {
  std::vector<uint8_t> out;
  StateWriter w([&](const uint8_t* p, size_t n) { out.insert(out.end(), p, p + n); });
  w.begin(fingerprint, tokens, sections.size());
  for (size_t i = 0; i < sections.size(); ++i) {
    w.section(sections[i]);
    for (size_t at = 0; at < data[i].size(); at += piece)
      w.data(data[i].data() + at, std::min(piece, data[i].size() - at));
  }
  w.finish();
  return out;
}

// Reads a whole state from bytes (header, the expected sections, checksum); returns the
// sections' data.
std::vector<std::vector<uint8_t>> read_format(std::span<const uint8_t> bytes, int64_t max_tokens,
                                              std::span<const StateSection> expected,
                                              runtime::StateHeader* header = nullptr) {
  size_t at = 0;
  StateReader r([&](uint8_t* dst, size_t n) {
    check(n <= bytes.size() - at, ErrorKind::kInvalidInput, "truncated");
    std::memcpy(dst, bytes.data() + at, n);
    at += n;
  });
  runtime::StateHeader h = r.header(max_tokens);
  std::vector<std::vector<uint8_t>> data(expected.size());
  r.sections(expected, [&](size_t i) {
    data[i].resize(expected[i].bytes);
    return std::vector<std::span<uint8_t>>{data[i]};
  });
  r.finish();
  check(at == bytes.size(), ErrorKind::kInvalidInput, "{} bytes left over", bytes.size() - at);
  if (header != nullptr) *header = std::move(h);
  return data;
}

template <typename T>
T value_at(std::span<const uint8_t> bytes, size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

// The writer lays out the documented format (magic, version, fingerprint, tokens, sections, a
// 32-hex-digit checksum), its size is state_format_bytes, and how the data is split into pieces
// changes nothing.
TEST(StateFormat, WriterLaysOutTheDocumentedFormatWhateverThePieces) {
  const std::vector<int32_t> tokens = {5, 9, 11};
  const std::vector<StateSection> sections = format_sections(3);
  const auto data = format_data(sections);
  const std::vector<uint8_t> bytes = write_format(kFingerprint, tokens, sections, data, 1 << 20);
  EXPECT_EQ(bytes.size(), runtime::state_format_bytes(kFingerprint, sections, 3));
  for (size_t piece : {1, 3, 7, 64})
    EXPECT_EQ(difference(write_format(kFingerprint, tokens, sections, data, piece), bytes), "")
        << "pieces of " << piece;

  const std::span<const uint8_t> b(bytes);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "STRATAST");
  EXPECT_EQ(value_at<uint32_t>(b, 8), 1u);    // version
  EXPECT_EQ(value_at<uint32_t>(b, 12), 32u);  // fingerprint length
  EXPECT_EQ(std::string(bytes.begin() + 16, bytes.begin() + 48), kFingerprint);
  EXPECT_EQ(value_at<int64_t>(b, 48), 3);  // token count
  EXPECT_EQ(value_at<int32_t>(b, 56), 5);
  EXPECT_EQ(value_at<int32_t>(b, 64), 11);
  EXPECT_EQ(value_at<uint32_t>(b, 68), 4u);  // sections
  size_t at = 72;
  for (size_t i = 0; i < sections.size(); ++i) {
    const StateSection& s = sections[i];
    ASSERT_EQ(value_at<uint32_t>(b, at), s.name.size()) << s.name;
    EXPECT_EQ(std::string(bytes.begin() + at + 4, bytes.begin() + at + 4 + s.name.size()), s.name);
    at += 4 + s.name.size();
    EXPECT_EQ(b[at], static_cast<uint8_t>(s.dtype)) << s.name;
    EXPECT_EQ(b[at + 1], s.token_indexed ? 1 : 0) << s.name;
    ASSERT_EQ(b[at + 2], s.shape.rank()) << s.name;
    EXPECT_EQ(b[at + 3], 0) << s.name;
    at += 4;
    for (int d = 0; d < s.shape.rank(); ++d, at += 8)
      EXPECT_EQ(value_at<int64_t>(b, at), s.shape[d]);
    ASSERT_EQ(value_at<uint64_t>(b, at), s.bytes) << s.name;
    at += 8;
    EXPECT_EQ(difference(b.subspan(at, s.bytes), data[i]), "") << s.name;
    at += s.bytes;
  }
  ASSERT_EQ(bytes.size(), at + 32);
  Hasher h;
  h.update(bytes.data(), at);
  EXPECT_EQ(std::string(bytes.begin() + static_cast<std::ptrdiff_t>(at), bytes.end()),
            h.hex_digest());
}

// What the writer wrote, the reader gives back: the header, every section's data where the
// destination said, and an intact checksum; a state of no tokens too.
TEST(StateFormat, ReaderGivesBackWhatTheWriterWrote) {
  for (int64_t n : {0, 1, 5, 16}) {
    const std::vector<int32_t> tokens = some_tokens(n, 3);
    const std::vector<StateSection> sections = format_sections(n);
    const auto data = format_data(sections);
    const std::vector<uint8_t> bytes = write_format(kFingerprint, tokens, sections, data, 5);
    runtime::StateHeader header;
    EXPECT_EQ(read_format(bytes, 16, sections, &header), data) << n << " tokens";
    EXPECT_EQ(header.version, 1u);
    EXPECT_EQ(header.fingerprint, kFingerprint);
    EXPECT_EQ(header.tokens, tokens);
    runtime::check_state_checksum(bytes);  // throws if it disagrees
  }
}

// A reader whose buffers have a larger capacity reads a state saved with a smaller one (only the
// stored rows count), but not one whose capacity is below its tokens.
TEST(StateFormat, TokenIndexedCapacityNeedOnlyHoldTheTokens) {
  const std::vector<int32_t> tokens = some_tokens(6, 1);
  const auto data = format_data(format_sections(6, 8));
  EXPECT_EQ(read_format(write_format(kFingerprint, tokens, format_sections(6, 8), data, 64), 64,
                        format_sections(6, 64)),
            data);
  test::expect_error(
      [&] {
        read_format(write_format(kFingerprint, tokens, format_sections(6, 5), data, 64), 64,
                    format_sections(6, 64));
      },
      ErrorKind::kInvalidInput, {"layers.1.k", "does not match", "--kv-cache-type"});
}

// Every kind of damage or mismatch is refused by the reader with its kind and a message naming it.
TEST(StateFormat, ReaderRefusesEachMismatchWithItsKind) {
  const std::vector<int32_t> tokens = some_tokens(4, 2);
  const std::vector<StateSection> sections = format_sections(4);
  const auto data = format_data(sections);
  const std::vector<uint8_t> good = write_format(kFingerprint, tokens, sections, data, 64);
  auto patched = [&](size_t offset, auto value) {
    std::vector<uint8_t> b = good;
    std::memcpy(b.data() + offset, &value, sizeof(value));
    return b;
  };
  auto flipped = [&](size_t offset) {
    std::vector<uint8_t> b = good;
    b[offset] ^= 0x20;
    return b;
  };
  auto with = [&](auto change) {
    std::vector<StateSection> s = sections;
    change(s);
    return s;
  };
  auto refused = [&](const char* what, std::span<const uint8_t> bytes, int64_t max_tokens,
                     std::span<const StateSection> expected, ErrorKind kind,
                     std::initializer_list<std::string> parts) {
    SCOPED_TRACE(what);
    test::expect_error([&] { read_format(bytes, max_tokens, expected); }, kind, parts);
  };
  const ErrorKind invalid = ErrorKind::kInvalidInput;
  refused("bad magic", flipped(2), 16, sections, invalid, {"bad magic"});
  refused("version 2", patched(8, uint32_t{2}), 16, sections, ErrorKind::kUnsupported,
          {"version 2"});
  refused("huge fingerprint", patched(12, uint32_t{1} << 20), 16, sections, invalid,
          {"implausible"});
  refused("negative token count", patched(48, int64_t{-1}), 16, sections, invalid, {"-1 tokens"});
  refused("more tokens than the capacity", good, 3, sections, invalid,
          {"4 tokens", "capacity is 3"});
  refused("a section fewer", good, 16, with([](auto& s) { s.pop_back(); }), invalid,
          {"4 sections", "needs 3"});
  refused("another name", good, 16, with([](auto& s) { s[2].name = "layers.0.state"; }), invalid,
          {"layers.0.ssm", "layers.0.state"});
  refused("another dtype", good, 16, with([](auto& s) { s[1].dtype = DType::kF16; }), invalid,
          {"layers.1.k", "F16", "--kv-cache-type"});
  refused("another kind", good, 16, with([](auto& s) { s[2].token_indexed = true; }), invalid,
          {"layers.0.ssm", "does not match"});
  const Shape other_window{4, 6}, other_rows{16, 2, 2};
  refused("another recurrent shape", good, 16, with([&](auto& s) { s[0].shape = other_window; }),
          invalid, {"layers.0.conv", "[4, 6]"});
  refused("another row shape", good, 16, with([&](auto& s) { s[3].shape = other_rows; }), invalid,
          {"layers.1.v", "does not match"});
  refused("another size", good, 16, with([](auto& s) { s[2].bytes = 24; }), invalid,
          {"layers.0.ssm", "20 bytes", "expected 24"});
  refused("a data byte flipped", flipped(good.size() - 40), 16, sections, invalid, {"checksum"});
  refused("a checksum digit changed", flipped(good.size() - 1), 16, sections, invalid,
          {"checksum"});
  // Cut anywhere, it is refused while reading (never a crash, never accepted).
  for (size_t cut = 0; cut < good.size(); ++cut) {
    SCOPED_TRACE(fmt::format("cut at {}", cut));
    const std::span<const uint8_t> part = std::span<const uint8_t>(good).first(cut);
    test::expect_error([&] { read_format(part, 16, sections); }, ErrorKind::kInvalidInput, {});
  }
  StateReader early([](uint8_t*, size_t) {});
  test::expect_error(
      [&] { early.sections(sections, [](size_t) { return std::vector<std::span<uint8_t>>{}; }); },
      ErrorKind::kInternal, {"before the header"});
}

// check_state_checksum refuses a flipped bit in any byte (whatever field it lands in), and what
// is too short to hold the magic and a checksum.
TEST(StateFormat, ChecksumCatchesAFlippedByteAnywhere) {
  const std::vector<StateSection> sections = format_sections(2);
  const std::vector<uint8_t> good =
      write_format(kFingerprint, some_tokens(2, 4), sections, format_data(sections), 64);
  runtime::check_state_checksum(good);
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x01;
    SCOPED_TRACE(fmt::format("byte {}", i));
    test::expect_error([&] { runtime::check_state_checksum(bad); }, ErrorKind::kInvalidInput, {});
  }
  const std::vector<uint8_t> short_one(good.begin(), good.begin() + 39);
  test::expect_error([&] { runtime::check_state_checksum(short_one); }, ErrorKind::kInvalidInput,
                     {"bad magic"});
}

// state_sections describes a state's buffers: all of a recurrent one, a token-indexed one's first
// n rows, shapes as the buffers have them.
TEST(StateFormat, SectionsFollowTheStatesBuffers) {
  const model::ModelState layout = synthetic_layout(32, 6, 10, DType::kBF16);
  const std::vector<StateSection> s = runtime::state_sections(layout, 5);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].name, "layers.0.conv");
  EXPECT_FALSE(s[0].token_indexed);
  EXPECT_EQ(s[0].bytes, 3u * 8 * 4);
  EXPECT_EQ(s[1].name, "layers.1.k");
  EXPECT_TRUE(s[1].token_indexed);
  EXPECT_EQ(s[1].dtype, DType::kBF16);
  EXPECT_EQ(s[1].shape, (Shape{32, 6}));
  EXPECT_EQ(s[1].bytes, 5u * 6 * 2);
  EXPECT_EQ(s[2].shape, (Shape{10}));
  EXPECT_EQ(s[2].bytes, 40u);
  EXPECT_EQ(s[3].bytes, 5u * 6 * 2);
}

// ---- A store's files are sequences' serialized states ----

class StateStoreModel : public ::testing::TestWithParam<std::string> {};

// A store made with a sequence's own state as its layout writes that sequence's state as exactly
// the bytes Sequence::serialize gives. read_now gives back the bytes it was given, and both ways
// back into a sequence (deserialize the file; load_kv and assume what was read) go on with the
// logits, bit for bit, of the sequence that never stopped.
TEST_P(StateStoreModel, FileIsTheSerializedSequenceAndResumesExactly) {
  auto m = test::load_fixture_model(GetParam());
  const int64_t V = m->config().vocab_size;
  ScratchDir dir("identity-" + GetParam());
  Sequence seq(*m, 64);
  HostTensor logits(DType::kF32, {V});
  seq.forward(*m, random_tokens(40, V, 1), logits, false);
  StateStore store(dir.path(), m->fingerprint(), seq.state(), 64);
  const StateBytes state = state_of(seq);
  store.write_now(0x1234, state);

  EXPECT_EQ(names_in(dir.path()), std::set<std::string>{"0000000000001234.state"});
  const std::vector<uint8_t> file = file_contents(store.path(0x1234));
  EXPECT_EQ(file.size(), store.file_bytes(40));
  EXPECT_EQ(difference(file, seq.serialize()), "");
  const std::shared_ptr<StateBytes> read = store.read_now(0x1234, seq.tokens());
  EXPECT_EQ(difference(*read, state), "");

  Sequence from_file(*m, 96), from_read(*m, 64);
  from_file.deserialize(file);
  load_state(from_read, *read);
  EXPECT_EQ(from_read.tokens(), seq.tokens());
  HostTensor l_file(DType::kF32, {V}), l_read(DType::kF32, {V});
  for (int step = 0; step < 8; ++step) {
    const int32_t t[1] = {argmax(logits)};
    seq.forward(*m, t, logits, false);
    from_file.forward(*m, t, l_file, false);
    from_read.forward(*m, t, l_read, false);
    ASSERT_EQ(difference(bytes_of(l_file), bytes_of(logits)), "") << "step " << step;
    ASSERT_EQ(difference(bytes_of(l_read), bytes_of(logits)), "") << "step " << step;
  }
}

// A store laid out as a pool's paged state (rows scattered over blocks other sequences' blocks
// sit between) writes a slot's state as the file of a plain sequence of the pool's capacity.
TEST_P(StateStoreModel, PagedLayoutWritesThePlainSequencesFile) {
  auto m = test::load_fixture_model(GetParam());
  const int64_t V = m->config().vocab_size;
  ScratchDir dir("paged-" + GetParam());
  runtime::StatePool pool(*m, 2, 96, 16, 8);  // pools of 128 rows: not the capacity
  const int slots[2] = {pool.acquire(), pool.acquire()};
  Sequence plain(*m, 96);
  HostTensor logits(DType::kF32, {V});
  for (int chunk = 0; chunk < 4; ++chunk) {
    for (int i = 0; i < 2; ++i) {
      Sequence& seq = pool.sequence(slots[i]);
      ASSERT_TRUE(pool.reserve(slots[i], seq.n_tokens() + 7));
      const std::vector<int32_t> t = random_tokens(7, V, static_cast<uint32_t>(chunk * 2 + i));
      seq.forward(*m, t, logits, false);
      if (i == 0) plain.forward(*m, t, logits, false);
    }
  }
  ASSERT_EQ(pool.sequence(slots[0]).state().blocks, (std::vector<int32_t>{0, 2, 4, 6}));
  StateStore store(dir.path(), m->fingerprint(), pool.sequence(slots[0]).state(), 96);
  store.write_now(3, state_of(pool.sequence(slots[0])));
  EXPECT_EQ(difference(file_contents(store.path(3)), plain.serialize()), "");
}

INSTANTIATE_TEST_SUITE_P(StateStore, StateStoreModel,
                         ::testing::Values("qwen35", "qwen35_moe", "llama"));

// ---- The index ----

// At start the index keeps this model's whole files, least recently modified first, and removes
// the rest: truncated or grown files, another model's, another version's, bad magic, more tokens
// than the store holds, and its own leftover temporaries; files of other names are left alone. A
// file with a flipped body byte is kept (only reading checks the checksum): reading it, now or as
// a job, reports the corruption.
TEST(StateStoreIndex, KeepsThisModelsWholeFilesOldestFirstAndRemovesTheRest) {
  ScratchDir dir("index");
  const model::ModelState layout = synthetic_layout(64, 16, 100);
  auto state = [&](uint64_t key, int64_t n) {
    return synthetic_state(layout, key, some_tokens(n, key));
  };
  // Every writer opens the directory before any writes (each start would clean the others' files).
  const model::ModelState longer = synthetic_layout(128, 16, 100);
  StateStore other(dir.path(), kOtherFingerprint, layout, 64);
  StateStore longer_writer(dir.path(), kFingerprint, longer, 128);
  StateStore writer(dir.path(), kFingerprint, layout, 64);
  other.write_now(0xc3, state(0xc3, 10));
  longer_writer.write_now(0xc7, synthetic_state(longer, 0xc7, some_tokens(100, 0xc7)));
  const std::map<uint64_t, int64_t> kept = {{0xa1, 5}, {0xa2, 64}, {0xa3, 0}, {0xb1, 20}};
  for (const auto& [key, n] : kept) writer.write_now(key, state(key, n));
  for (uint64_t key : {0xc1, 0xc2, 0xc4, 0xc5, 0xc6}) writer.write_now(key, state(key, 12));
  const uint64_t size = fs::file_size(writer.path(0xb1));
  const uint8_t flip = file_contents(writer.path(0xb1))[size - 40] ^ 0x04;
  patch(writer.path(0xb1), size - 40, &flip, 1);  // in the last section's data
  fs::resize_file(writer.path(0xc1), fs::file_size(writer.path(0xc1)) - 1);
  fs::resize_file(writer.path(0xc2), fs::file_size(writer.path(0xc2)) + 1);
  const uint32_t version = 2;
  patch(writer.path(0xc4), 8, &version, sizeof(version));
  patch(writer.path(0xc5), 0, "X", 1);
  fs::rename(writer.path(0xc6), fs::path(writer.path(0xc6)).concat(".tmp"));
  test::write_bytes((dir.path() / "notes.txt").string(), "not a state");
  test::write_bytes((dir.path() / "cache.state").string(), "not ours either");
  test::write_bytes((dir.path() / "notes.tmp").string(), "nor this");

  // Ages, set last (the damage above modifies files too); oldest first: a2, b1, a3, a1.
  const auto now = fs::file_time_type::clock::now();
  fs::last_write_time(writer.path(0xa1), now - std::chrono::seconds(100));
  fs::last_write_time(writer.path(0xa2), now - std::chrono::seconds(400));
  fs::last_write_time(writer.path(0xa3), now - std::chrono::seconds(200));
  fs::last_write_time(writer.path(0xb1), now - std::chrono::seconds(300));

  StateStore store(dir.path(), kFingerprint, layout, 64);
  const std::vector<StoredState> index = store.take_index();
  std::vector<uint64_t> keys;
  for (const StoredState& e : index) keys.push_back(e.key);
  EXPECT_EQ(keys, (std::vector<uint64_t>{0xa2, 0xb1, 0xa3, 0xa1}));
  for (const StoredState& e : index) {
    EXPECT_EQ(e.tokens, some_tokens(kept.at(e.key), e.key)) << e.key;
    EXPECT_EQ(e.bytes, store.file_bytes(kept.at(e.key))) << e.key;
    EXPECT_EQ(e.bytes, fs::file_size(store.path(e.key))) << e.key;
    EXPECT_EQ(e.modified, fs::last_write_time(store.path(e.key))) << e.key;
  }
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{"00000000000000a1.state", "00000000000000a2.state",
                                   "00000000000000a3.state", "00000000000000b1.state", "notes.txt",
                                   "cache.state", "notes.tmp"}));

  for (uint64_t key : {0xa1, 0xa2, 0xa3})
    EXPECT_EQ(
        difference(*store.read_now(key, some_tokens(kept.at(key), key)), state(key, kept.at(key))),
        "")
        << key;
  test::expect_error([&] { store.read_now(0xb1, some_tokens(20, 0xb1)); }, ErrorKind::kInvalidInput,
                     {"checksum"});
  store.read(0xb1, some_tokens(20, 0xb1));
  const std::vector<StateStore::Done> done = wait_for(store, 1);
  EXPECT_EQ(done[0].kind, StateStore::Done::Kind::kRead);
  EXPECT_EQ(done[0].key, 0xb1u);
  EXPECT_NE(done[0].error.find("checksum"), std::string::npos) << done[0].error;
  EXPECT_EQ(done[0].state, nullptr);
}

// ---- Crashes ----

constexpr uint64_t kCrashKeys[] = {0x11, 0x22, 0x33, 0x44};

// The i-th state a crashing writer writes under key: 200 to 1000 tokens (about 1.4 to 3 MB with
// the crash layout), its bytes following from key and tokens.
std::vector<int32_t> crash_tokens(uint64_t key, uint64_t i) {
  const uint64_t mix = hash64(&i, sizeof(i), key);
  return some_tokens(200 + static_cast<int64_t>(mix % 801), mix);
}

// The child: writes states over and over, synchronously, until it is killed.
[[noreturn]] void write_until_killed(const fs::path& dir, const model::ModelState& layout,
                                     uint64_t round) {
  try {
    StateStore store(dir, kFingerprint, layout, layout.capacity);
    for (uint64_t i = 0;; ++i) {
      const uint64_t key = kCrashKeys[(round + i) % std::size(kCrashKeys)];
      store.write_now(key, synthetic_state(layout, key, crash_tokens(key, round * 1000 + i)));
    }
  } catch (...) {
  }
  _exit(1);
}

// When to kill the writer: at once, within microseconds (before or as it opens the store), within
// 3 ms (its first write), or within 25 ms (deep into a run of writes).
int64_t kill_delay_us(int round, std::mt19937& rng) {
  constexpr int64_t kRanges[4][2] = {{0, 0}, {1, 100}, {100, 3000}, {3000, 25000}};
  const int64_t* range = kRanges[round % 4];
  return std::uniform_int_distribution<int64_t>(range[0], range[1])(rng);
}

// A writer killed with SIGKILL at any moment (from before it starts to deep into a run of
// multi-megabyte writes; 60 rounds, seeded delays, and longer ones until a write has landed) leaves
// only whole files: the next start keeps
// every .state file there was, each reads back as exactly what was written under its key, and
// no temporary remains.
TEST(StateStoreCrash, KillNineAtAnyMomentLeavesOnlyWholeFiles) {
  ScratchDir dir("kill");
  const model::ModelState layout = synthetic_layout(1024, 256, 1 << 18);  // 2 KB a token + 1 MB
  std::mt19937 rng(20240611);
  int temporaries = 0;
  size_t checked = 0;
  // On a loaded machine no write may land within the delays: up to 10 more rounds, each a
  // quarter second longer, until one has.
  for (int round = 0; round < 60 || (checked == 0 && round < 70); ++round) {
    SCOPED_TRACE(fmt::format("round {}", round));
    const int64_t delay_us = round < 60 ? kill_delay_us(round, rng) : (round - 59) * 250000;
    const pid_t child = ::fork();
    ASSERT_GE(child, 0) << std::strerror(errno);
    if (child == 0) write_until_killed(dir.path(), layout, static_cast<uint64_t>(round));
    if (delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
        << "the writer ended by itself (status " << status << ")";

    size_t files = 0;
    for (const std::string& name : names_in(dir.path())) {
      files += name.ends_with(".state");
      temporaries += name.ends_with(".tmp");
    }
    StateStore store(dir.path(), kFingerprint, layout, layout.capacity);
    const std::vector<StoredState> index = store.take_index();
    EXPECT_EQ(index.size(), files) << "the index removed a file the crash left";
    for (const StoredState& e : index) {
      ASSERT_NE(std::find(std::begin(kCrashKeys), std::end(kCrashKeys), e.key),
                std::end(kCrashKeys));
      try {
        const StateBytes expected = synthetic_state(layout, e.key, e.tokens);
        EXPECT_EQ(difference(*store.read_now(e.key, e.tokens), expected), "") << "key " << e.key;
      } catch (const Error& error) {
        ADD_FAILURE() << "key " << e.key << ": " << error.what();
      }
      ++checked;
    }
    for (const std::string& name : names_in(dir.path()))
      EXPECT_FALSE(name.ends_with(".tmp")) << name;
  }
  EXPECT_GT(checked, 0u);  // some writes landed, so the check checked something
  RecordProperty("kills_that_left_a_temporary", temporaries);
}

// The full-disk child's exit code: 0, or 10 + the check that failed, in this order.
std::string full_disk_failure(int code) {
  constexpr const char* kChecks[] = {
      "setrlimit works",
      "the states lie on either side of the limit",
      "write_now of a state over the limit throws",
      "what it throws is an Error of kind kIo",
      "the failed write_now leaves no file behind",
      "the write job over the limit reports one write with an error",
      "the failed write job leaves no file behind",
      "a small state then writes and reads back",
      "a small write job then reports success",
  };
  if (code == 0) return "";
  if (code >= 10 && code < 10 + static_cast<int>(std::size(kChecks)))
    return fmt::format("failed: {}", kChecks[code - 10]);
  return "the child threw or crashed";
}

int full_disk_child(const fs::path& dir) {
  constexpr rlim_t kLimit = 8192;
  ::signal(SIGXFSZ, SIG_IGN);  // writes past the limit then fail with EFBIG, as on a full disk
  rlimit limit{};
  ::getrlimit(RLIMIT_FSIZE, &limit);
  limit.rlim_cur = kLimit;
  if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 10;
  try {
    const model::ModelState layout = synthetic_layout(256, 16, 64);
    StateStore store(dir, kFingerprint, layout, 256);
    const auto big = std::make_shared<const StateBytes>(synthetic_state(layout, 1, some_tokens(200, 1)));
    const auto small = std::make_shared<const StateBytes>(synthetic_state(layout, 2, some_tokens(4, 2)));
    if (store.file_bytes(200) <= kLimit || store.file_bytes(4) >= kLimit) return 11;
    try {
      store.write_now(1, *big);
      return 12;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kIo) return 13;
    }
    if (!names_in(dir).empty()) return 14;
    store.write(1, big);
    store.flush();
    const std::vector<StateStore::Done> failed = store.poll();
    if (failed.size() != 1 || failed[0].kind != StateStore::Done::Kind::kWrite ||
        failed[0].key != 1 || failed[0].error.empty())
      return 15;
    if (!names_in(dir).empty()) return 16;
    store.write_now(2, *small);
    if (!difference(*store.read_now(2, small->tokens), *small).empty()) return 17;
    store.write(3, small);
    store.flush();
    const std::vector<StateStore::Done> wrote = store.poll();
    if (wrote.size() != 1 || !wrote[0].error.empty()) return 18;
    return 0;
  } catch (...) {
    return 1;
  }
}

// A write the disk has no room for (a file size limit in a child process) fails with kIo, as
// write_now or as a job reporting its error, and leaves neither a temporary nor a file; smaller
// states then still write.
TEST(StateStoreCrash, FullDiskFailsTheWriteCleanlyAndSmallerWritesGoOn) {
  ScratchDir dir("full");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) _exit(full_disk_child(dir.path()));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << full_disk_failure(WEXITSTATUS(status));
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{"0000000000000002.state", "0000000000000003.state"}));
}

// ---- Foreign states ----

// A file written for another model in the same directory is refused on read, now or as a job,
// and the next index of that model removes it.
TEST(StateStoreReject, StateOfAnotherModelIsRefused) {
  auto qwen = test::load_fixture_model("qwen35");
  auto llama = test::load_fixture_model("llama");
  ASSERT_NE(qwen->fingerprint(), llama->fingerprint());
  ScratchDir dir("other-model");
  Sequence sq(*qwen, 32), sl(*llama, 32);
  const std::vector<int32_t> tokens = random_tokens(12, 256, 5);
  HostTensor logits(DType::kF32, {qwen->config().vocab_size});
  sq.forward(*qwen, tokens, logits, false);
  StateStore for_qwen(dir.path(), qwen->fingerprint(), sq.state(), 32);
  StateStore for_llama(dir.path(), llama->fingerprint(), sl.state(), 32);
  for_qwen.write_now(5, state_of(sq));
  test::expect_error([&] { for_llama.read_now(5, tokens); }, ErrorKind::kInvalidInput,
                     {"another model", qwen->fingerprint()});
  for_llama.read(5, tokens);
  const std::vector<StateStore::Done> done = wait_for(for_llama, 1);
  EXPECT_NE(done[0].error.find("another model"), std::string::npos) << done[0].error;
  EXPECT_EQ(done[0].state, nullptr);
  StateStore reopened(dir.path(), llama->fingerprint(), sl.state(), 32);
  EXPECT_TRUE(reopened.take_index().empty());
  EXPECT_FALSE(fs::exists(reopened.path(5)));
}

// The same model with another KV cache type: another directory; and where a file of the other
// type is met anyway, it is refused on read and removed by the index.
TEST(StateStoreReject, StateOfAnotherKvCacheTypeIsRefused) {
  auto load_with = [](model::KvCacheType kv) {
    model::LoadOptions o;
    o.kv_cache = kv;
    return model::load_model(test::test_fixture("models/qwen35"), o);
  };
  auto f32 = load_with(model::KvCacheType::kF32);
  auto bf16 = load_with(model::KvCacheType::kBF16);
  Sequence a(*f32, 32), b(*bf16, 32);
  EXPECT_NE(runtime::state_directory("/cache", f32->fingerprint(), "cpu", 64, a.state()),
            runtime::state_directory("/cache", bf16->fingerprint(), "cpu", 64, b.state()));
  EXPECT_EQ(runtime::state_directory("/cache", f32->fingerprint(), "cpu", 64, a.state()),
            runtime::state_directory("/cache", f32->fingerprint(), "cpu", 64,
                                     Sequence(*f32, 96).state()));  // the capacity is no matter
  EXPECT_NE(runtime::state_directory("/cache", f32->fingerprint(), "cpu", 64, a.state()),
            runtime::state_directory("/cache", f32->fingerprint(), "cpu", 32, a.state()));

  ScratchDir dir("kv-type");
  const std::vector<int32_t> tokens = random_tokens(12, 256, 6);
  HostTensor logits(DType::kF32, {f32->config().vocab_size});
  a.forward(*f32, tokens, logits, false);
  StateStore for_f32(dir.path(), f32->fingerprint(), a.state(), 32);
  StateStore for_bf16(dir.path(), bf16->fingerprint(), b.state(), 32);
  for_f32.write_now(6, state_of(a));
  test::expect_error([&] { for_bf16.read_now(6, tokens); }, ErrorKind::kInvalidInput, {});
  StateStore reopened(dir.path(), bf16->fingerprint(), b.state(), 32);
  EXPECT_TRUE(reopened.take_index().empty());
}

// A file of this fingerprint whose buffers are laid out otherwise, at the same size (BF16 rows
// of twice the width), passes the index (it reads headers only) and is refused on read, naming
// the buffer.
TEST(StateStoreReject, StateOfAnotherLayoutOfTheSameSizeIsRefusedOnRead) {
  ScratchDir dir("layout");
  const model::ModelState f32 = synthetic_layout(64, 16, 100, DType::kF32);
  const model::ModelState bf16 = synthetic_layout(64, 32, 100, DType::kBF16);
  {
    StateStore writer(dir.path(), kFingerprint, f32, 64);
    writer.write_now(7, synthetic_state(f32, 7, some_tokens(9, 7)));
  }
  StateStore reader(dir.path(), kFingerprint, bf16, 64);
  EXPECT_EQ(reader.take_index().size(), 1u);
  test::expect_error([&] { reader.read_now(7, some_tokens(9, 7)); }, ErrorKind::kInvalidInput,
                     {"layers.1.k", "does not match"});
}

// A file holding other tokens than those asked for (another prefix, a shorter or longer one) is
// refused, now or as a job; the right tokens read it.
TEST(StateStoreReject, TokensOtherThanTheFilesAreRefused) {
  ScratchDir dir("tokens");
  const model::ModelState layout = synthetic_layout(64, 16, 100);
  StateStore store(dir.path(), kFingerprint, layout, 64);
  const std::vector<int32_t> tokens = some_tokens(10, 8);
  store.write_now(8, synthetic_state(layout, 8, tokens));
  std::vector<int32_t> changed = tokens, shorter = tokens, longer = tokens;
  changed[9] += 1;
  shorter.pop_back();
  longer.push_back(1);
  for (const std::vector<int32_t>& other : {changed, shorter, longer})
    test::expect_error([&] { store.read_now(8, other); }, ErrorKind::kInvalidInput,
                       {"another prefix"});
  store.read(8, changed);
  store.read(8, tokens);
  const std::vector<StateStore::Done> done = wait_for(store, 2);
  EXPECT_NE(done[0].error.find("another prefix"), std::string::npos) << done[0].error;
  EXPECT_EQ(done[1].error, "");
  ASSERT_NE(done[1].state, nullptr);
  EXPECT_EQ(difference(*done[1].state, synthetic_state(layout, 8, tokens)), "");
}

// ---- Jobs ----

// flush() returns only once every queued write is on disk and reported: poll then reports each
// write once, in order, without error, with its file's size, and each reads back exactly.
TEST(StateStoreJobs, FlushWaitsForQueuedWrites) {
  ScratchDir dir("flush");
  const model::ModelState layout = synthetic_layout(1024, 256, 1 << 16);
  StateStore store(dir.path(), kFingerprint, layout, 1024);
  EXPECT_TRUE(store.poll().empty());
  std::vector<std::shared_ptr<const StateBytes>> states;
  for (uint64_t key = 1; key <= 6; ++key)
    states.push_back(std::make_shared<const StateBytes>(
        synthetic_state(layout, key, some_tokens(500 + 50 * key, key))));
  for (uint64_t key = 1; key <= 6; ++key) store.write(key, states[key - 1]);
  store.flush();
  const std::vector<StateStore::Done> done = store.poll();
  EXPECT_EQ(names_in(dir.path()),
            (std::set<std::string>{"0000000000000001.state", "0000000000000002.state",
                                   "0000000000000003.state", "0000000000000004.state",
                                   "0000000000000005.state", "0000000000000006.state"}));
  ASSERT_EQ(done.size(), 6u);
  for (size_t i = 0; i < done.size(); ++i) {
    EXPECT_EQ(done[i].kind, StateStore::Done::Kind::kWrite);
    EXPECT_EQ(done[i].key, i + 1);  // in the order queued
    EXPECT_EQ(done[i].error, "");
    EXPECT_EQ(done[i].bytes, fs::file_size(store.path(i + 1)));
  }
  for (uint64_t key = 1; key <= 6; ++key)
    EXPECT_EQ(difference(*store.read_now(key, states[key - 1]->tokens), *states[key - 1]), "");
  EXPECT_TRUE(store.poll().empty());
}

// Removals and touches run in order with the writes: a write then a removal leaves nothing, a
// second write of a key replaces the first, and a touched file is the newest at the next start.
TEST(StateStoreJobs, RemoveAndTouchRunInOrderAndTouchMakesAFileTheNewest) {
  ScratchDir dir("remove-touch");
  const model::ModelState layout = synthetic_layout(64, 16, 100);
  auto state = [&](uint64_t key, int64_t n) {
    return std::make_shared<const StateBytes>(synthetic_state(layout, key, some_tokens(n, key)));
  };
  {
    StateStore store(dir.path(), kFingerprint, layout, 64);
    for (uint64_t key : {1, 2, 3}) store.write_now(key, *state(key, 10));
    const auto now = fs::file_time_type::clock::now();
    for (uint64_t key : {1, 2, 3})
      fs::last_write_time(store.path(key), now - std::chrono::seconds(400 - 100 * key));
    store.touch(1);
    store.remove(2);
    store.write(4, state(4, 10));
    store.remove(4);
    store.write(5, state(5, 10));
    store.write(5, state(5, 20));
    store.touch(6);  // no such file: nothing happens
    store.remove(6);
    store.flush();
    EXPECT_EQ(names_in(dir.path()),
              (std::set<std::string>{"0000000000000001.state", "0000000000000003.state",
                                     "0000000000000005.state"}));
    EXPECT_EQ(difference(*store.read_now(5, some_tokens(20, 5)), *state(5, 20)), "");
    fs::last_write_time(store.path(5), now - std::chrono::seconds(500));
  }
  StateStore reopened(dir.path(), kFingerprint, layout, 64);
  std::vector<uint64_t> keys;
  for (const StoredState& e : reopened.take_index()) keys.push_back(e.key);
  EXPECT_EQ(keys, (std::vector<uint64_t>{5, 3, 1}));
}

// A read job reports the state it read, with the file's size; one of a missing file reports an
// error. Nothing finished, wait() says so.
TEST(StateStoreJobs, ReadsReportTheStateOrTheError) {
  ScratchDir dir("reads");
  const model::ModelState layout = synthetic_layout(64, 16, 100);
  StateStore store(dir.path(), kFingerprint, layout, 64);
  EXPECT_FALSE(store.wait(std::chrono::milliseconds(1)));
  const StateBytes state = synthetic_state(layout, 9, some_tokens(30, 9));
  store.write_now(9, state);
  store.read(9, state.tokens);
  store.read(10, state.tokens);
  const std::vector<StateStore::Done> done = wait_for(store, 2);
  EXPECT_EQ(done[0].kind, StateStore::Done::Kind::kRead);
  EXPECT_EQ(done[0].key, 9u);
  EXPECT_EQ(done[0].error, "");
  EXPECT_EQ(done[0].bytes, fs::file_size(store.path(9)));
  ASSERT_NE(done[0].state, nullptr);
  EXPECT_EQ(difference(*done[0].state, state), "");
  EXPECT_EQ(done[1].key, 10u);
  EXPECT_NE(done[1].error.find("cannot open"), std::string::npos) << done[1].error;
  EXPECT_EQ(done[1].state, nullptr);
}

// Destroying a store finishes the writes still queued.
TEST(StateStoreJobs, DestructionFinishesQueuedWrites) {
  ScratchDir dir("destroy");
  const model::ModelState layout = synthetic_layout(1024, 256, 1 << 16);
  {
    StateStore store(dir.path(), kFingerprint, layout, 1024);
    for (uint64_t key = 1; key <= 4; ++key)
      store.write(key, std::make_shared<const StateBytes>(
                           synthetic_state(layout, key, some_tokens(900, key))));
  }
  StateStore reopened(dir.path(), kFingerprint, layout, 1024);
  for (uint64_t key = 1; key <= 4; ++key)
    EXPECT_EQ(difference(*reopened.read_now(key, some_tokens(900, key)),
                         synthetic_state(layout, key, some_tokens(900, key))),
              "");
}

// ---- Compressed files (runtime/state_compression.h) ----

// Written compressed, states of one to several chunks read back exactly, through the index and a
// read job too; a plain writer's files and a compressing one's share a directory, and both kinds
// are indexed and read (prefix_cache_compress may change between runs).
TEST(StateStoreCompressed, ReadBackExactlyBesidePlainFiles) {
  ScratchDir dir("compressed");
  const model::ModelState layout = synthetic_layout(4096, 1024, 1 << 16, DType::kBF16);
  const std::map<uint64_t, int64_t> sizes = {{1, 0}, {2, 7}, {3, 1000}, {4, 3000}};
  {
    StateStore plain(dir.path(), kFingerprint, layout, 4096);
    StateStore packed(dir.path(), kFingerprint, layout, 4096, runtime::HostPages::plain(), /*compress=*/true);
    for (const auto& [key, n] : sizes)
      (key % 2 == 0 ? packed : plain).write_now(key, synthetic_state(layout, key, some_tokens(n, key)));
    for (uint64_t key : {2, 4}) {
      const std::vector<uint8_t> head = file_contents(packed.path(key));
      ASSERT_GE(head.size(), 8u);
      EXPECT_EQ(std::memcmp(head.data(), runtime::kCompressedStateMagic, 8), 0) << key;
    }
    EXPECT_EQ(std::memcmp(file_contents(plain.path(3)).data(), "STRATAST", 8), 0);
  }
  StateStore store(dir.path(), kFingerprint, layout, 4096);
  std::map<uint64_t, std::vector<int32_t>> indexed;
  for (StoredState& e : store.take_index()) indexed[e.key] = e.tokens;
  ASSERT_EQ(indexed.size(), sizes.size());
  for (const auto& [key, n] : sizes) {
    EXPECT_EQ(indexed[key], some_tokens(n, key)) << key;
    EXPECT_EQ(difference(*store.read_now(key, some_tokens(n, key)), synthetic_state(layout, key, some_tokens(n, key))), "")
        << key;
  }
  store.read(4, some_tokens(3000, 4));
  const std::vector<StateStore::Done> done = wait_for(store, 1);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].error, "");
  ASSERT_NE(done[0].state, nullptr);
  EXPECT_EQ(difference(*done[0].state, synthetic_state(layout, 4, some_tokens(3000, 4))), "");
}

// A compressed file with a byte flipped anywhere (header, chunk sizes, chunk data) or cut
// anywhere is refused on read, never loaded and never a crash; cut, the next start removes it.
TEST(StateStoreCompressed, FlippedOrCutFilesAreRefused) {
  ScratchDir dir("compressed-damage");
  const model::ModelState layout = synthetic_layout(4096, 1024, 1 << 12, DType::kBF16);
  StateStore store(dir.path(), kFingerprint, layout, 4096, runtime::HostPages::plain(), /*compress=*/true);
  const std::vector<int32_t> tokens = some_tokens(1500, 9);
  const StateBytes state = synthetic_state(layout, 9, tokens);
  store.write_now(9, state);
  const std::vector<uint8_t> good = file_contents(store.path(9));
  ASSERT_GT(good.size(), size_t{4} << 20);  // two chunks
  std::mt19937 rng(7);
  std::vector<size_t> at = {0, 7, 8, 12, 16, 20, 24, 31, 32, 39, 40, 47, 48, good.size() - 1};
  for (int i = 0; i < 50; ++i) at.push_back(std::uniform_int_distribution<size_t>(0, good.size() - 1)(rng));
  for (const size_t offset : at) {
    SCOPED_TRACE(offset);
    test::write_bytes(store.path(9).string(), std::string(good.begin(), good.end()));
    const uint8_t flipped = good[offset] ^ 0x10;
    patch(store.path(9), offset, &flipped, 1);
    try {
      (void)store.read_now(9, tokens);
      ADD_FAILURE() << "a damaged file was read";
    } catch (const Error& e) {
      EXPECT_TRUE(e.kind() == ErrorKind::kInvalidInput || e.kind() == ErrorKind::kUnsupported) << e.what();
    }
  }
  for (const size_t length : {size_t{0}, size_t{5}, size_t{40}, size_t{100}, good.size() / 2, good.size() - 1}) {
    SCOPED_TRACE(length);
    test::write_bytes(store.path(9).string(), std::string(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)));
    test::expect_error([&] { (void)store.read_now(9, tokens); }, ErrorKind::kInvalidInput, {});
    StateStore again(dir.path(), kFingerprint, layout, 4096);
    EXPECT_TRUE(again.take_index().empty());
    EXPECT_FALSE(fs::exists(store.path(9)));
  }
  test::write_bytes(store.path(9).string(), std::string(good.begin(), good.end()));
  EXPECT_EQ(difference(*store.read_now(9, tokens), state), "");
}

}  // namespace
}  // namespace strata
