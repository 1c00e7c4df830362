// StateStore: the prefix cache's disk tier (issue 41). Each cached prefix is one file in this
// model's directory, `<key as 16 hex digits>.state`, in the checked state format
// (runtime/state_format.h): the prefix's tokens, its KV rows and its recurrent state.
//
// Files are written whole or not at all: to `<name>.tmp`, fsynced, renamed over the name, and the
// directory fsynced, so a crash (kill -9, power loss) leaves either the old file, the new one, or a
// temporary that the next start removes. At start the directory is indexed from the files' headers
// alone (magic, version, fingerprint, tokens) and their sizes; a file that is not this model's, of
// another format version, or whose size does not match its header, is logged and removed. Its
// checksum is checked when it is read; a file that fails is reported, and the caller removes it.
//
// Writes and reads run on two threads of their own (a read never waits behind a long write), so
// the engine thread only queues jobs and collects what finished (poll). A write that fails (a full
// disk, an I/O error) removes its temporary and reports the error; serving goes on.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/host_pages.h"
#include "runtime/state_format.h"

namespace strata::runtime {

// A prefix's state as bytes in host memory: its tokens, its KV rows (Sequence::save_kv's layout)
// and its recurrent buffers in the model's order.
struct StateBytes {
  std::vector<int32_t> tokens;
  PagedBytes kv;
  PagedBytes recurrent;
  size_t bytes() const { return kv.size() + recurrent.size(); }
};

// A file found when the store opened.
struct StoredState {
  uint64_t key = 0;
  std::vector<int32_t> tokens;
  uint64_t bytes = 0;  // the file's size
  std::filesystem::file_time_type modified;
};

// The directory a model's cached prefixes live in under `root`: one per model fingerprint, device
// and state layout (prefill chunk, KV and state dtypes), so states that could not give a cold
// run's exact tokens are never even looked at.
std::filesystem::path state_directory(const std::filesystem::path& root, const std::string& fingerprint,
                                      std::string_view device, int64_t chunk, const model::ModelState& layout);

class StateStore {
 public:
  // Opens (creating) `dir` for states of this fingerprint whose buffers are laid out as `layout`'s,
  // at most `max_tokens` tokens each, and indexes it. Reads land in pages of `pages`. compress:
  // files are written compressed (runtime/state_compression.h); both forms are read.
  StateStore(std::filesystem::path dir, std::string fingerprint, const model::ModelState& layout,
             int64_t max_tokens, std::shared_ptr<HostPages> pages = HostPages::plain(), bool compress = false);
  ~StateStore();  // finishes the queued writes, then stops
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  // The valid files found at start, least recently used first. Taken once.
  std::vector<StoredState> take_index() { return std::move(index_); }
  // The bytes of a file holding n tokens (uncompressed: what budgets count).
  uint64_t file_bytes(int64_t n_tokens) const;

  // Jobs, run in the order queued (writes and removals on one thread, reads on another):
  void write(uint64_t key, std::shared_ptr<const StateBytes> state);
  void read(uint64_t key, std::vector<int32_t> tokens);  // checks the tokens are the file's
  void remove(uint64_t key);
  void touch(uint64_t key);  // marks the file used now (its age orders eviction after a restart)

  struct Done {
    enum class Kind { kWrite, kRead } kind = Kind::kWrite;
    uint64_t key = 0;
    std::string error;                  // empty: it worked
    std::shared_ptr<StateBytes> state;  // a read's
    double seconds = 0;
    uint64_t bytes = 0;
  };
  // The writes and reads that finished since the last call.
  std::vector<Done> poll();
  // Waits until a job finished (or the timeout passed); true when one did.
  bool wait(std::chrono::milliseconds timeout);
  // Blocks until every queued write and removal is done (tests, shutdown).
  void flush();

  // Writes `state` as key's file now, on this thread (the write job's body; throws Error).
  void write_now(uint64_t key, const StateBytes& state) const;
  // Reads key's file now, on this thread (the read job's body; throws Error).
  std::shared_ptr<StateBytes> read_now(uint64_t key, const std::vector<int32_t>& tokens) const;
  std::filesystem::path path(uint64_t key) const;

 private:
  struct Job {
    enum class Kind { kWrite, kRead, kRemove, kTouch } kind = Kind::kWrite;
    uint64_t key = 0;
    std::shared_ptr<const StateBytes> state;
    std::vector<int32_t> tokens;
  };
  struct Lane {  // one thread and its queue
    std::deque<Job> jobs;
    bool busy = false;
    std::thread thread;
  };
  void index();
  void run(Lane& lane);
  std::vector<StateSection> sections(int64_t n_tokens) const;

  std::filesystem::path dir_;
  std::string fingerprint_;
  std::vector<StateSection> layout_;  // for 0 tokens
  std::vector<uint64_t> row_bytes_;   // per section: a token's bytes (0: not token-indexed)
  int64_t max_tokens_ = 0;
  std::shared_ptr<HostPages> pages_;
  bool compress_ = false;
  std::vector<StoredState> index_;

  std::mutex mutex_;
  std::condition_variable work_;  // a job was queued (or stop)
  std::condition_variable idle_;  // a job finished
  bool stop_ = false;
  std::vector<Done> done_;
  Lane writes_, reads_;
};

}  // namespace strata::runtime
