#include "python/src/operation.h"

#include <utility>

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

Status Operation::wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return status_.has_value(); });
  return *status_;
}

std::optional<Status> Operation::wait_for(Duration limit) const {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, limit, [this] { return status_.has_value(); })) return std::nullopt;
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
