// What a steady run of small collectives allocates. Every allocation is a call into malloc and,
// later, free on the path of an 8-byte allreduce, which busy-polling peers finish in a couple of
// microseconds; the runtime keeps what each operation needs again (its timer, its entry among the
// operations in flight, the mailbox entry of a message that came early, a receive round's
// vector) instead of allocating it anew. This binary replaces the global operator new to count.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <span>
#include <thread>
#include <vector>

#include "launch/peer.h"
#include "net_helpers.h"
#include "real/timer_queue.h"

namespace {
std::atomic<std::uint64_t> g_allocations{0};

// Out of line, so that the compiler does not pair an inlined free with an operator new.
[[gnu::noinline]] void* counted_malloc(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void release(void* p) noexcept {
  std::free(p);
}
}  // namespace

void* operator new(std::size_t n) {
  return counted_malloc(n);
}
void* operator new[](std::size_t n) {
  return counted_malloc(n);
}
void operator delete(void* p) noexcept {
  release(p);
}
void operator delete[](void* p) noexcept {
  release(p);
}
void operator delete(void* p, std::size_t) noexcept {
  release(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  release(p);
}

namespace kf::testing {
namespace {

std::uint64_t allocations() {
  return g_allocations.load(std::memory_order_relaxed);
}

// Each collective sets its deadline's timer and cancels it; a loop also fires timers. Once warm,
// neither allocates.
TEST(SteadyStateAllocations, TimersSetCancelledAndFiredAllocateNothingOnceWarm) {
  TimerQueue timers;
  const TimePoint t0{};
  int fired = 0;
  auto cycle = [&](int i) {
    const auto cancelled = timers.add(t0 + std::chrono::seconds(30), [] {});
    timers.add(t0 + std::chrono::microseconds(i), [&fired] { ++fired; });
    timers.cancel(cancelled);
    auto due = timers.pop_due(t0 + std::chrono::microseconds(i));
    ASSERT_TRUE(due.has_value());
    (*due)();
  };
  for (int i = 0; i < 100; ++i)
    cycle(i);
  const std::uint64_t before = allocations();
  for (int i = 0; i < 10'000; ++i)
    cycle(i);
  EXPECT_EQ(allocations() - before, 0u);
  EXPECT_EQ(fired, 10'100);
  EXPECT_EQ(timers.next_deadline(), TimePoint::max());
}

// Two busy-polling peers of one host (a shared-memory ring each way) allreduce 8 bytes under a
// name of their own, thousands of times. What is left per operation and rank: the caller's
// request and its completion (the loop's task holding the call's closure, the shared completion
// and the operation's callback), the operation itself, its completion posted on the loop, the
// payload it sends and the one it receives: 7. The bound fails a change that brings back a
// per-message allocation (each was one: the timer's nodes and closure, the operation's entry and
// its key, the early message's mailbox entry and queue, the frame's prefix and queue entry, the
// receive round's vector, the call's closure apart from the loop's task). A one-off (a table or
// vector growing) may fall in the measured stretch.
TEST(SteadyStateAllocations, ASmallAllreduceBetweenRingPeersAllocatesAtMostSevenTimesPerRank) {
  const auto base = free_port_base(2);
  ASSERT_NE(base, 0);
  const ClusterSpec cluster = ClusterSpec::local(2, base);
  constexpr int kWarmUp = 500;
  constexpr int kMeasured = 5'000;
  std::barrier sync(2);
  std::atomic<std::uint64_t> start{0}, end{0};
  std::atomic<int> wrong{0};
  auto run = [&](int rank) {
    PeerOptions options;
    options.busy_poll = true;
    Peer peer(WorkerConfig{.cluster = cluster, .rank = rank}, options);
    std::vector<float> x(2);
    auto step = [&](int i) {
      x.assign(2, static_cast<float>(rank + i));
      if (!peer.allreduce(std::span<float>(x), ReduceOp::sum, "grad").ok() ||
          x[0] != static_cast<float>(1 + 2 * i))
        ++wrong;
    };
    for (int i = 0; i < kWarmUp; ++i)
      step(i);
    sync.arrive_and_wait();
    if (rank == 0) start = allocations();
    sync.arrive_and_wait();
    for (int i = 0; i < kMeasured; ++i)
      step(i);
    sync.arrive_and_wait();
    if (rank == 0) end = allocations();
    sync.arrive_and_wait();
  };
  std::thread t([&] { run(1); });
  run(0);
  t.join();
  EXPECT_EQ(wrong, 0);
  const double per_op_and_rank =
      static_cast<double>(end - start) / (2.0 * static_cast<double>(kMeasured));
  RecordProperty("allocations_per_op_and_rank", std::to_string(per_op_and_rank));
  EXPECT_LE(per_op_and_rank, 7.01);
}

}  // namespace
}  // namespace kf::testing
