// GenerationQueue: the server's door to the engine. A request takes its place (an Admission)
// before its prompt is rendered, so one past the limit costs no rendering or tokenization; its job
// then goes to the runtime's RequestQueue, whose engine thread runs up to --parallel jobs at once
// and the rest in arrival order as slots free up. A job gives its place back as soon as it ends,
// before its result is delivered, so a client that waits for each answer before it sends the
// next request is never refused.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>

#include "runtime/engine.h"
#include "runtime/request_queue.h"

namespace strata::server {

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
  friend class GenerationJob;
  explicit Admission(GenerationQueue* queue) : queue_(queue) {}
  void release();

  GenerationQueue* queue_ = nullptr;
};

// One request's generation. The engine thread calls on_token for each token and then exactly one
// of on_finish / on_error; nothing else is called on the engine thread.
class GenerationJob : public runtime::Work {
 public:
  void on_release() final { place_.release(); }

 private:
  friend class GenerationQueue;
  Admission place_;
};

struct QueueStats {
  runtime::EngineStats engine;  // running and waiting requests, slots, steps, totals
  size_t admitted = 0;          // places held (admitted, not yet ended)
};

class GenerationQueue {
 public:
  // max_jobs: jobs admitted at once (running + waiting); more are refused with 503.
  GenerationQueue(runtime::Engine& engine, size_t max_jobs);
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
  void give_back();  // an admission ends: one place fewer held

  const size_t max_jobs_;
  mutable std::mutex mutex_;
  size_t admitted_ = 0;  // places held: admitted requests not yet queued, waiting and running jobs
  bool closed_ = false;
  runtime::RequestQueue runner_;  // last: its thread stops before the counts above go
};

}  // namespace strata::server
