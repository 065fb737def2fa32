// Executor: the only source of time and of deferred work for the runtime.
// Every callback runs on the executor's own thread (real world) or inside the simulator's event
// loop (simulated world), so runtime state needs no locks as long as it is touched only there.
// C++17: included by world glue.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>

#include "runtime/time.h"

namespace kf {

class Executor {
 public:
  using Task = std::function<void()>;
  using TimerId = std::uint64_t;

  virtual ~Executor() = default;

  virtual TimePoint now() const = 0;
  // Runs `task` soon, after the tasks already posted. Safe to call from any thread.
  virtual void post(Task task) = 0;
  // Runs `task` once `delay` has passed on this executor's clock. Safe to call from any thread.
  virtual TimerId post_after(Duration delay, Task task) = 0;
  // Runs `task` once this executor's clock reaches `at` (soon, if it has): for a caller that has
  // read the clock already, where a reading is not free (the real world's clock costs tens of
  // nanoseconds).
  virtual TimerId post_at(TimePoint at, Task task) {
    const TimePoint t = now();
    return post_after(at > t ? at - t : Duration::zero(), std::move(task));
  }
  // Drops a timer that has not fired yet; a no-op for one that fired or was never set. Call it
  // from the executor's own thread.
  virtual void cancel(TimerId id) = 0;
};

}  // namespace kf
