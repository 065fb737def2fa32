// kf::Completion, the outcome of one async call behind kf::Handle: set once on one thread, seen
// by spinning and by sleeping waiters on others.
#include "launch/completion.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace kf {
namespace {

using namespace std::chrono_literals;

TEST(Completion, IsNotReadyUntilSetAndThenCarriesTheStatus) {
  Completion c;
  EXPECT_FALSE(c.ready());
  EXPECT_FALSE(c.wait_for(Duration::zero()));
  c.set(Status(ErrorCode::timeout, "too late"));
  EXPECT_TRUE(c.ready());
  EXPECT_TRUE(c.wait_for(Duration::zero()));
  c.wait();
  EXPECT_EQ(c.status().code(), ErrorCode::timeout);
  EXPECT_EQ(c.status().message(), "too late");
}

TEST(Completion, WaitForGivesUpWhenItsLimitPasses) {
  Completion c;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(c.wait_for(std::chrono::milliseconds(30)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
}

// Sleepers of both kinds and spinners, on several threads, all see one set() and its status:
// none is left asleep (the test would hang) and none reads the status before it is written.
TEST(Completion, EveryKindOfWaiterSeesOneSet) {
  for (int round = 0; round < 200; ++round) {
    Completion c;
    std::atomic<int> saw{0};
    std::vector<std::thread> waiters;
    waiters.emplace_back([&] {
      c.wait();
      if (c.status().message() == "done") ++saw;
    });
    waiters.emplace_back([&] {
      if (c.wait_for(std::chrono::seconds(30)) && c.status().message() == "done") ++saw;
    });
    waiters.emplace_back([&] {
      while (!c.ready())
        std::this_thread::yield();
      if (c.status().message() == "done") ++saw;
    });
    if (round % 2 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    c.set(Status(ErrorCode::ok, "done"));
    for (auto& t : waiters)
      t.join();
    ASSERT_EQ(saw, 3) << "round " << round;
  }
}

}  // namespace
}  // namespace kf
