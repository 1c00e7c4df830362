// RequestQueue: the one thread that runs an Engine for callers on other threads (the server's
// HTTP workers). submit() hands a request over; the thread adds it to the engine, which runs it
// with the others as soon as a slot is free, and steps while anything runs. Every callback of a
// request (runtime::Work) comes on this thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/engine.h"

namespace strata::runtime {

class RequestQueue {
 public:
  explicit RequestQueue(Engine& engine);
  ~RequestQueue();  // cancels whatever is left and joins the thread
  RequestQueue(const RequestQueue&) = delete;
  RequestQueue& operator=(const RequestQueue&) = delete;

  // Hands the request to the engine thread; false (and nothing is called) once closed.
  bool submit(std::shared_ptr<Work> work);
  // Takes no more requests, lets running and waiting ones finish for up to `grace`, then cancels
  // the rest (they finish as cancelled). Returns when the engine is idle.
  void close(std::chrono::milliseconds grace);
  bool closed() const;

  // The engine's counters; requests handed over and not yet added count as waiting.
  EngineStats stats() const;

 private:
  void run();
  bool drained() const;  // under mutex_

  Engine& engine_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;     // the engine thread: a request arrived, or closing
  std::condition_variable drained_;  // close(): the engine went idle
  std::vector<std::shared_ptr<Work>> incoming_;
  bool idle_ = true;  // the engine, as of the thread's last look
  bool closed_ = false;
  bool cancel_ = false;  // close(): the grace is over
  bool exit_ = false;
  std::thread thread_;
};

}  // namespace strata::runtime
