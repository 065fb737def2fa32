// World time. The runtime never reads a clock of its own: it asks its Executor, whose clock is the
// steady clock in the real world and the simulator's clock in the simulated one.
// C++17: included by world glue.
#pragma once

#include <chrono>
#include <cstdint>

namespace kf {

using Duration = std::chrono::nanoseconds;

// Tag clock for time points measured from the start of a world (process start or simulation t=0).
struct WorldClock {
  using rep = std::int64_t;
  using period = std::nano;
  using duration = Duration;
  using time_point = std::chrono::time_point<WorldClock, Duration>;
  static constexpr bool is_steady = true;
};

using TimePoint = WorldClock::time_point;

inline double to_seconds(Duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace kf
