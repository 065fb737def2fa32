#include "python/src/operation.h"

#include <chrono>
#include <utility>

#include "launch/peer.h"
#include "python/src/session.h"

namespace kf::python {

CompletionQueue::CompletionQueue() : thread_([this] { run(); }) {}

CompletionQueue::~CompletionQueue() {
  stop();
}

void CompletionQueue::post(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
  }
  cv_.notify_one();
}

void CompletionQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable() && !on_queue_thread()) thread_.join();
}

bool CompletionQueue::on_queue_thread() const {
  return std::this_thread::get_id() == thread_.get_id();
}

void CompletionQueue::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to run
    auto fn = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    fn();
    // Destroyed before the lock is taken again: what fn holds may take the GIL to let go of it,
    // and a thread holding the GIL may be posting.
    fn = nullptr;
    lock.lock();
  }
}

Operation::Operation(std::string what, std::shared_ptr<CompletionQueue> completions)
    : what_(std::move(what)), completions_(std::move(completions)) {}

Operation::~Operation() = default;

void Operation::set_handle(const Handle& handle) {
  handle_ = std::make_unique<const Handle>(handle);
}

void Operation::drive(std::optional<Duration> limit) {
  // A handle that does not drive would only spin before it sleeps, as a C++ caller's wait does;
  // on cores shared with the loop's thread the spin cost a small async call from Python more than
  // it saved (docs/performance.md, "From PyTorch"), so that wait sleeps at once.
  if (!handle_ || !handle_->drives()) return;
  // Slices, so that a session closing meanwhile is noticed (its wait_for returns at once then).
  constexpr Duration kSlice = std::chrono::seconds(1);
  const auto end = limit ? std::optional(std::chrono::steady_clock::now() + *limit) : std::nullopt;
  for (;;) {
    Duration slice = kSlice;
    if (end) {
      slice = std::min(
          slice, std::chrono::duration_cast<Duration>(*end - std::chrono::steady_clock::now()));
      if (slice < Duration::zero()) return;
    }
    if (const std::optional<Status> s = Session::wait_for(*handle_, slice)) {
      complete(*s);  // a no-op, unless the call was never started
      return;
    }
    if (Session::closing()) return;
  }
}

void Operation::complete(Status status) {
  std::vector<std::function<void(const Status&)>> callbacks;
  std::vector<std::shared_ptr<void>> held;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_) return;
    status_ = std::move(status);
    callbacks.swap(callbacks_);
    held.swap(held_);
  }
  cv_.notify_all();
  held.clear();
  for (auto& fn : callbacks) {
    completions_->post([fn = std::move(fn), status = *status_] { fn(status); });
  }
}

Status Operation::wait() {
  drive(std::nullopt);
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return status_.has_value(); });
  return *status_;
}

std::optional<Status> Operation::wait_for(Duration limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  drive(limit);
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_until(lock, end, [this] { return status_.has_value(); })) return std::nullopt;
  return *status_;
}

bool Operation::ready() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_.has_value();
}

void Operation::release_when_done(std::shared_ptr<void> release) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!status_) held_.push_back(std::move(release));
}

void Operation::then(std::function<void(const Status&)> fn) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!status_) {
    callbacks_.push_back(std::move(fn));
    return;
  }
  Status status = *status_;
  lock.unlock();
  completions_->post([fn = std::move(fn), status = std::move(status)] { fn(status); });
}

}  // namespace kf::python
