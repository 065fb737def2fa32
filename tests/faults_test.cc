// A peer that disappears never leaves the others hanging: they get an error naming it, promptly
// when the connection resets and within the timeout when it just goes silent.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <span>
#include <thread>
#include <vector>

#include "harness.h"

namespace kf {
namespace {

using namespace std::chrono_literals;
using testing::run_on_all;

TEST(Faults, LostPeerFailsEveryPendingOperationNamingIt) {
  InprocWorld world(4, {.timeout = 10s, .strategy = StrategyName::ring_rs_ag});
  Buffer buffers[4] = {Buffer(1000, DType::f32), Buffer(1000, DType::f32), Buffer(1000, DType::f32),
                       Buffer(1000, DType::f32)};
  std::vector<std::future<Status>> futures;
  std::vector<std::shared_ptr<std::promise<Status>>> promises;
  // Ranks 0..2 start two collectives each; rank 3 never does and then crashes.
  for (int r = 0; r < 3; ++r) {
    for (const char* name : {"a", "b"}) {
      promises.push_back(std::make_shared<std::promise<Status>>());
      futures.push_back(promises.back()->get_future());
      world.post(r, [p = promises.back(), name, &buffers, r](Engine& e) {
        allreduce(e, {.name = name, .input = buffers[r].view(), .output = buffers[r].view()},
                  [p](Status s) { p->set_value(s); });
      });
    }
  }
  std::this_thread::sleep_for(20ms);
  const auto killed_at = std::chrono::steady_clock::now();
  world.kill(3);
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(20s), std::future_status::ready) << "an operation hung";
    const Status s = f.get();
    EXPECT_EQ(s.code(), ErrorCode::peer_lost) << s.to_string();
    EXPECT_NE(s.message().find("rank 3 (127.0.0.1:10003)"), std::string::npos) << s.message();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - killed_at, 10s);

  // Later operations fail at once instead of waiting for a peer that is gone.
  const auto later = run_on_all(
      world, [&](Engine& e, DoneCallback done) { barrier(e, "after", done); },
      std::chrono::seconds(5));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(later[r].code(), ErrorCode::peer_lost) << later[r].to_string();
  }
}

TEST(Faults, SilentPeerTimesOutWithinTheDeadline) {
  const auto timeout = 500ms;
  InprocWorld world(3, {.timeout = timeout, .strategy = StrategyName::star});
  Buffer buffers[3] = {Buffer(10, DType::i32), Buffer(10, DType::i32), Buffer(10, DType::i32)};
  world.kill(2, /*reset_connections=*/false);  // gone without a word
  const auto start = std::chrono::steady_clock::now();
  const auto statuses = run_on_all(
      world,
      [&](Engine& e, DoneCallback done) {
        allreduce(e,
                  {.name = "stuck",
                   .input = buffers[e.rank()].view(),
                   .output = buffers[e.rank()].view()},
                  done);
      },
      std::chrono::seconds(10));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(statuses[r].code(), ErrorCode::timeout) << statuses[r].to_string();
    EXPECT_NE(statuses[r].message().find("timed out after 0.500s"), std::string::npos)
        << statuses[r].message();
  }
  // The root (rank 0) names what it still waits for.
  EXPECT_NE(statuses[0].message().find("reduce from rank(s) 2"), std::string::npos)
      << statuses[0].message();
  EXPECT_LT(elapsed, 2 * timeout);
}

TEST(Faults, KillMidTransferNeverHangs) {
  // A large allreduce in flight when a peer dies: every survivor completes (ok if it already had
  // everything, else an error), none hangs.
  for (StrategyName s :
       {StrategyName::binary_tree_star, StrategyName::ring_rs_ag, StrategyName::halving_doubling}) {
    InprocWorld world(5, {.chunk_bytes = 64 << 10, .timeout = 5s, .strategy = s});
    std::vector<Buffer> buffers;
    for (int r = 0; r < 5; ++r)
      buffers.emplace_back(std::size_t{4} << 20, DType::f32);
    std::vector<std::shared_ptr<std::promise<Status>>> promises;
    for (int r = 0; r < 5; ++r) {
      promises.push_back(std::make_shared<std::promise<Status>>());
      world.post(r, [p = promises.back(), &buffers, r](Engine& e) {
        allreduce(e, {.name = "big", .input = buffers[r].view(), .output = buffers[r].view()},
                  [p](Status st) { p->set_value(st); });
      });
    }
    std::this_thread::sleep_for(5ms);
    world.kill(2);
    for (int r : {0, 1, 3, 4}) {
      auto f = promises[r]->get_future();
      ASSERT_EQ(f.wait_for(10s), std::future_status::ready)
          << strategy_name(s) << ": rank " << r << " hung";
      const Status st = f.get();
      if (!st.ok()) {
        EXPECT_EQ(st.code(), ErrorCode::peer_lost) << st.to_string();
      }
    }
  }
}

// ---- zero copy: operations lend pieces of the caller's buffers and get them back ----

std::vector<float> iota_floats(std::size_t n, float first) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = first + static_cast<float>(i % 1000);
  return v;
}

TEST(ZeroCopy, TheSenderCompletesOnlyOnceItsPiecesAreRead) {
  // The root broadcasts from the caller's buffer, so it may complete only once the receiver has
  // read it, not when it sent it.
  InprocWorld world(2, {.strategy = StrategyName::star, .remote_hold = 10s}, {.zero_copy = true});
  auto a = iota_floats(1 << 16, 1), b = std::vector<float>(1 << 16, 0);
  std::atomic<bool> receiver_started{false};
  std::promise<bool> root_done;  // whether the receiver had started by then
  world.post(0, [&](Engine& e) {
    const auto v = BufferView::of(std::span<float>(a), DType::f32);
    broadcast(e, {.name = "w", .input = v, .output = v, .root = 0}, [&](Status s) {
      EXPECT_TRUE(s.ok()) << s.to_string();
      root_done.set_value(receiver_started.load());
    });
  });
  std::this_thread::sleep_for(100ms);
  receiver_started = true;
  std::promise<Status> got;
  world.post(1, [&](Engine& e) {
    const auto v = BufferView::of(std::span<float>(b), DType::f32);
    broadcast(e, {.name = "w", .input = v, .output = v, .root = 0},
              [&](Status s) { got.set_value(s); });
  });
  auto done = root_done.get_future();
  ASSERT_EQ(done.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(done.get()) << "the root completed before its buffer was read";
  EXPECT_TRUE(got.get_future().get().ok());
  EXPECT_EQ(a, b);
}

TEST(ZeroCopy, APayloadWaitingForItsOperationIsCopiedOutAfterTheHold) {
  // Nobody takes the root's broadcast for a long while: after remote_hold the receiver copies it
  // out of the root's buffer, so the root completes without waiting for the receiver to start.
  InprocWorld world(2, {.strategy = StrategyName::star, .remote_hold = 20ms}, {.zero_copy = true});
  auto a = iota_floats(1 << 16, 5), b = std::vector<float>(1 << 16, 0);
  std::promise<Status> root_done;
  world.post(0, [&](Engine& e) {
    const auto v = BufferView::of(std::span<float>(a), DType::f32);
    broadcast(e, {.name = "w", .input = v, .output = v, .root = 0},
              [&](Status s) { root_done.set_value(s); });
  });
  auto done = root_done.get_future();
  ASSERT_EQ(done.wait_for(10s), std::future_status::ready) << "the root waited for the receiver";
  EXPECT_TRUE(done.get().ok());
  std::fill(a.begin(), a.end(), -1.0f);  // the caller owns its buffer again
  std::promise<Status> got;
  world.post(1, [&](Engine& e) {
    const auto v = BufferView::of(std::span<float>(b), DType::f32);
    broadcast(e, {.name = "w", .input = v, .output = v, .root = 0},
              [&](Status s) { got.set_value(s); });
  });
  EXPECT_TRUE(got.get_future().get().ok());
  EXPECT_EQ(b, iota_floats(1 << 16, 5));
}

TEST(ZeroCopy, AWithdrawnPayloadFailsItsReaderInsteadOfFeedingItGarbage) {
  // Rank 0's part of a reduce is never read in time: its operation takes the buffer back when its
  // deadline passes (and completes: its own part is done). Rank 1 starts later and must fail
  // rather than fold whatever the buffer holds by then.
  InprocWorld world(2, {.timeout = 200ms, .strategy = StrategyName::star, .remote_hold = 10s},
                    {.zero_copy = true});
  auto a = iota_floats(1 << 16, 1), b = iota_floats(1 << 16, 1), out = std::vector<float>(1 << 16);
  std::promise<Status> leaf_done;
  world.post(0, [&](Engine& e) {
    const auto v = BufferView::of(std::span<float>(a), DType::f32);
    reduce(e, {.name = "r", .input = v, .output = v, .root = 1},
           [&](Status s) { leaf_done.set_value(s); });
  });
  auto done = leaf_done.get_future();
  ASSERT_EQ(done.wait_for(10s), std::future_status::ready);
  EXPECT_TRUE(done.get().ok());
  std::fill(a.begin(), a.end(), -1.0f);
  std::promise<Status> root_done;
  world.post(1, [&](Engine& e) {
    reduce(e,
           {.name = "r",
            .input = BufferView::of(std::span<float>(b), DType::f32),
            .output = BufferView::of(std::span<float>(out), DType::f32),
            .root = 1},
           [&](Status s) { root_done.set_value(s); });
  });
  const Status s = root_done.get_future().get();
  EXPECT_EQ(s.code(), ErrorCode::protocol) << s.to_string();
  EXPECT_NE(s.message().find("took back"), std::string::npos) << s.message();
}

TEST(ZeroCopy, KillMidTransferNeverHangs) {
  for (StrategyName s :
       {StrategyName::binary_tree_star, StrategyName::ring_rs_ag, StrategyName::halving_doubling}) {
    InprocWorld world(5, {.chunk_bytes = 64 << 10, .timeout = 5s, .strategy = s},
                      {.zero_copy = true});
    std::vector<Buffer> buffers;
    for (int r = 0; r < 5; ++r)
      buffers.emplace_back(std::size_t{4} << 20, DType::f32);
    std::vector<std::shared_ptr<std::promise<Status>>> promises;
    for (int r = 0; r < 5; ++r) {
      promises.push_back(std::make_shared<std::promise<Status>>());
      world.post(r, [p = promises.back(), &buffers, r](Engine& e) {
        allreduce(e, {.name = "big", .input = buffers[r].view(), .output = buffers[r].view()},
                  [p](Status st) { p->set_value(st); });
      });
    }
    std::this_thread::sleep_for(5ms);
    world.kill(2);
    for (int r : {0, 1, 3, 4}) {
      auto f = promises[r]->get_future();
      ASSERT_EQ(f.wait_for(10s), std::future_status::ready)
          << strategy_name(s) << ": rank " << r << " hung";
      const Status st = f.get();
      // Lost, also where a piece the dead rank lent could not be read any more.
      if (!st.ok()) {
        EXPECT_EQ(st.code(), ErrorCode::peer_lost) << st.to_string();
      }
    }
  }
}

}  // namespace
}  // namespace kf
