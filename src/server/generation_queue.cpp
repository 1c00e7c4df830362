// The engine thread: pop the oldest job, run it to the end, repeat.
#include "server/generation_queue.h"

#include "core/error.h"
#include "core/log.h"
#include "server/api_error.h"

namespace strata::server {

GenerationQueue::GenerationQueue(runtime::Engine& engine, size_t max_jobs)
    : engine_(engine), max_jobs_(max_jobs), thread_([this] { run(); }) {}

GenerationQueue::~GenerationQueue() {
  close(std::chrono::milliseconds(0));
  {
    std::lock_guard lock(mutex_);
    exit_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

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
  {
    std::lock_guard lock(mutex_);
    if (closed_) shutting_down();
    admission.queue_ = nullptr;  // the place now belongs to the job; run() gives it back
    waiting_.push_back(std::move(job));
    ++stats_.waiting;
  }
  wake_.notify_one();
}

void GenerationQueue::close(std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  closed_ = true;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  drained_.wait_until(lock, deadline, [&] { return waiting_.empty() && !running_; });
  for (auto& job : waiting_) job->cancel();
  if (running_) running_->cancel();
  drained_.wait(lock, [&] { return waiting_.empty() && !running_; });
}

QueueStats GenerationQueue::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void GenerationQueue::run() {
  for (;;) {
    std::shared_ptr<GenerationJob> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return exit_ || !waiting_.empty(); });
      if (waiting_.empty()) return;  // exit_ and nothing left
      job = std::move(waiting_.front());
      waiting_.pop_front();
      --stats_.waiting;
      running_ = job;
      stats_.running = 1;
    }

    runtime::GenerationResult result;
    bool failed = false;
    std::string error;
    if (job->cancelled()) {
      result.finish_reason = runtime::FinishReason::kCancelled;
    } else {
      try {
        result = engine_.generate(
            job->request, [&](int32_t id) { return !job->cancelled() && job->on_token(id); });
      } catch (const std::exception& e) {
        failed = true;
        error = e.what();
        log::error("generation failed: {}", error);
      }
    }
    {
      // Counted, and its place given back, before the job hears of its end: its client may send
      // the next request the moment it has the answer.
      std::lock_guard lock(mutex_);
      running_.reset();
      stats_.running = 0;
      --admitted_;
      if (failed) {
        ++stats_.failed;
      } else {
        if (result.finish_reason == runtime::FinishReason::kCancelled && job->cancelled())
          ++stats_.cancelled;
        else
          ++stats_.finished;
        if (!result.tokens.empty() || result.prefill_seconds > 0)
          stats_.prompt_tokens += job->request.prompt.size();
        stats_.generated_tokens += result.tokens.size();
        stats_.prefill_seconds += result.prefill_seconds;
        stats_.decode_seconds += result.decode_seconds;
      }
    }
    if (failed)
      job->on_error(error);
    else
      job->on_finish(result);
    drained_.notify_all();
  }
}

}  // namespace strata::server
