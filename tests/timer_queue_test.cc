// TimerQueue (real/timer_queue.h): the timers of the real world's loops. Order by deadline, ties
// in the order set; cancel by id, an id whose timer fired or was cancelled cancelling nothing
// later; many cancelled timers leaving the live ones as they were; the latest timers (kept apart
// from the rest until there are several) in one order with the others.
#include "real/timer_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

namespace kf {
namespace {

using std::chrono::microseconds;

// Fires everything due at `now`, in order.
void fire_due(TimerQueue& timers, TimePoint now) {
  while (auto task = timers.pop_due(now))
    (*task)();
}

TEST(TimerQueue, FiresByDeadlineAndTiesInTheOrderSet) {
  TimerQueue timers;
  const TimePoint t0{};
  std::vector<int> fired;
  timers.add(t0 + microseconds(30), [&] { fired.push_back(3); });
  timers.add(t0 + microseconds(10), [&] { fired.push_back(1); });
  timers.add(t0 + microseconds(20), [&] { fired.push_back(2); });
  timers.add(t0 + microseconds(10), [&] { fired.push_back(11); });  // tie: after the first 10
  EXPECT_EQ(timers.next_deadline(), t0 + microseconds(10));
  fire_due(timers, t0 + microseconds(15));
  EXPECT_EQ(fired, (std::vector<int>{1, 11}));
  EXPECT_EQ(timers.next_deadline(), t0 + microseconds(20));
  fire_due(timers, t0 + microseconds(100));
  EXPECT_EQ(fired, (std::vector<int>{1, 11, 2, 3}));
  EXPECT_EQ(timers.next_deadline(), TimePoint::max());
  EXPECT_FALSE(timers.pop_due(t0 + microseconds(1000)).has_value());
}

TEST(TimerQueue, ACancelledTimerNeverFiresAndAStaleIdCancelsNothing) {
  TimerQueue timers;
  const TimePoint t0{};
  std::vector<int> fired;
  const auto first = timers.add(t0 + microseconds(10), [&] { fired.push_back(1); });
  EXPECT_NE(first, 0u);  // 0 stays free for callers' "no timer"
  timers.add(t0 + microseconds(20), [&] { fired.push_back(2); });
  timers.cancel(first);
  timers.cancel(first);  // twice: a no-op
  timers.cancel(0);
  EXPECT_EQ(timers.next_deadline(), t0 + microseconds(20));  // the cancelled top is gone
  fire_due(timers, t0 + microseconds(20));
  EXPECT_EQ(fired, (std::vector<int>{2}));
  // Timers set afterwards are not the cancelled one: its id cancels nothing now.
  timers.add(t0 + microseconds(30), [&] { fired.push_back(3); });
  timers.add(t0 + microseconds(40), [&] { fired.push_back(4); });
  timers.cancel(first);
  fire_due(timers, t0 + microseconds(40));
  EXPECT_EQ(fired, (std::vector<int>{2, 3, 4}));
}

// Every collective's deadline is set far ahead and cancelled soon: thousands of cancelled timers
// behind a live one leave it the next deadline, and the live ones still fire, in order.
TEST(TimerQueue, ManyCancelledTimersLeaveTheLiveOnesInOrder) {
  TimerQueue timers;
  const TimePoint t0{};
  std::vector<int> fired;
  timers.add(t0 + microseconds(5), [&] { fired.push_back(-1); });  // keeps the rest off the top
  std::vector<TimerQueue::TimerId> ids;
  for (int i = 0; i < 10'000; ++i) {
    ids.push_back(timers.add(t0 + std::chrono::seconds(30) + microseconds(i),
                             [&fired, i] { fired.push_back(i); }));
  }
  for (int i = 0; i < 10'000; ++i) {
    if (i % 1000 != 0) timers.cancel(ids[static_cast<std::size_t>(i)]);
  }
  EXPECT_EQ(timers.next_deadline(), t0 + microseconds(5));
  fire_due(timers, t0 + std::chrono::seconds(60));
  std::vector<int> expected{-1};
  for (int i = 0; i < 10'000; i += 1000)
    expected.push_back(i);
  EXPECT_EQ(fired, expected);
  EXPECT_EQ(timers.next_deadline(), TimePoint::max());
}

// The last timers set wait apart from the older ones until there are several: set in runs of
// every length, with ties across the two and cancels in both, they fire in the one order
// (deadline, then the order set), and next_deadline always names the earliest left.
TEST(TimerQueue, TheLatestTimersAndTheOlderOnesFireInOneOrder) {
  for (int count = 1; count <= 40; ++count) {
    TimerQueue timers;
    const TimePoint t0{};
    std::vector<int> fired;
    std::vector<std::pair<TimePoint, int>> expected;  // (deadline, i): i is the order set
    std::vector<TimerQueue::TimerId> ids;
    for (int i = 0; i < count; ++i) {
      // Deadlines out of order, with ties (the same deadline every fourth timer).
      const TimePoint at = t0 + microseconds((i * 5) % 4);
      ids.push_back(timers.add(at, [&fired, i] { fired.push_back(i); }));
      expected.emplace_back(at, i);
    }
    for (int i = 0; i < count; i += 3) {  // every third from the first: in the array and the map
      timers.cancel(ids[static_cast<std::size_t>(i)]);
      std::erase_if(expected, [i](const auto& e) { return e.second == i; });
    }
    std::ranges::sort(expected);
    const TimePoint earliest = expected.empty() ? TimePoint::max() : expected.front().first;
    EXPECT_EQ(timers.next_deadline(), earliest) << count << " timers";
    for (const auto& [at, i] : expected) {  // one instant at a time: the queue's next, then it
      EXPECT_EQ(timers.next_deadline(), at) << count << " timers, before " << i;
      auto task = timers.pop_due(at);
      ASSERT_TRUE(task.has_value()) << count << " timers, " << i;
      (*task)();
    }
    std::vector<int> order;
    for (const auto& e : expected)
      order.push_back(e.second);
    EXPECT_EQ(fired, order) << count << " timers";
    EXPECT_EQ(timers.next_deadline(), TimePoint::max());
    EXPECT_FALSE(timers.pop_due(t0 + std::chrono::seconds(1)).has_value());
  }
}

TEST(TimerQueue, TakeHandsOverTheTasksAndEmptiesTheQueue) {
  TimerQueue timers;
  const TimePoint t0{};
  int fired = 0;
  timers.add(t0 + microseconds(1), [&] { ++fired; });
  TimerQueue taken = timers.take();
  EXPECT_EQ(timers.next_deadline(), TimePoint::max());
  EXPECT_FALSE(timers.pop_due(t0 + microseconds(10)).has_value());
  fire_due(taken, t0 + microseconds(10));
  EXPECT_EQ(fired, 1);
}

}  // namespace
}  // namespace kf
