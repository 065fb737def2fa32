// An operation started from Python: a collective in flight on the runtime's loop. Whoever started
// it may wait for it (blocking, with a limit, or by polling) and may ask for callbacks; the
// runtime's loop completes it. Callbacks never run on the loop: they run on the session's
// completion thread (CompletionQueue), so a callback may take the GIL or block without stalling
// the runtime. Plain C++: no Python in it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/status.h"
#include "runtime/time.h"

namespace kf {
class Handle;
}

namespace kf::python {

// A thread that runs functions in the order they are queued. Stopping runs what is queued first.
class CompletionQueue {
 public:
  CompletionQueue();
  ~CompletionQueue();  // stop()
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  void post(std::function<void()> fn);
  void stop();
  // Is the caller the queue's thread? (A callback that waits for its own operation would hang.)
  bool on_queue_thread() const;

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

class Operation {
 public:
  // `what` names it for errors raised before it starts ("allreduce 'grads'").
  Operation(std::string what, std::shared_ptr<CompletionQueue> completions);
  ~Operation();
  Operation(const Operation&) = delete;
  Operation& operator=(const Operation&) = delete;

  const std::string& what() const { return what_; }
  // Once, from any thread (the runtime's loop, or the caller for an operation refused at start).
  void complete(Status status);
  // The call's handle on the runtime (kf::Peer::start), set once by whoever started it, before
  // the operation is shared, and completing only after complete() has run. Where that handle
  // drives, a wait runs the runtime's loop on the waiting thread (Session::wait_for), so a small
  // collective needs no thread to wake, and adopts the handle's status when the call was never
  // started (its peer had left its cluster); elsewhere it sleeps until complete().
  void set_handle(const Handle& handle);

  Status wait();
  // The status once done, or nullopt when `limit` passes first.
  std::optional<Status> wait_for(Duration limit);
  bool ready() const;
  // `fn` runs once the operation is complete, on the completion thread, with its status.
  void then(std::function<void(const Status&)> fn);
  // `release` is destroyed once the operation is complete, on the thread that completes it (the
  // runtime's loop): for letting go of what the operation used, cheaply and without blocking.
  void release_when_done(std::shared_ptr<void> release);

 private:
  // Runs the loop through handle_ until the call is done or `limit` passes (unset: none) or the
  // session closes; completes the operation with the handle's status if nothing did.
  void drive(std::optional<Duration> limit);

  std::string what_;
  std::shared_ptr<CompletionQueue> completions_;
  std::unique_ptr<const Handle> handle_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::optional<Status> status_;
  std::vector<std::function<void(const Status&)>> callbacks_;
  std::vector<std::shared_ptr<void>> held_;  // released on completion
};

using OperationPtr = std::shared_ptr<Operation>;

}  // namespace kf::python
