// Admission counting in front of the runtime's request queue.
#include "server/generation_queue.h"

#include "server/api_error.h"

namespace strata::server {

GenerationQueue::GenerationQueue(runtime::Engine& engine, size_t max_jobs)
    : max_jobs_(max_jobs), runner_(engine) {}

Admission& Admission::operator=(Admission&& other) noexcept {
  if (this != &other) {
    release();
    queue_ = other.queue_;
    other.queue_ = nullptr;
  }
  return *this;
}

void Admission::release() {
  if (queue_ != nullptr) queue_->give_back();
  queue_ = nullptr;
}

namespace {

[[noreturn]] void shutting_down() {
  throw ApiError(503, "The server is shutting down.", {}, "server_shutting_down", "server_error");
}

}  // namespace

Admission GenerationQueue::admit() {
  std::lock_guard lock(mutex_);
  if (closed_) shutting_down();
  if (admitted_ >= max_jobs_)
    throw ApiError(503,
                   "The server is busy: too many requests are queued. Retry later, or start the "
                   "server with a larger --max-concurrency.",
                   {}, "server_busy", "server_error");
  ++admitted_;
  return Admission(this);
}

void GenerationQueue::give_back() {
  std::lock_guard lock(mutex_);
  --admitted_;
}

void GenerationQueue::submit(Admission admission, std::shared_ptr<GenerationJob> job) {
  job->place_ = std::move(admission);  // given back by the job's on_release
  if (!runner_.submit(job)) {
    job->place_.release();
    shutting_down();
  }
}

void GenerationQueue::close(std::chrono::milliseconds grace) {
  {
    std::lock_guard lock(mutex_);
    closed_ = true;
  }
  runner_.close(grace);
}

QueueStats GenerationQueue::stats() const {
  QueueStats s;
  s.engine = runner_.stats();
  std::lock_guard lock(mutex_);
  s.admitted = admitted_;
  return s;
}

}  // namespace strata::server
