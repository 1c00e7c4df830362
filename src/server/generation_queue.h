// GenerationQueue: the one thread that runs the Engine. HTTP threads submit jobs; the queue runs
// them one at a time in arrival order (FIFO), so no request is lost or interleaved with another,
// and a job cancelled while waiting is skipped. A request takes its place (an Admission) before
// its prompt is rendered, so one past the limit costs no rendering or tokenization; a job gives
// its place back as soon as it ends, before its result is delivered, so a client that waits for
// each answer before it sends the next request is never refused. The runtime's own scheduler may
// later batch them; this stays the server's door to it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/engine.h"

namespace strata::server {

// One request's generation. The engine thread calls on_token for each token and then exactly one
// of on_finish / on_error; nothing else is called on the engine thread.
class GenerationJob {
 public:
  virtual ~GenerationJob() = default;

  // Engine thread. Returns false to stop generating (e.g. a stop string matched).
  virtual bool on_token(int32_t id) = 0;
  // Engine thread, once. A job cancelled before it ran gets an empty kCancelled result.
  virtual void on_finish(const runtime::GenerationResult& result) = 0;
  virtual void on_error(const std::string& message) = 0;

  // Any thread: the engine stops after the token it is computing (its callback sees this).
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

  runtime::GenerationRequest request;

 private:
  std::atomic<bool> cancelled_{false};
};

struct QueueStats {
  size_t waiting = 0;
  size_t running = 0;
  uint64_t finished = 0;   // ran to a stop or length
  uint64_t cancelled = 0;  // by the client (disconnect) or at shutdown
  uint64_t failed = 0;     // the engine threw
  uint64_t prompt_tokens = 0;
  uint64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

class GenerationQueue;

// A place in the queue, held from admission to the end of the job that uses it (or given back
// when no job does, e.g. the request turned out invalid).
class Admission {
 public:
  Admission() = default;
  ~Admission() { release(); }
  Admission(Admission&& other) noexcept : queue_(other.queue_) { other.queue_ = nullptr; }
  Admission& operator=(Admission&& other) noexcept;
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

 private:
  friend class GenerationQueue;
  explicit Admission(GenerationQueue* queue) : queue_(queue) {}
  void release();

  GenerationQueue* queue_ = nullptr;
};

class GenerationQueue {
 public:
  // max_jobs: jobs admitted at once (running + waiting); more are refused with 503.
  GenerationQueue(runtime::Engine& engine, size_t max_jobs);
  ~GenerationQueue();  // cancels whatever is left and joins the engine thread
  GenerationQueue(const GenerationQueue&) = delete;
  GenerationQueue& operator=(const GenerationQueue&) = delete;

  // A place for one more job; throws ApiError 503 (with a retry hint) when the queue is full or
  // closed. Cheap: call it before any work a refused request should not cost.
  Admission admit();
  // Queues the job in the admitted place. Throws ApiError 503 when the queue closed meanwhile.
  void submit(Admission admission, std::shared_ptr<GenerationJob> job);
  // Stops admitting jobs, lets queued and running ones finish for up to `grace`, then cancels the
  // rest (they finish as cancelled). Returns when the queue is empty.
  void close(std::chrono::milliseconds grace);

  QueueStats stats() const;

 private:
  friend class Admission;
  void run();
  void give_back();  // an admission ends: one place fewer held

  runtime::Engine& engine_;
  const size_t max_jobs_;
  size_t admitted_ = 0;  // places held: admitted requests not yet queued, waiting and running jobs
  mutable std::mutex mutex_;
  std::condition_variable wake_;     // the engine thread: a job arrived or closing
  std::condition_variable drained_;  // close(): the queue emptied
  std::deque<std::shared_ptr<GenerationJob>> waiting_;
  std::shared_ptr<GenerationJob> running_;
  bool closed_ = false;
  bool exit_ = false;
  QueueStats stats_;
  std::thread thread_;
};

}  // namespace strata::server
