// The engine thread: take what arrived, step while anything runs, sleep otherwise.
#include "runtime/request_queue.h"

#include "core/log.h"

namespace strata::runtime {

RequestQueue::RequestQueue(Engine& engine) : engine_(engine), thread_([this] { run(); }) {}

RequestQueue::~RequestQueue() {
  close(std::chrono::milliseconds(0));
  {
    std::lock_guard lock(mutex_);
    exit_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool RequestQueue::submit(std::shared_ptr<Work> work) {
  {
    std::lock_guard lock(mutex_);
    if (closed_) return false;
    incoming_.push_back(std::move(work));
  }
  wake_.notify_one();
  return true;
}

bool RequestQueue::closed() const {
  std::lock_guard lock(mutex_);
  return closed_;
}

bool RequestQueue::drained() const { return incoming_.empty() && idle_; }

void RequestQueue::close(std::chrono::milliseconds grace) {
  std::unique_lock lock(mutex_);
  closed_ = true;
  drained_.wait_until(lock, std::chrono::steady_clock::now() + grace, [&] { return drained(); });
  cancel_ = true;
  wake_.notify_one();
  drained_.wait(lock, [&] { return drained(); });
}

EngineStats RequestQueue::stats() const {
  EngineStats s = engine_.stats();
  std::lock_guard lock(mutex_);
  s.waiting += static_cast<int64_t>(incoming_.size());
  return s;
}

void RequestQueue::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    for (auto& work : incoming_) engine_.add(std::move(work));
    incoming_.clear();
    if (cancel_) engine_.cancel_all();
    idle_ = engine_.idle();
    if (idle_) {
      drained_.notify_all();
      if (exit_) return;
      wake_.wait(lock, [&] { return exit_ || !incoming_.empty(); });
      continue;
    }
    lock.unlock();
    try {
      engine_.step();
    } catch (const std::exception& e) {
      // Each request's own failures end that request; this is the engine's own (e.g. a device
      // lost): end everything rather than spin on it.
      log::error("engine step failed: {}", e.what());
      engine_.cancel_all();
    }
    lock.lock();
  }
}

}  // namespace strata::runtime
