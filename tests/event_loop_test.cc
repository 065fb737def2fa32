#include "transport/real/event_loop.h"

#include <gtest/gtest.h>

#include <atomic>
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
