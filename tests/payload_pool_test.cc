// The payload pool: large payload buffers are reused by size class, from any thread, within its
// bounds; small ones never enter it.
#include "runtime/payload_pool.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "runtime/message.h"

namespace kf {
namespace {

constexpr std::size_t kKiB = 1024;
constexpr std::size_t kMiB = 1024 * kKiB;

TEST(PayloadPool, ClassesRoundUpToAQuarterOfTheirPowerOfTwo) {
  EXPECT_EQ(payload_pool::class_size(64 * kKiB), 64 * kKiB);
  EXPECT_EQ(payload_pool::class_size(64 * kKiB + 1), 80 * kKiB);
  EXPECT_EQ(payload_pool::class_size(1 * kMiB + 54), 1 * kMiB + 256 * kKiB);
  EXPECT_EQ(payload_pool::class_size(1 * kMiB + 768 * kKiB + 1), 2 * kMiB);
  for (std::size_t n = 64 * kKiB; n < 64 * kMiB; n = n * 9 / 7 + 13) {
    const std::size_t c = payload_pool::class_size(n);
    EXPECT_GE(c, n);
    EXPECT_LE(c, n + n / 4) << n;
  }
}

// A received payload, dropped, serves the next one of its class: no fresh block, and so no fresh
// pages to fault in.
TEST(PayloadPool, ADroppedPayloadServesTheNextOfItsClass) {
  const std::byte* first;
  {
    PayloadBytes a(5 * kMiB + 3);
    first = a.data();
  }
  const auto before = payload_pool::stats();
  PayloadBytes b(5 * kMiB + 100);  // the same class
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(payload_pool::stats().hits, before.hits + 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % payload_pool::kAlignment, 0u);
}

TEST(PayloadPool, SmallPayloadsNeverEnterIt) {
  const auto before = payload_pool::stats();
  for (int i = 0; i < 10; ++i) {
    PayloadBytes small(payload_pool::kMinBytes - 1);
    small[0] = std::byte{1};
  }
  const auto after = payload_pool::stats();
  EXPECT_EQ(after.hits + after.misses, before.hits + before.misses);
  EXPECT_EQ(after.cached_bytes, before.cached_bytes);
}

// It keeps at most blocks_per_class blocks of a class; the rest go back to the allocator.
TEST(PayloadPool, ItKeepsAtMostItsBound) {
  const std::size_t n = 3 * kMiB + 1;  // a class no other test uses
  const std::size_t size = payload_pool::class_size(n);
  const std::size_t kept = payload_pool::blocks_per_class(size);
  ASSERT_EQ(kept, payload_pool::kPerClassBytes / size);
  const auto before = payload_pool::stats();
  {
    std::vector<PayloadBytes> many;
    for (std::size_t i = 0; i < kept + 3; ++i)
      many.emplace_back(n);
  }
  const auto after = payload_pool::stats();
  EXPECT_EQ(after.cached_bytes - before.cached_bytes, kept * size);
  EXPECT_LE(after.cached_bytes, payload_pool::kMaxCachedBytes);
}

// Many payloads of a small class in flight at once (a collective in small chunks) all come back
// to the pool, and the next round allocates none of them.
TEST(PayloadPool, ManySmallPayloadsInFlightAreAllKept) {
  const std::size_t n = 320 * 1024 + 8;  // a class no other test uses
  const std::size_t size = payload_pool::class_size(n);
  const std::size_t in_flight = 64;  // 24 MiB: more than kMinPerClass, within kPerClassBytes
  ASSERT_GT(in_flight, payload_pool::kMinPerClass);
  ASSERT_LE(in_flight * size, payload_pool::kPerClassBytes);
  for (int round = 0; round < 2; ++round) {
    const auto before = payload_pool::stats();
    ASSERT_LE(before.cached_bytes + in_flight * size, payload_pool::kMaxCachedBytes)
        << "no room left in the pool for this test";
    {
      std::vector<PayloadBytes> many;
      for (std::size_t i = 0; i < in_flight; ++i)
        many.emplace_back(n);
    }
    const auto after = payload_pool::stats();
    if (round == 1) {
      EXPECT_EQ(after.hits - before.hits, in_flight);
      EXPECT_EQ(after.misses, before.misses);
    }
  }
}

// Payloads are received on one thread and dropped on another: blocks move between threads
// through the pool, each one whole (TSan checks the hand-over).
TEST(PayloadPool, BlocksPassBetweenThreadsIntact) {
  constexpr int kThreads = 4;
  constexpr int kRounds = 300;
  std::vector<std::thread> threads;
  std::vector<int> wrong(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &wrong] {
      for (int r = 0; r < kRounds; ++r) {
        PayloadBytes p(96 * kKiB + static_cast<std::size_t>(r % 7) * kKiB);
        const auto mark = static_cast<std::byte>(t * 31 + r);
        for (auto& b : p)
          b = mark;
        PayloadBytes moved = std::move(p);
        std::thread([&moved, mark, &wrong, t] {  // dropped on another thread
          for (const auto b : moved)
            if (b != mark) {
              ++wrong[static_cast<std::size_t>(t)];
              break;
            }
          PayloadBytes gone = std::move(moved);
        })
            .join();
      }
    });
  }
  for (auto& th : threads)
    th.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(wrong[static_cast<std::size_t>(t)], 0);
}

}  // namespace
}  // namespace kf
