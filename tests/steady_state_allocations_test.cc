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
#include <string>
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

enum class Link { ring, tcp };

// Two busy-polling peers allreduce 8 bytes under `name` (empty: the peer's automatic names,
// "kf.allreduce.N"), thousands of times: on one host (a shared-memory ring each way) or on two
// loopback pseudo-hosts (TCP). Returns the allocations per operation and rank; fails the test on
// a wrong sum.
double allocations_per_allreduce(const std::string& name, Link link = Link::ring) {
  const auto base = free_port_base(2);
  EXPECT_NE(base, 0);
  if (base == 0) return 0;
  const ClusterSpec cluster =
      link == Link::ring ? ClusterSpec::local(2, base)
                         : ClusterSpec(0, {},
                                       {PeerID{"127.0.0.1", base},
                                        PeerID{"127.0.0.2", static_cast<std::uint16_t>(base + 1)}});
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
      if (!peer.allreduce(std::span<float>(x), ReduceOp::sum, name).ok() ||
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
  return static_cast<double>(end - start) / (2.0 * static_cast<double>(kMeasured));
}

// What is left per operation and rank: the operation itself, 1. A blocking call whose caller finds
// the loop free starts on the caller's thread, and the engine fills its result in place on the
// caller's stack (Peer::Impl::run_blocking, StatusSlot): no task, shared completion or callback is
// allocated, and no completion is posted back. One that finds the loop's thread holding the loop
// (it takes the loop back after the last driver's linger, which a descheduled caller may outlast
// on a loaded machine) posts its start and allocates those 4 as well: the bound leaves room for a
// few such. No message allocates: its payload (up to Payload::kInlineBytes) and its name (up to
// MessageName::kInlineChars, 24) are held inline. The bound fails a change that brings back a
// per-message allocation (each was one: the timer's nodes and closure, the operation's entry and
// its key, the early message's mailbox entry and queue, the frame's prefix and queue entry, the
// receive round's vector, the call's closure apart from the loop's task, the payload sent and the
// one received, the name's copy on each side), or the posted start of every blocking call. A
// one-off (a table or vector growing) may fall in the measured stretch.
TEST(SteadyStateAllocations, ASmallAllreduceBetweenRingPeersAllocatesOncePerRank) {
  const double per_op_and_rank = allocations_per_allreduce("grad");
  RecordProperty("allocations_per_op_and_rank", std::to_string(per_op_and_rank));
  EXPECT_LE(per_op_and_rank, 1.5);
}

// Between hosts a small message goes to its socket in one write, its prefix encoded on the stack,
// and is read into a buffer kept between rounds: no allocation per message there either.
TEST(SteadyStateAllocations, ASmallAllreduceBetweenTcpPeersAllocatesOncePerRank) {
  const double per_op_and_rank = allocations_per_allreduce("grad", Link::tcp);
  RecordProperty("allocations_per_op_and_rank", std::to_string(per_op_and_rank));
  EXPECT_LE(per_op_and_rank, 1.5);
}

// Names longer than std::string holds inline (15 characters) cost one allocation more, where the
// name is made (here the peer's automatic "kf.allreduce.N"; a caller's own long name is the
// caller's string), and none per message.
TEST(SteadyStateAllocations, LongerNamesCostOneAllocationPerOperationNotPerMessage) {
  const double automatic = allocations_per_allreduce("");
  RecordProperty("automatic_names", std::to_string(automatic));
  EXPECT_LE(automatic, 2.5);
  const std::string long_name(MessageName::kInlineChars, 'g');
  const double named = allocations_per_allreduce(long_name);
  RecordProperty("long_names", std::to_string(named));
  EXPECT_LE(named, 2.5);
}

}  // namespace
}  // namespace kf::testing
