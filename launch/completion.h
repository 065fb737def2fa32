// Completion: the outcome of one asynchronous call, set once on the peer's loop and read by any
// number of waiters on any threads (kf::Handle holds one).
//
// Why not std::promise: its set_value runs under std::call_once, and glibc's pthread_once wakes
// the futex every time, sleepers or not. That is a system call per collective on the hot path of
// a small allreduce, whose waiter usually spins or drives the loop itself and never sleeps. Here
// setting costs a system call only when a waiter sleeps.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "runtime/status.h"
#include "runtime/time.h"

namespace kf {

class Completion {
 public:
  // Once. Publishes `status`, then wakes the sleepers, if any.
  void set(Status status);
  // True once set(): status() may then be read, from any thread.
  bool ready() const { return done_.load(std::memory_order_acquire); }
  const Status& status() const { return status_; }  // only after ready()
  // Sleeps until set() (wait) or until `limit` passes (wait_for: false if it passed first).
  void wait() const;
  bool wait_for(Duration limit) const;

 private:
  Status status_;
  std::atomic<bool> done_{false};
  // Waiters about to sleep or asleep. set() stores done_ and then reads this; a sleeper adds
  // itself and then reads done_ (both sequentially consistent), so one of them sees the other.
  mutable std::atomic<int> sleepers_{0};
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
};

}  // namespace kf
