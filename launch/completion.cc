#include "launch/completion.h"

#include <chrono>

namespace kf {

void Completion::set(Status status) {
  status_ = std::move(status);
  done_.store(true, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
  // Under mu_: a sleeper that saw done_ false has either not checked it again under mu_ yet (it
  // will see true) or waits on cv_ already (this wakes it).
  std::lock_guard lock(mu_);
  cv_.notify_all();
}

void Completion::wait() const {
  if (ready()) return;
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [this] { return done_.load(std::memory_order_seq_cst); });
  }
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

bool Completion::wait_for(Duration limit) const {
  if (ready()) return true;
  if (limit <= Duration::zero()) return false;
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  bool done;
  {
    std::unique_lock lock(mu_);
    done = cv_.wait_until(lock, std::chrono::steady_clock::now() + limit,
                          [this] { return done_.load(std::memory_order_seq_cst); });
  }
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
  return done;
}

}  // namespace kf
