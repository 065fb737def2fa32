#include "real/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <utility>
#include <vector>

namespace kf {
namespace {

using namespace std::chrono_literals;

TEST(EventLoop, RunsPostedTasksInOrderOnItsThread) {
  EventLoop loop;
  std::vector<int> order;
  for (int i = 0; i < 100; ++i)
    loop.post([&order, i] { order.push_back(i); });
  const bool on_loop = loop.call([&] { return loop.in_loop_thread(); });
  EXPECT_TRUE(on_loop);
  EXPECT_FALSE(loop.in_loop_thread());
  loop.call([] {});
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(order[i], i);
}

TEST(EventLoop, TimersFireByDeadlineAndCanBeCancelled) {
  EventLoop loop;
  std::vector<int> fired;
  std::promise<void> done;
  const auto start = loop.now();
  loop.call([&] {
    loop.post_after(30ms, [&] {
      fired.push_back(3);
      done.set_value();
    });
    loop.post_after(10ms, [&] { fired.push_back(1); });
    const auto doomed = loop.post_after(20ms, [&] { fired.push_back(2); });
    loop.post_after(20ms, [&] { fired.push_back(22); });
    loop.cancel(doomed);
    loop.cancel(12345);  // unknown: harmless
  });
  done.get_future().wait();
  EXPECT_EQ(fired, (std::vector<int>{1, 22, 3}));
  EXPECT_GE(loop.now() - start, 30ms);
}

TEST(EventLoop, ATimerCancelledByTheOneBeforeItNeverFires) {
  // Both are due in the same turn of the loop; the first cancels the second.
  EventLoop loop;
  std::atomic<bool> fired{false};
  Executor::TimerId second = 0;
  std::promise<void> done;
  loop.call([&] {
    loop.post_after(5ms, [&] { loop.cancel(second); });
    second = loop.post_after(5ms, [&] { fired = true; });
    loop.post_after(30ms, [&] { done.set_value(); });
  });
  done.get_future().wait();
  EXPECT_FALSE(fired);
}

TEST(EventLoop, CallReturnsValuesAndExceptions) {
  EventLoop loop;
  EXPECT_EQ(loop.call([] { return 42; }), 42);
  EXPECT_THROW(loop.call([]() -> int { throw std::runtime_error("boom"); }), std::runtime_error);
}

TEST(EventLoop, StopDropsPendingWork) {
  std::atomic<int> ran{0};
  {
    EventLoop loop;
    loop.post_after(1h, [&] { ++ran; });
    loop.stop();
    loop.post([&] { ++ran; });
  }
  EXPECT_EQ(ran, 0);
}

}  // namespace
}  // namespace kf

#include "real/local_compute.h"

namespace kf {
namespace {

TEST(LocalCompute, WaitsOutTheProfiledTimeAndRunsMathOffTheLoop) {
  EventLoop loop;
  LocalCompute compute(loop);
  std::promise<void> done;
  std::atomic<bool> math_on_loop{true};
  const auto start = std::chrono::steady_clock::now();
  loop.post([&] {
    compute.run({.step = 1,
                 .samples = 32,
                 .profiled = 40ms,
                 .numeric = [&] { math_on_loop = loop.in_loop_thread(); }},
                [&] { done.set_value(); });
  });
  done.get_future().wait();
  EXPECT_GE(std::chrono::steady_clock::now() - start, 40ms);
  EXPECT_FALSE(math_on_loop);
}

TEST(LocalCompute, LongMathIsNotPaddedFurther) {
  EventLoop loop;
  LocalCompute compute(loop);
  std::promise<void> done;
  const auto start = std::chrono::steady_clock::now();
  loop.post([&] {
    compute.run({.profiled = 1ms, .numeric = [] { std::this_thread::sleep_for(30ms); }},
                [&] { done.set_value(); });
  });
  done.get_future().wait();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 30ms);
  EXPECT_LT(took, 2s);
}

// Marks run on the loop, in order, each no earlier than its offset, all before done: a bucket
// goes out while the rest of the step is still being waited out.
TEST(LocalCompute, RunsMarksAtTheirOffsetsBeforeDone) {
  EventLoop loop;
  LocalCompute compute(loop);
  std::promise<void> done;
  std::vector<std::pair<std::size_t, std::chrono::steady_clock::duration>> seen;
  bool marks_on_loop = true;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration done_at{};
  loop.post([&] {
    compute.run({.profiled = 60ms,
                 .marks = {10ms, 10ms, 30ms},
                 .at_mark =
                     [&](std::size_t i) {
                       marks_on_loop = marks_on_loop && loop.in_loop_thread();
                       seen.emplace_back(i, std::chrono::steady_clock::now() - start);
                     }},
                [&] {
                  done_at = std::chrono::steady_clock::now() - start;
                  done.set_value();
                });
  });
  done.get_future().wait();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_TRUE(marks_on_loop);
  const std::chrono::milliseconds offsets[] = {10ms, 10ms, 30ms};
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(seen[i].first, i);
    EXPECT_GE(seen[i].second, offsets[i]);
  }
  EXPECT_GE(done_at, 60ms);
  EXPECT_LE(seen[2].second, done_at);
}

// With numeric work a mark also waits for the math, which writes every gradient at once.
TEST(LocalCompute, MarksWaitForTheMath) {
  EventLoop loop;
  LocalCompute compute(loop);
  std::promise<void> done;
  std::atomic<bool> math_done{false};
  bool mark_after_math = false;
  loop.post([&] {
    compute.run({.profiled = 5ms,
                 .numeric =
                     [&] {
                       std::this_thread::sleep_for(30ms);
                       math_done = true;
                     },
                 .marks = {1ms},
                 .at_mark = [&](std::size_t) { mark_after_math = math_done; }},
                [&] { done.set_value(); });
  });
  done.get_future().wait();
  EXPECT_TRUE(mark_after_math);
}

}  // namespace
}  // namespace kf
