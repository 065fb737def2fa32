// The flow-level world: the (weighted) max-min solver against hand-computed allocations and
// against a full recompute (the incremental solver must give the same rates), the CUBIC window
// against ns-3's rules, message timing against the model's formula, TCP windows splitting a port
// (losses, timeouts, a host's flows served in turn, round trips queueing only at full ports),
// express messages arriving exactly when every event would have them arrive, and whole
// scenarios: the same engine, deterministic, contention slows steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <random>
#include <sstream>
#include <tuple>

#include "harness.h"
#include "sim/flow/event_queue.h"
#include "sim/flow/flow_network.h"
#include "sim/flow/flow_tcp.h"
#include "sim/flow/flow_world.h"
#include "sim/flow/lane_queue.h"
#include "sim/flow/radix_heap.h"
#include "sim/flow/ring_queue.h"
#include "sim/scenario/scenario.h"
#include "sim/sim_compute.h"
#include "sim/sim_port.h"
#include "sim/simulation.h"
#include "sim/timed_numeric_model.h"

namespace kf {
namespace {

using namespace std::chrono_literals;

// The flow world's clock: events run in time order, those due at one instant in the order they
// were posted (also when posted from inside events), a cancelled event never runs, and a stale id
// (its event ran, its slot reused) cancels nothing.
// A worker slot's port between two engines: what arrives meanwhile is parked, then handed to the
// next engine from the event loop, in arrival order, before anything that arrives after it.
TEST(SimPort, ParksArrivalsUntilAnEngineListensThenHandsThemOverInOrder) {
  std::vector<std::function<void()>> posted;
  SimPort port(
      0, [](int, int, Message&&) {},
      [&posted](std::function<void()> fn) { posted.push_back(std::move(fn)); });
  const auto message = [](std::uint32_t step) {
    Message m;
    m.header.name = "grad/w";
    m.header.step = step;
    return m;
  };
  port.deliver(1, message(0));
  port.deliver(2, message(1));
  std::vector<std::pair<int, std::uint32_t>> got;
  port.set_handlers(
      {.on_message = [&got](int source, Message&& m) { got.emplace_back(source, m.header.step); }});
  EXPECT_TRUE(got.empty()) << "handed over from the event loop, not inside set_handlers";
  port.deliver(3, message(2));  // behind the parked ones
  ASSERT_EQ(posted.size(), 1u);
  posted.front()();
  const std::vector<std::pair<int, std::uint32_t>> want = {{1, 0}, {2, 1}, {3, 2}};
  EXPECT_EQ(got, want);
  port.deliver(1, message(3));  // nothing parked any more: straight to the engine
  EXPECT_EQ(got.size(), 4u);
  port.set_handlers({});
  port.deliver(2, message(4));
  EXPECT_EQ(got.size(), 4u);
}

// The world's handler calls and the runtime's tasks share one order: time, then post order.
// Both worlds time compute with this one class, so its draws decide whether their timelines agree.
TEST(SimCompute, ScalesByStragglerFactorAndAJitterDrawThatDependsOnlyOnSeedAndRank) {
  using std::chrono::nanoseconds;
  const auto delays = [](std::uint64_t seed, int rank, double jitter, double factor, int n) {
    std::vector<std::int64_t> got;
    SimCompute compute(
        [&got](nanoseconds delay, std::function<void()> done) {
          got.push_back(delay.count());
          done();
        },
        seed, rank, jitter);
    compute.factor = factor;
    int numeric = 0, finished = 0;
    for (int i = 0; i < n; ++i) {
      compute.run({.profiled = nanoseconds(1'000'000), .numeric = [&numeric] { ++numeric; }},
                  [&finished] { ++finished; });
    }
    EXPECT_EQ(numeric, n);  // the real math runs, once per work item
    EXPECT_EQ(finished, n);
    return got;
  };
  EXPECT_EQ(delays(1, 0, 0, 1.0, 3), std::vector<std::int64_t>(3, 1'000'000));
  EXPECT_EQ(delays(1, 0, 0, 3.0, 2), std::vector<std::int64_t>(2, 3'000'000));

  const auto a = delays(7, 2, 0.25, 2.0, 400);
  EXPECT_EQ(a, delays(7, 2, 0.25, 2.0, 400));  // reproducible
  EXPECT_NE(a, delays(7, 3, 0.25, 2.0, 400));  // each rank its own draws
  EXPECT_NE(a, delays(8, 2, 0.25, 2.0, 400));  // and each seed
  const auto [low, high] = std::minmax_element(a.begin(), a.end());
  EXPECT_GE(*low, 1'500'000);  // 2 ms x [0.75, 1.25]
  EXPECT_LE(*high, 2'500'000);
  EXPECT_LT(*low, 1'550'000);  // and it spans the range
  EXPECT_GT(*high, 2'450'000);
}

TEST(EventQueue, HandlerCallsAndTasksRunInOneOrder) {
  EventQueue q;
  std::vector<std::pair<std::int64_t, std::uint64_t>> ran;  // (time, event number)
  struct Recorder final : EventQueue::Handler {
    EventQueue* q = nullptr;
    std::vector<std::pair<std::int64_t, std::uint64_t>>* ran = nullptr;
    void fire(std::uint64_t argument) override { ran->emplace_back(q->now_ns(), argument); }
  } recorder;
  recorder.q = &q;
  recorder.ran = &ran;
  std::mt19937 rng(2);
  std::vector<std::int64_t> due;
  for (std::uint64_t i = 0; i < 2000; ++i) {
    const auto at = static_cast<std::int64_t>(rng() % 40);
    due.push_back(at);
    if (rng() % 2 == 0) {
      q.schedule_call(at, recorder, i);
    } else {
      q.schedule_at(at, [&ran, &q, i] { ran.emplace_back(q.now_ns(), i); });
    }
  }
  q.run();
  ASSERT_EQ(ran.size(), 2000u);
  EXPECT_EQ(q.executed(), 2000u);
  for (std::size_t k = 0; k < ran.size(); ++k) {
    EXPECT_EQ(ran[k].first, due[ran[k].second]) << "event " << ran[k].second << " ran off time";
    if (k > 0) {
      ASSERT_LE(ran[k - 1].first, ran[k].first);
      if (ran[k - 1].first == ran[k].first) {
        ASSERT_LT(ran[k - 1].second, ran[k].second) << "same instant: post order";
      }
    }
  }
}

// The radix heap against a binary heap ordered by (time, push number): random monotone pushes
// (times near now, some far ahead, many equal) interleaved with pops and erasures must come out
// in exactly that order. Buckets short enough to be sorted into the run and long ones spread
// over the buckets below both occur, as do pushes into the run.
TEST(RadixHeap, PopsInTimeThenSequenceOrderLikeABinaryHeap) {
  struct Entry {
    std::int64_t at;
    std::uint64_t seq;
    bool operator>(const Entry& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  RadixHeap<Entry> radix;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> reference;
  std::mt19937_64 rng(3);
  std::uint64_t seq = 0;
  std::int64_t now = 0;
  for (int round = 0; round < 200000; ++round) {
    const auto roll = rng() % 100;
    if (roll < 55 || reference.empty()) {
      const std::int64_t delay = roll < 20   ? 0
                                 : roll < 35 ? static_cast<std::int64_t>(rng() % 64)
                                 : roll < 50 ? static_cast<std::int64_t>(rng() % 100000)
                                             : static_cast<std::int64_t>(rng() % (1ull << 40));
      radix.push({now + delay, seq});
      reference.push({now + delay, seq});
      ++seq;
    } else if (roll < 99) {
      const Entry got = radix.pop();
      const Entry want = reference.top();
      reference.pop();
      ASSERT_EQ(got.at, want.at) << "round " << round;
      ASSERT_EQ(got.seq, want.seq) << "round " << round;
      now = got.at;
    } else {
      // Drop the odd sequence numbers from both.
      radix.erase_if([](const Entry& e) { return e.seq % 2 == 1; });
      std::vector<Entry> kept;
      for (; !reference.empty(); reference.pop()) {
        if (reference.top().seq % 2 == 0) kept.push_back(reference.top());
      }
      for (const Entry& e : kept)
        reference.push(e);
    }
    ASSERT_EQ(radix.size(), reference.size());
  }
  EXPECT_THROW(radix.push({now - 1, seq}), std::logic_error);
  radix.push({now, seq});  // the time popped last is allowed
}

// The lane queue against a binary heap ordered by (time, push number): pushes that interleave a
// few sorted sequences (arrivals a fixed transfer time ahead, several kinds), far-future timers,
// zero delays and random ones, with pops and erasures, must come out in exactly that order, and
// the sorted sequences must mostly go to lanes.
TEST(LaneQueue, PopsInTimeThenPushOrderLikeABinaryHeapAndKeepsSortedPushesInLanes) {
  struct Entry {
    std::int64_t at;
    std::uint64_t seq;  // the queue's stamp
    std::uint64_t id;   // the test's push number
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.at != b.at ? a.at > b.at : a.id > b.id;
    }
  };
  LaneQueue<Entry> lanes;
  std::priority_queue<Entry, std::vector<Entry>, Later> reference;
  std::mt19937_64 rng(11);
  std::uint64_t id = 0;
  std::int64_t now = 0;
  const std::int64_t kinds[] = {40'000, 52'000, 61'000, 90'000};
  for (int round = 0; round < 300000; ++round) {
    const auto roll = rng() % 100;
    if (roll < 52 || reference.empty()) {
      const std::int64_t delay = roll < 30   ? kinds[rng() % 4]
                                 : roll < 36 ? 0
                                 : roll < 44 ? static_cast<std::int64_t>(rng() % 100'000)
                                 : roll < 48
                                     ? 30'000'000'000 + static_cast<std::int64_t>(rng() % 64)
                                     : static_cast<std::int64_t>(rng() % 64);
      lanes.push({now + delay, 0, id});
      reference.push({now + delay, 0, id});
      ++id;
    } else if (roll < 99) {
      const Entry* next = lanes.peek_ready();
      ASSERT_NE(next, nullptr);
      const std::uint64_t peeked = next->id;
      const Entry got = lanes.pop();
      const Entry want = reference.top();
      reference.pop();
      ASSERT_EQ(got.id, want.id) << "round " << round;
      ASSERT_EQ(got.at, want.at);
      ASSERT_EQ(peeked, got.id) << "peek_ready() names what pop() returns";
      now = got.at;
    } else {
      lanes.erase_if([](const Entry& e) { return e.id % 3 == 1; });
      std::vector<Entry> kept;
      for (; !reference.empty(); reference.pop()) {
        if (reference.top().id % 3 != 1) kept.push_back(reference.top());
      }
      for (const Entry& e : kept)
        reference.push(e);
    }
    ASSERT_EQ(lanes.size(), reference.size());
  }
  EXPECT_GT(lanes.overflowed(), 0u) << "some pushes fit no lane and wait in the heap";
  EXPECT_LT(lanes.overflowed(), id / 4) << "most pushes fit a lane";
  EXPECT_THROW(lanes.push({now - 1, 0, id}), std::logic_error);
  EXPECT_EQ(lanes.peek_ready() == nullptr, lanes.empty());
}

// A collective arms a timeout far ahead and cancels it when it completes, a moment later: a long
// run must not carry every such dead entry until its time comes.
TEST(EventQueue, DropsCancelledEntriesOnceTheyOutnumberTheLiveOnesAndKeepsTheOrder) {
  EventQueue q;
  std::mt19937 rng(5);
  std::vector<std::pair<std::int64_t, int>> ran;
  std::size_t most_entries = 0;
  int live = 0;
  for (int i = 0; i < 20000; ++i) {
    const auto at = static_cast<std::int64_t>(rng() % 1000);
    if (i % 4 == 0) {
      q.schedule_at(at, [&, i] { ran.emplace_back(q.now_ns(), i); });
      ++live;
    } else {
      const Executor::TimerId timeout =
          q.schedule_at(1'000'000 + at, [&] { ADD_FAILURE() << "a cancelled timeout ran"; });
      q.cancel(timeout);
    }
    most_entries = std::max(most_entries, q.entries());
    EXPECT_EQ(q.pending(), static_cast<std::size_t>(live));
  }
  EXPECT_LE(most_entries, 2 * static_cast<std::size_t>(live) + 257);
  EXPECT_LT(most_entries, 20000u / 2);
  q.run();
  ASSERT_EQ(ran.size(), static_cast<std::size_t>(live));
  for (std::size_t i = 1; i < ran.size(); ++i) {
    ASSERT_LE(ran[i - 1].first, ran[i].first);
    if (ran[i - 1].first == ran[i].first) {
      ASSERT_LT(ran[i - 1].second, ran[i].second);
    }
  }
  EXPECT_EQ(q.entries(), 0u);
}

TEST(EventQueue, RunsInTimeThenPostOrderAndHonoursCancels) {
  EventQueue q;
  std::mt19937 rng(11);
  std::vector<std::pair<std::int64_t, int>> ran;  // (time, event number)
  std::vector<Executor::TimerId> ids;
  std::vector<bool> cancelled;
  int next = 0;
  std::function<void(std::int64_t)> schedule = [&](std::int64_t at) {
    const int number = next++;
    cancelled.push_back(false);
    ids.push_back(q.schedule_at(at, [&, number] {
      ran.emplace_back(q.now_ns(), number);
      // Some events post more, due now or later: they must still run in order.
      if (number % 5 == 0 && next < 3000)
        schedule(q.now_ns() + static_cast<std::int64_t>(rng() % 3));
    }));
  };
  for (int i = 0; i < 1000; ++i)
    schedule(static_cast<std::int64_t>(rng() % 50));
  for (int i = 0; i < 1000; i += 7) {
    q.cancel(ids[static_cast<std::size_t>(i)]);
    cancelled[static_cast<std::size_t>(i)] = true;
  }
  q.run();
  std::size_t expected = 0;
  for (bool c : cancelled)
    expected += c ? 0 : 1;
  ASSERT_EQ(ran.size(), expected);
  for (std::size_t i = 1; i < ran.size(); ++i) {
    ASSERT_LE(ran[i - 1].first, ran[i].first) << "event " << ran[i].second << " ran early";
    if (ran[i - 1].first == ran[i].first) {
      ASSERT_LT(ran[i - 1].second, ran[i].second) << "same instant: post order";
    }
  }
  for (const auto& [at, number] : ran)
    EXPECT_FALSE(cancelled[static_cast<std::size_t>(number)]);
  EXPECT_EQ(q.executed(), ran.size());
  EXPECT_EQ(q.pending(), 0u);

  // A stale id: the last event to run freed its slot, the next event posted takes it (slots are
  // reused last freed first) and must still run when the stale id is cancelled.
  const Executor::TimerId stale = ids[static_cast<std::size_t>(ran.back().second)];
  bool fresh_ran = false;
  q.schedule_at(q.now_ns() + 1, [&] { fresh_ran = true; });
  q.cancel(stale);
  q.run();
  EXPECT_TRUE(fresh_ran);
}

// A connection's queue: first in, first out across wrap-around and growth, indexable from the
// front, truncatable from the back, and what it drops is released at once.
TEST(RingQueue, KeepsOrderAcrossWrapAroundGrowthAndTruncation) {
  RingQueue<std::pair<std::shared_ptr<int>, int>> q;
  std::deque<int> expected;
  std::weak_ptr<int> dropped;
  int next = 0;
  std::mt19937 rng(7);
  for (int round = 0; round < 2000; ++round) {
    const unsigned action = rng() % 7;
    if (action < 4 || q.empty()) {
      q.emplace_back(std::make_shared<int>(next), next);
      expected.push_back(next++);
    } else if (action < 5) {
      ASSERT_EQ(q.front().second, expected.front());
      dropped = q.front().first;
      q.pop_front();
      expected.pop_front();
      EXPECT_TRUE(dropped.expired()) << "a popped element is released at once";
    } else if (action < 6) {
      dropped = q.front().first;
      auto [held, number] = q.take_front();
      EXPECT_EQ(number, expected.front());
      EXPECT_EQ(*held, expected.front());
      expected.pop_front();
      held.reset();
      EXPECT_TRUE(dropped.expired()) << "the queue keeps nothing of a taken element";
    } else {
      const std::size_t keep = q.size() / 2;
      q.truncate(keep);
      expected.resize(keep);
    }
    ASSERT_EQ(q.size(), expected.size());
    for (std::size_t i = 0; i < q.size(); ++i) {
      ASSERT_EQ(q[i].second, expected[i]) << "round " << round << " position " << i;
      ASSERT_EQ(*q[i].first, expected[i]);
    }
  }
}

// ---- max-min fair rates, by hand ----

TEST(FlowNetwork, ABottleneckElsewhereLeavesTheRestToTheOther) {
  FlowNetwork net;
  const int wide = net.add_channel(10), narrow = net.add_channel(4);
  const auto a = net.add_flow({wide, narrow});
  const auto b = net.add_flow({wide});
  EXPECT_DOUBLE_EQ(net.rate(a), 4);
  EXPECT_DOUBLE_EQ(net.rate(b), 6);
  net.remove_flow(a);
  EXPECT_DOUBLE_EQ(net.rate(b), 10);
  ASSERT_EQ(net.changes().size(), 1u);
  EXPECT_EQ(net.changes()[0].flow, b);
  EXPECT_DOUBLE_EQ(net.changes()[0].old_rate, 6);
}

TEST(FlowNetwork, TheParkingLot) {
  // One long flow across three unit links, one short flow on each: everyone gets half.
  FlowNetwork net;
  std::vector<int> links;
  for (int i = 0; i < 3; ++i)
    links.push_back(net.add_channel(1));
  const auto long_flow = net.add_flow(links);
  std::vector<FlowNetwork::FlowId> short_flows;
  for (int l : links)
    short_flows.push_back(net.add_flow({l}));
  EXPECT_DOUBLE_EQ(net.rate(long_flow), 0.5);
  for (auto f : short_flows)
    EXPECT_DOUBLE_EQ(net.rate(f), 0.5);
  // Two short flows on the middle link: the long one gets 1/3 there, the outer shorts 2/3.
  const auto extra = net.add_flow({links[1]});
  EXPECT_NEAR(net.rate(long_flow), 1.0 / 3, 1e-12);
  EXPECT_NEAR(net.rate(extra), 1.0 / 3, 1e-12);
  EXPECT_NEAR(net.rate(short_flows[0]), 2.0 / 3, 1e-12);
  EXPECT_NEAR(net.rate(short_flows[2]), 2.0 / 3, 1e-12);
}

TEST(FlowNetwork, ACappedFlowTakesItsCapAndNoMore) {
  FlowNetwork net;
  const int link = net.add_channel(10);
  const auto paced = net.add_flow({link}, 1);
  const auto greedy = net.add_flow({link});
  EXPECT_DOUBLE_EQ(net.rate(paced), 1);
  EXPECT_DOUBLE_EQ(net.rate(greedy), 9);
  net.set_capacity(link, 1.5);  // now the cap is above the fair share
  EXPECT_DOUBLE_EQ(net.rate(paced), 0.75);
  EXPECT_DOUBLE_EQ(net.rate(greedy), 0.75);
  EXPECT_THROW(net.add_flow(std::vector<int>{}), std::invalid_argument);  // nothing would bound it
  // A route through a channel that does not exist is refused, and leaves the rest as it was.
  EXPECT_THROW(net.add_flow({link, 7}), std::out_of_range);
  EXPECT_THROW(net.add_flow({-1}), std::out_of_range);
  EXPECT_DOUBLE_EQ(net.rate(greedy), 0.75);
  EXPECT_EQ(net.add_flow({link}), greedy + 1) << "a refused flow takes no id";
}

TEST(FlowNetwork, OnlyTheTouchedComponentIsSolved) {
  FlowNetwork net;
  const int a = net.add_channel(1), b = net.add_channel(1);
  const auto fa = net.add_flow({a});
  net.add_flow({b});
  const auto before = net.solved_flows();
  net.add_flow({a});
  EXPECT_EQ(net.solved_flows() - before, 2u);  // the flows on `a`, not the one on `b`
  EXPECT_DOUBLE_EQ(net.rate(fa), 0.5);
}

TEST(FlowNetwork, WeightsSplitAChannelInProportionAndCapsStillHold) {
  FlowNetwork net;
  const int link = net.add_channel(8), narrow = net.add_channel(1);
  const auto a = net.add_flow({link}, FlowNetwork::kUncapped, 1);
  const auto b = net.add_flow({link}, FlowNetwork::kUncapped, 3);
  EXPECT_DOUBLE_EQ(net.rate(a), 2);
  EXPECT_DOUBLE_EQ(net.rate(b), 6);
  net.set_weight(a, 3);
  EXPECT_DOUBLE_EQ(net.rate(a), 4);
  EXPECT_DOUBLE_EQ(net.rate(b), 4);
  ASSERT_EQ(net.changes().size(), 2u);
  // A heavy flow held elsewhere leaves what it cannot use to the light one.
  const auto c = net.add_flow({link, narrow}, FlowNetwork::kUncapped, 100);
  EXPECT_DOUBLE_EQ(net.rate(c), 1);
  EXPECT_DOUBLE_EQ(net.rate(a), 3.5);
  // A cap binds whatever the weight.
  const auto d = net.add_flow({link}, 0.5, 1000);
  EXPECT_DOUBLE_EQ(net.rate(d), 0.5);
  EXPECT_DOUBLE_EQ(net.rate(a), 3.25);
  EXPECT_DOUBLE_EQ(net.weight(b), 3);
  EXPECT_THROW(net.set_weight(a, 0), std::invalid_argument);
  EXPECT_THROW(net.add_flow({link}, FlowNetwork::kUncapped, -1), std::invalid_argument);
  EXPECT_THROW(net.add_flow({link}, FlowNetwork::kUncapped, FlowNetwork::kUncapped),
               std::invalid_argument);
  net.remove_flow(b);
  EXPECT_THROW(net.set_weight(b, 2), std::logic_error);
  // Alone, a flow's weight changes nothing and solves nothing.
  const int solo = net.add_channel(5);
  const auto e = net.add_flow({solo});
  const auto solves = net.solves();
  net.set_weight(e, 7);
  EXPECT_EQ(net.solves(), solves);
  EXPECT_DOUBLE_EQ(net.rate(e), 5);
  EXPECT_TRUE(net.changes().empty());
}

TEST(FlowNetwork, ALoneFlowHoldsItsRouteOutsideTheSolverUntilItBecomesAFlow) {
  FlowNetwork net;
  const int a = net.add_channel(10), b = net.add_channel(4), c = net.add_channel(5);
  const auto solves = net.solves();
  EXPECT_DOUBLE_EQ(net.reserve_alone(std::vector<int>{a, b}), 4);
  EXPECT_EQ(net.solves(), solves + 1);
  EXPECT_TRUE(net.reserved(a) && net.reserved(b) && !net.reserved(c));
  EXPECT_DOUBLE_EQ(net.load(a), 4) << "its rate counts in the load";
  EXPECT_EQ(net.flows_on(a), 0u) << "but it is no flow";
  // Not alone: nothing reserved.
  EXPECT_EQ(net.reserve_alone(std::vector<int>{c, b}), 0);
  EXPECT_FALSE(net.reserved(c));
  const auto on_c = net.add_flow({c});
  EXPECT_EQ(net.reserve_alone(std::vector<int>{c}), 0);
  // What would change its rate is refused until it becomes a flow.
  EXPECT_THROW(net.add_flow({c, a}), std::logic_error);
  EXPECT_THROW(net.set_capacity(b, 1), std::logic_error);
  EXPECT_DOUBLE_EQ(net.rate(on_c), 5);
  EXPECT_DOUBLE_EQ(net.capacity(b), 4);
  net.release_alone(std::vector<int>{a, b});
  EXPECT_FALSE(net.reserved(a) || net.reserved(b));
  EXPECT_DOUBLE_EQ(net.load(a), 0);
  const auto became = net.add_flow({a, b});
  EXPECT_TRUE(net.added_alone());
  EXPECT_DOUBLE_EQ(net.rate(became), 4) << "the rate it had alone";
  net.set_capacity(b, 1);
  EXPECT_DOUBLE_EQ(net.rate(became), 1);
  EXPECT_THROW(net.reserve_alone(std::vector<int>{}), std::invalid_argument);
  EXPECT_THROW(net.reserve_alone(std::vector<int>{7}), std::out_of_range);
}

// Property: after any sequence of starts, ends and capacity changes, the incremental rates equal
// a full recompute over every flow, and changes() names exactly the flows whose rate moved (and
// a started one), with the rates they had: what FlowWorld settles and reschedules.
TEST(FlowNetwork, IncrementalEqualsFullRecomputeOnRandomFlowSets) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const auto uniform = [&rng](int lo, int hi) {
      return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
    };
    FlowNetwork net;
    const int channels = uniform(3, 30);
    for (int c = 0; c < channels; ++c)
      net.add_channel(uniform(1, 100));
    std::vector<FlowNetwork::FlowId> live;
    for (int op = 0; op < 300; ++op) {
      std::map<FlowNetwork::FlowId, double> before;
      for (auto f : live)
        before[f] = net.rate(f);
      const int what = uniform(0, 11);
      if (what == 10 && !live.empty()) {
        // Weights as FlowWorld's TCP windows set them: any positive value.
        const auto i = static_cast<std::size_t>(uniform(0, static_cast<int>(live.size()) - 1));
        net.set_weight(live[i], 0.25 * uniform(1, 40));
      } else if (what == 11) {
        // ... or one weight for every flow on a channel (a host's queue served in turn).
        net.set_weight_on(uniform(0, channels - 1), 0.25 * uniform(1, 40));
      } else if (what < 6 || live.empty()) {
        std::vector<int> route;
        // Up to 9 hops: routes longer than a flow keeps in place, too.
        const int hops = uniform(1, 9);
        for (int h = 0; h < hops; ++h) {
          const int c = uniform(0, channels - 1);
          if (std::find(route.begin(), route.end(), c) == route.end()) route.push_back(c);
        }
        const double cap = uniform(0, 3) == 0 ? uniform(1, 50) : FlowNetwork::kUncapped;
        const double weight = uniform(0, 2) == 0 ? 0.5 * uniform(1, 20) : 1.0;
        live.push_back(net.add_flow(route, cap, weight));
      } else if (what < 9) {
        const auto i = static_cast<std::size_t>(uniform(0, static_cast<int>(live.size()) - 1));
        net.remove_flow(live[i]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else if (what == 9) {
        net.set_capacity(uniform(0, channels - 1), uniform(1, 100));
      }
      const auto full = net.full_solution();
      std::map<FlowNetwork::FlowId, double> moved;  // flow -> its rate before the operation
      for (auto f : live) {
        ASSERT_NEAR(net.rate(f), full[static_cast<std::size_t>(f)],
                    1e-9 * std::max(1.0, full[static_cast<std::size_t>(f)]))
            << "seed " << seed << " op " << op << " flow " << f;
        const auto was = before.find(f);
        const double old_rate = was == before.end() ? 0.0 : was->second;
        if (was == before.end() || net.rate(f) != old_rate) moved[f] = old_rate;
      }
      std::map<FlowNetwork::FlowId, double> reported;
      for (const auto& c : net.changes())
        ASSERT_TRUE(reported.emplace(c.flow, c.old_rate).second) << "seed " << seed << " op " << op;
      ASSERT_EQ(reported, moved) << "seed " << seed << " op " << op;
    }
  }
}

// ---- TCP windows (ns-3 3.37's TcpCubic, fed fluid quantities) ----

constexpr double kSeg = 1448;

TEST(CubicWindow, SlowStartGrowsByWhatIsAcknowledgedUntilHyStartSeesATrain) {
  CubicWindow w(kSeg);
  EXPECT_DOUBLE_EQ(w.cwnd(), 10 * kSeg);
  EXPECT_TRUE(w.slow_start());
  // 1 ms round trip at 10 MB/s: the pipe holds 10,000 bytes, under 16 segments, so HyStart
  // waits for 16 segments before it looks.
  w.acked(0.001, 5 * kSeg, 0.001, 10e6);
  EXPECT_DOUBLE_EQ(w.cwnd(), 15 * kSeg);
  EXPECT_TRUE(w.slow_start());
  w.acked(0.002, 5 * kSeg, 0.001, 10e6);  // 20 segments take 2.9 ms to clock out: > 1 ms
  EXPECT_DOUBLE_EQ(w.cwnd(), 20 * kSeg);
  EXPECT_FALSE(w.slow_start());
  // Before any loss, congestion avoidance adds at least a segment per 20 acknowledged.
  w.acked(0.003, 20 * kSeg, 0.001, 10e6);
  EXPECT_NEAR(w.cwnd(), 21 * kSeg, 1e-6);
}

TEST(CubicWindow, HyStartLeavesSlowStartWhenTheDelayGrowsByItsMinimumOrFourMilliseconds) {
  CubicWindow w(kSeg);
  w.acked(0.001, 10 * kSeg, 0.001, 1e12);  // no train at this rate
  EXPECT_TRUE(w.slow_start());
  w.acked(0.002, 10 * kSeg, 0.0049, 1e12);  // 1 ms + 4 ms is the threshold
  EXPECT_TRUE(w.slow_start());
  w.acked(0.003, 10 * kSeg, 0.0051, 1e12);
  EXPECT_FALSE(w.slow_start());
  EXPECT_DOUBLE_EQ(w.cwnd(), 40 * kSeg);
}

TEST(CubicWindow, ALossKeepsSeventyPercentAndTheCubicClimbsBackToTheOldWindowAfterK) {
  CubicWindow w(kSeg);
  w.acked(0, 90 * kSeg, 0.010, 1e12);
  w.acked(0.01, 1, 0.0201, 1e12);  // delay: out of slow start at 100 segments
  ASSERT_FALSE(w.slow_start());
  w.lost();
  EXPECT_DOUBLE_EQ(w.cwnd(), 70 * kSeg);
  // K = cbrt((100 - 70) / 0.4) = 4.2172 s: below it the window stays under 100 segments.
  const double k = std::cbrt(30 / 0.4);
  double t = 0;
  for (; t < k - 0.5; t += 0.01)
    w.acked(t, 1000 * kSeg, 0.010, 1e12);
  EXPECT_LT(w.cwnd(), 100 * kSeg);
  EXPECT_GT(w.cwnd(), 95 * kSeg);
  for (; t < k + 1; t += 0.01)
    w.acked(t, 1000 * kSeg, 0.010, 1e12);
  EXPECT_GT(w.cwnd(), 100 * kSeg);
  EXPECT_LT(w.cwnd(), 101 * kSeg);
  // Fast convergence: a loss below the last maximum aims the next cubic lower.
  CubicWindow v(kSeg);
  v.acked(0, 90 * kSeg, 0.010, 1e12);
  v.acked(0.01, 1, 0.0201, 1e12);
  v.lost();  // 100 -> 70, last max 100
  v.lost();  // 70 -> 49, last max 70 * 1.7 / 2 = 59.5
  EXPECT_DOUBLE_EQ(v.cwnd(), 49 * kSeg);
  for (double u = 0; u < 10; u += 0.01)
    v.acked(u, 1000 * kSeg, 0.010, 1e12);
  // Past the (closer) origin the cubic rises fast again: above 59.5 after K = 3.0 s.
  EXPECT_GT(v.cwnd(), 60 * kSeg);
  CubicWindow floor(kSeg);
  for (int i = 0; i < 10; ++i)
    floor.lost();
  EXPECT_DOUBLE_EQ(floor.cwnd(), 2 * kSeg);
}

TEST(CubicWindow, ATimeoutStartsOverFromOneSegmentAndSlowStartsToSeventyPercent) {
  CubicWindow w(kSeg);
  w.acked(0, 90 * kSeg, 0.010, 1e12);
  w.acked(0.01, 1, 0.0201, 1e12);  // out of slow start at 100 segments
  w.timed_out();
  EXPECT_DOUBLE_EQ(w.cwnd(), kSeg);
  EXPECT_TRUE(w.slow_start());
  EXPECT_FALSE(std::isfinite(w.min_rtt())) << "HyStart measures its minimum again";
  w.acked(0.5, 100 * kSeg, 0.010, 1e12);  // slow start stops at ssthresh, 70 segments
  EXPECT_DOUBLE_EQ(w.cwnd(), 70 * kSeg + 31 * kSeg / 20);
  EXPECT_FALSE(w.slow_start());
}

// ---- message timing ----

TEST(FlowWorld, AMessageTakesHandshakeLatencyAndSizeOverTheSharedRate) {
  const LinkSpec link{.bandwidth_bps = 1e9, .latency = 10us, .mtu = 1500, .queue_packets = 100};
  FlowWorld world(star_topology(3, 1, link, link));
  std::vector<std::pair<int, TimePoint>> got;
  for (int r = 1; r <= 2; ++r) {
    world.transport(r).set_handlers(
        {.on_message = [&, r](int, Message) { got.emplace_back(r, world.now()); }});
  }
  const std::size_t payload = 1'000'000;
  world.executor().post([&] {
    for (int dst = 1; dst <= 2; ++dst) {
      Message m;
      m.header.name = "x";
      m.payload = Payload::phantom(payload);
      world.transport(0).send(dst, std::move(m));
    }
  });
  world.run();
  ASSERT_EQ(got.size(), 2u);
  // Both share w0's link; payload efficiency 1448 / 1502; the handshake is one round trip over
  // two hops; the last 1448-byte segment is stored and forwarded once at the switch.
  const double bytes = 40 + 1 + static_cast<double>(payload);
  const double rate = 1e9 / 8 * 1448 / 1502 / 2;
  const double want = 40e-6 + bytes / rate + 20e-6 + 1502 * 8 / 1e9;
  for (const auto& [r, at] : got)
    EXPECT_NEAR(to_seconds(at.time_since_epoch()), want, 2e-9) << "rank " << r;
}

// Incast: three senders on three hosts into w0 through the switch's drop-tail port, the later two
// starting 2 ms and 4 ms after the first. Returns each sender's arrival time of its last message.
struct Incast {
  std::vector<double> done;  // by sender 1..3
  FlowStats stats;
  double longest_rtt = 0;  // s: the senders' round trip at its longest (sampled every ms)
};
// With `outbound`, w0 also sends 80 MB to a fifth host, longer than the incast lasts: its ACKs
// come back through the port the incast fills.
Incast incast(bool tcp_windows, std::uint64_t seed, std::uint32_t queue_packets = 50,
              bool outbound = false) {
  const LinkSpec link{
      .bandwidth_bps = 1e9, .latency = 25us, .mtu = 9000, .queue_packets = queue_packets};
  FlowWorld world(star_topology(outbound ? 5 : 4, 1, link, link),
                  {.seed = seed, .tcp_windows = tcp_windows, .tcp_sample_every = 1ms});
  if (outbound) {
    world.executor().post([&world] {
      Message m;
      m.payload = Payload::phantom(80'000'000);
      world.transport(0).send(4, std::move(m));
    });
  }
  Incast out;
  out.done.assign(3, 0);
  world.transport(0).set_handlers({.on_message = [&](int from, Message m) {
    if (m.header.chunk == 9)
      out.done[static_cast<std::size_t>(from - 1)] = to_seconds(world.now().time_since_epoch());
  }});
  for (int r = 1; r <= 3; ++r) {
    world.executor().post_after(std::chrono::milliseconds(2 * (r - 1)), [&world, r] {
      for (std::uint32_t i = 0; i < 10; ++i) {
        Message m;
        m.header.chunk = i;
        m.payload = Payload::phantom(2'000'000);
        world.transport(r).send(0, std::move(m));
      }
    });
  }
  world.run();
  out.stats = world.flow_stats();
  for (const TcpSample& t : world.tcp_samples()) {
    if (t.dst == "w0") out.longest_rtt = std::max(out.longest_rtt, t.srtt_s);
  }
  return out;
}

TEST(FlowWorld, IncastWindowsOverflowThePortAndShareItByWindowNotEqually) {
  const Incast fair = incast(false, 1);
  const Incast cubic = incast(true, 1);
  EXPECT_EQ(fair.stats.tcp_rounds, 0u);
  EXPECT_GT(cubic.stats.tcp_rounds, 100u);
  // 50 packets of 9000 bytes hold 450 kB: the windows overflow it, and back off.
  EXPECT_GT(cubic.stats.tcp_losses, 0u);
  // The port is never idle while any sender has data: the last byte lands when 60 MB have
  // crossed at the port's rate, in both models.
  const double port = 1e9 / 8 * 8948 / 9002;
  const double last_fair = *std::max_element(fair.done.begin(), fair.done.end());
  const double last_cubic = *std::max_element(cubic.done.begin(), cubic.done.end());
  EXPECT_NEAR(last_fair, 60.0e6 / port, 2e-3);
  EXPECT_NEAR(last_cubic, 60.0e6 / port, 2e-3);
  // Equal shares finish the three senders close together (their starts differ by 4 ms, and
  // each got a third of the port once all three ran); windows leave one behind by more.
  const auto spread = [](const std::vector<double>& d) {
    return *std::max_element(d.begin(), d.end()) - *std::min_element(d.begin(), d.end());
  };
  EXPECT_LT(spread(fair.done), 0.0121);
  EXPECT_GT(spread(cubic.done), 0.02);
  // The losses are drawn from the seed: the same seed, the same run.
  EXPECT_EQ(incast(true, 1).done, cubic.done);
  EXPECT_EQ(cubic.stats.tcp_timeouts, 0u) << "50 packets leave room for duplicate ACKs";
}

// The port counts packets: the ACKs of w0's own sending, one per two segments, take slots the
// incast's data would otherwise have. w0's 1 Gbps out brings half as many ACKs as the incast
// brings data packets, so a third of the port's 50 slots hold ACKs: the data queued behind the
// incast's windows, and the round trip it adds (at most 450 kB at the port's rate, 3.6 ms),
// shrink by a third.
TEST(FlowWorld, AcksComingBackThroughAPortTakeItsRoom) {
  const Incast plain = incast(true, 1);
  const Incast busy = incast(true, 1, 50, true);
  const double base = 4 * 25e-6;
  const double port = 1e9 / 8 * 8948 / 9002;
  EXPECT_NEAR(plain.longest_rtt - base, 450e3 / port, 0.2e-3);
  EXPECT_NEAR(busy.longest_rtt - base, 300e3 / port, 0.3e-3);
}

TEST(FlowWorld, APortTooShallowForDuplicateAcksTimesSendersOut) {
  // Three packets: a window that overflows it has too little behind a drop for three duplicate
  // ACKs, so the sender waits out its retransmission timeout (200 ms at least) with nothing sent,
  // and at times no sender has anything on the way: the port idles.
  const Incast shallow = incast(true, 1, 3);
  EXPECT_GT(shallow.stats.tcp_timeouts, 0u);
  const double port = 1e9 / 8 * 8948 / 9002;
  const double last = *std::max_element(shallow.done.begin(), shallow.done.end());
  EXPECT_GT(last, 60.0e6 / port + 0.05);
  const Incast fair = incast(false, 1, 3);
  EXPECT_NEAR(*std::max_element(fair.done.begin(), fair.done.end()), 60.0e6 / port, 2e-3);
}

// Two senders on two hosts into w1: the switch's port into w1 is full, the senders' own links
// are half used. A queue stands only at the full port, so each sender's round trip is its
// window over its rate (Little's law: what it has in flight crosses the path once per round
// trip), and the two windows over their round trips add up to the port's rate. Counting the
// windows' bytes at the half-used links too would halve that sum.
TEST(FlowWorld, RoundTripsCountTheQueueOfTheFullPortOnly) {
  const LinkSpec link{.bandwidth_bps = 1e9, .latency = 25us, .mtu = 9000, .queue_packets = 1000};
  FlowWorld world(star_topology(3, 1, link, link), {.tcp_sample_every = 1ms});
  for (int from : {0, 2}) {
    world.executor().post([&world, from] {
      Message m;
      m.payload = Payload::phantom(30'000'000);
      world.transport(from).send(1, std::move(m));
    });
  }
  world.run();
  std::map<double, std::vector<const TcpSample*>> busy;  // by time: both senders sending
  for (const TcpSample& t : world.tcp_samples()) {
    EXPECT_EQ(t.kind, "job");
    EXPECT_EQ(t.dst, "w1");
    if (t.in_flight_bytes > 0) busy[t.time_s].push_back(&t);
  }
  const double port = 1e9 / 8 * 8948 / 9002;
  int checked = 0;
  for (const auto& [time, senders] : busy) {
    if (senders.size() != 2 || time < 0.01) continue;  // past the handshakes and slow start
    double sum = 0;
    for (const TcpSample* t : senders)
      sum += t->in_flight_bytes / t->srtt_s;
    EXPECT_NEAR(sum / port, 1, 0.01) << "at " << time << " s";
    ++checked;
  }
  EXPECT_GT(checked, 50);
}

TEST(FlowWorld, AHostServesItsFlowsInTurnWhateverTheirWindows) {
  // w0 sends to w1 and w2 at once, then again after w1's connection has grown its window on
  // its own: w0's host queue (lossless, as the ns-3 world's tsq) still splits its link evenly.
  const LinkSpec link{.bandwidth_bps = 1e9, .latency = 10us, .mtu = 1500, .queue_packets = 100};
  FlowWorld world(star_topology(3, 1, link, link));
  std::vector<std::pair<int, double>> got;
  for (int r = 1; r <= 2; ++r) {
    world.transport(r).set_handlers({.on_message = [&, r](int, Message) {
      got.emplace_back(r, to_seconds(world.now().time_since_epoch()));
    }});
  }
  const auto send = [&world](int dst, std::size_t bytes) {
    Message m;
    m.payload = Payload::phantom(bytes);
    world.transport(0).send(dst, std::move(m));
  };
  world.executor().post([&] {
    send(1, 5'000'000);
    send(2, 10'000);
  });
  world.executor().post_after(100ms, [&] {
    send(1, 1'000'000);
    send(2, 1'000'000);
  });
  world.run();
  ASSERT_EQ(got.size(), 4u);
  EXPECT_NEAR(got[2].second, got[3].second, 1e-9) << "the two shared w0's link evenly";
  EXPECT_NEAR(got[2].second - 0.1, 2 * 1'000'040 / (1e9 / 8 * 1448 / 1502), 1e-4);
}

TEST(FlowWorld, MessagesOfOnePairArriveInOrder) {
  const LinkSpec link{.bandwidth_bps = 1e9, .latency = 10us, .mtu = 9000, .queue_packets = 100};
  FlowWorld world(star_topology(2, 1, link, link));
  std::vector<std::uint32_t> order;
  world.transport(1).set_handlers(
      {.on_message = [&](int, Message m) { order.push_back(m.header.chunk); }});
  world.executor().post([&] {
    for (std::uint32_t i = 0; i < 50; ++i) {
      Message m;
      m.header.chunk = i;
      m.payload = Payload::phantom(i % 3 == 0 ? 100000 : 10);
      world.transport(0).send(1, std::move(m));
    }
  });
  world.run();
  ASSERT_EQ(order.size(), 50u);
  for (std::uint32_t i = 0; i < 50; ++i)
    EXPECT_EQ(order[i], i);
}

// Random traffic over a leaf-spine: chains of messages hop from worker to worker (each arrival
// sends the next, around all workers but the last, as a ring does: the express path) while
// random sends join their links, background flows come and go, one link changes bandwidth and
// another latency every millisecond, and the last worker fails. Returns every arrival (time ns,
// source, destination, message id), the peers lost, the events run and (but for a lone chain)
// every TCP sender's state every 250 us.
struct Traffic {
  std::vector<std::tuple<std::int64_t, int, int, std::uint32_t>> arrivals;
  std::vector<std::tuple<double, std::string, std::string, std::uint32_t, std::uint32_t, double,
                         std::uint32_t, std::uint64_t>>
      samples;
  std::uint64_t events = 0;
  std::uint64_t lost = 0;
};
Traffic random_traffic(bool express, std::uint64_t seed, int messages = 150) {
  // Long links: a message's last byte leaves well before it arrives, and other flows start in
  // between.
  const LinkSpec link{.bandwidth_bps = 1e9, .latency = 300us, .mtu = 9000, .queue_packets = 100};
  const LinkSpec uplink{.bandwidth_bps = 2e9, .latency = 300us, .mtu = 9000, .queue_packets = 100};
  const PhysicalTopology topo = leaf_spine_topology(2, 2, 3, 1, link, uplink, link);
  FlowWorld world(
      topo,
      {.seed = seed, .tcp_sample_every = messages > 1 ? 250us : 0us, .express_messages = express});
  const int n = world.workers();
  Traffic out;
  std::mt19937_64 rng(seed);
  const std::size_t sizes[] = {300, 20'000, 300'000, 2'000'000};
  std::uint32_t next_id = 0;
  const auto send = [&world](int src, int dst, std::uint32_t id, std::uint32_t hops,
                             std::size_t bytes) {
    Message m;
    m.header.name = "t";
    m.header.chunk = id;
    m.header.step = hops;
    m.payload = Payload::phantom(bytes);
    world.transport(src).send(dst, std::move(m));
  };
  for (int r = 0; r < n; ++r) {
    world.transport(r).set_handlers({
        .on_message =
            [&, r](int from, Message m) {
              out.arrivals.emplace_back(world.now().time_since_epoch().count(), from, r,
                                        m.header.chunk);
              if (m.header.step > 0)
                send(r, (r + 1) % (n - 1), m.header.chunk, m.header.step - 1, m.payload.size());
            },
        .on_peer_lost = [&](int, Status) { ++out.lost; },
    });
  }
  for (int i = 0; i < messages; ++i) {
    const auto at = std::chrono::nanoseconds(rng() % 40'000'000);
    const int src = static_cast<int>(rng() % static_cast<std::uint64_t>(n));
    const int dst = (src + 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(n - 1))) % n;
    const bool chain = i % 3 == 0;
    const std::size_t bytes = sizes[rng() % (chain ? 3 : 4)];
    const std::uint32_t hops = chain ? 30 : 0;
    const std::uint32_t id = next_id++;
    world.executor().post_after(
        at, [&send, src, dst, id, hops, bytes] { send(src, dst, id, hops, bytes); });
  }
  // Often, so that some land while a message's last byte has left and it has not arrived. (Not
  // for a lone message.)
  for (int k = 0; k < (messages > 1 ? 40 : 0); ++k) {
    const auto at = std::chrono::microseconds(1000 * k + 350);
    world.executor().post_after(at, [&world, k] {
      world.set_link("w1-leaf0", k % 2 == 0 ? 0.6e9 : 1e9, std::nullopt);
      world.set_link("w2-leaf0", std::nullopt, k % 2 == 0 ? 200us : 300us);
    });
    if (k % 4 == 0) {
      world.executor().post_after(at, [&world, k] {
        const int id =
            world.start_background(k % 8 == 0 ? "w0" : "w3", k % 8 == 0 ? "w4" : "w1", {}, 1);
        world.executor().post_after(1500us, [&world, id] { world.stop_background(id); });
      });
    }
  }
  if (messages > 1) world.executor().post_after(30ms, [&] { world.fail(5); });
  world.run();
  out.events = world.stats().simulator_events;
  std::sort(out.arrivals.begin(), out.arrivals.end());
  for (const TcpSample& t : world.tcp_samples()) {
    out.samples.emplace_back(t.time_s, t.src, t.dst, t.cwnd_bytes, t.ssthresh_bytes, t.srtt_s,
                             t.in_flight_bytes, t.acked_bytes);
  }
  return out;
}

TEST(FlowWorld, ExpressMessagesArriveWhenEveryEventWouldHaveThemArriveWithFewerEvents) {
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const Traffic reference = random_traffic(false, seed);
    const Traffic express = random_traffic(true, seed);
    EXPECT_GT(reference.arrivals.size(), 1000u) << "seed " << seed;
    EXPECT_GT(reference.lost, 0u) << "the failure is seen";
    EXPECT_EQ(express.arrivals, reference.arrivals) << "seed " << seed;
    EXPECT_EQ(express.lost, reference.lost) << "seed " << seed;
    EXPECT_GT(reference.samples.size(), 1000u);
    EXPECT_EQ(express.samples, reference.samples) << "seed " << seed;
  }
  // One chain alone (the first message is one): every hop but the first, which waits for its
  // connection's handshake, is express.
  const Traffic reference = random_traffic(false, 1, 1);
  const Traffic express = random_traffic(true, 1, 1);
  ASSERT_EQ(reference.arrivals.size(), 31u);
  EXPECT_EQ(express.arrivals, reference.arrivals);
  EXPECT_LT(express.events, reference.events * 3 / 4);
}

// One 300 kB message from w0 to w1 over 300 us links: its handshake takes 1.2 ms, its last byte
// leaves about 2.5 ms later, and it arrives 0.6 ms after that. Something else happens at `at`:
// w1's link gets a new latency, a background flow starts from w0, or w0 fails. Returns what w1
// and w2 saw: arrival times, and -1 for each peer lost.
enum class Meanwhile { latency, background, sender_fails };
std::vector<std::int64_t> lone_message(bool express, Meanwhile what, std::chrono::nanoseconds at) {
  const LinkSpec link{.bandwidth_bps = 1e9, .latency = 300us, .mtu = 9000, .queue_packets = 100};
  FlowWorld world(star_topology(3, 1, link, link), {.express_messages = express});
  std::vector<std::int64_t> got;
  for (int r = 1; r <= 2; ++r) {
    world.transport(r).set_handlers({
        .on_message = [&](int, Message) { got.push_back(world.now().time_since_epoch().count()); },
        .on_peer_lost = [&](int, Status) { got.push_back(-1); },
    });
  }
  world.executor().post([&world] {
    Message m;
    m.payload = Payload::phantom(300'000);
    world.transport(0).send(1, std::move(m));
  });
  world.executor().post_after(at, [&world, what] {
    switch (what) {
      case Meanwhile::latency:
        world.set_link("w1-switch", std::nullopt, 100us);
        break;
      case Meanwhile::background: {
        const int id = world.start_background("w0", "w2", {}, 1);
        world.executor().post_after(1ms, [&world, id] { world.stop_background(id); });
        break;
      }
      case Meanwhile::sender_fails:
        world.fail(0);
        break;
    }
  });
  world.run();
  return got;
}

TEST(FlowWorld, AnExpressMessageMeetsWhatHappensBeforeItsLastByteLeavesOrBeforeItArrives) {
  // While it is sent (2 ms), and once its last byte left but before it arrived (4 ms).
  for (const auto at : {2ms, 4ms}) {
    for (const Meanwhile what :
         {Meanwhile::latency, Meanwhile::background, Meanwhile::sender_fails}) {
      const auto reference = lone_message(false, what, at);
      EXPECT_FALSE(reference.empty());
      EXPECT_EQ(lone_message(true, what, at), reference)
          << "at " << at.count() << " ms, case " << static_cast<int>(what);
    }
  }
}

// ---- shaped links: a fluid token bucket ----

// Sends one message of each payload size from w0 to w1 (the first at 0, each after the previous
// arrived plus `idle`) over a 2-host star; returns each message's time in flight.
// `bandwidth_change` is first given to w0's link, as a link-change event would.
std::vector<double> shaped_transfers(const LinkSpec& link, const std::vector<std::size_t>& sizes,
                                     std::chrono::nanoseconds idle,
                                     std::optional<double> bandwidth_change = std::nullopt) {
  FlowWorld world(star_topology(2, 1, link, link));
  if (bandwidth_change) world.set_link("w0-switch", bandwidth_change, std::nullopt);
  std::vector<double> took;
  TimePoint sent_at{};
  std::size_t next = 0;
  std::function<void()> send_next = [&] {
    sent_at = world.now();
    Message m;
    m.header.name = "x";
    m.payload = Payload::phantom(sizes[next++]);
    world.transport(0).send(1, std::move(m));
  };
  world.transport(1).set_handlers({.on_message = [&](int, Message) {
    took.push_back(to_seconds(world.now() - sent_at));
    if (next < sizes.size()) world.executor().post_after(idle, send_next);
  }});
  world.executor().post(send_next);
  world.run();
  return took;
}

TEST(FlowWorld, AShapedLinkBurstsItsBucketAtTheLineRateThenHoldsItsRate) {
  const LinkSpec plain{.bandwidth_bps = 1e9, .latency = 10us, .mtu = 1500, .queue_packets = 100};
  LinkSpec shaped = plain;
  shaped.burst_bytes = 256 << 10;
  shaped.line_rate_bps = 40e9;
  const double efficiency = 1448.0 / 1502;
  const double rate = 1e9 / 8 * efficiency, line = 40e9 / 8 * efficiency;
  const double depth = (256 << 10) * efficiency;
  const double fixed = 40e-6 + 20e-6 + 1502 * 8 / 1e9;  // handshake, latency, store and forward
  const double handshake = 40e-6;

  // 20 MB from idle: line rate until the bucket is spent (it drains at line - rate), then rate.
  const double big = 40 + 1 + 20e6;
  const double burst_s = depth / (line - rate);
  const auto cold = shaped_transfers(shaped, {20'000'000}, 0ns);
  ASSERT_EQ(cold.size(), 1u);
  EXPECT_NEAR(cold[0], fixed + burst_s + (big - line * burst_s) / rate, 1e-6);
  EXPECT_NEAR(shaped_transfers(plain, {20'000'000}, 0ns)[0], fixed + big / rate, 1e-6);
  // A link change sets w0's bucket's rate to half, not its wire's: that bucket, draining faster,
  // runs out first, and the rest goes at the new rate.
  const double half_burst_s = depth / (line - rate / 2);
  EXPECT_NEAR(shaped_transfers(shaped, {20'000'000}, 0ns, 0.5e9)[0],
              fixed + half_burst_s + (big - line * half_burst_s) / (rate / 2), 1e-6);

  // 200 KB fit in the bucket: at the line rate, where a plain wire takes 1.66 ms. Right after a
  // bulk transfer (no idle) the bucket is empty and they take as long as on the plain wire;
  // 10 ms of idle refill it (2.1 ms would do). The connection is open by then: no handshake.
  const double small = 40 + 1 + 200e3;
  const auto runs = shaped_transfers(shaped, {20'000'000, 200'000, 200'000}, 0ns);
  ASSERT_EQ(runs.size(), 3u);
  // (The bucket refills for the 32 us the last bytes take to arrive: a few KB at line rate.)
  EXPECT_NEAR(runs[1], fixed - handshake + small / rate, 0.03 * small / rate);
  EXPECT_NEAR(runs[2], fixed - handshake + small / rate, 0.03 * small / rate);
  const auto rested = shaped_transfers(shaped, {20'000'000, 200'000}, 10ms);
  ASSERT_EQ(rested.size(), 2u);
  EXPECT_NEAR(rested[1], fixed - handshake + small / line, 1e-6);
}

// ---- whole scenarios ----

const char* kScenario = R"(
name: flow-small
seed: 5
steps: 8
world: flow
topology:
  kind: star
  hosts: 4
  workers_per_host: 2
  link: {bandwidth: 1Gbps, latency: 20us, mtu: 9000, queue: 200}
workload: {model: resnet56, device: k80, batch_per_worker: 64}
strategy: BINARY_TREE_STAR
events:
  - contention: {from: host0, to: outside, flows: 4, start: {step: 3}, stop: {step: 6}}
  - straggler: {worker: 3, factor: 2, start: 0.05s, stop: {step: 5}}
  - link: {link: w5-host2, latency: 50us, at: {step: 3}}
)";

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path run_flow(const std::string& tag, const std::vector<std::string>& overrides) {
  const auto dir = std::filesystem::temp_directory_path() / ("kf_flow_test_" + tag);
  std::filesystem::remove_all(dir);
  Simulation sim(parse_scenario(kScenario, "flow-small.yaml", overrides));
  sim.run();
  sim.write(dir.string());
  return dir;
}

TEST(FlowScenario, SameScenarioAndSeedGiveByteIdenticalRecords) {
  const auto a = run_flow("a", {});
  const auto b = run_flow("b", {});
  for (const char* file :
       {"steps.csv", "peers.csv", "collectives.csv", "events.csv", "summary.json", "trace.json"}) {
    const std::string x = slurp(a / file), y = slurp(b / file);
    EXPECT_FALSE(x.empty()) << file;
    EXPECT_TRUE(x == y) << file << " differs between two runs of the same scenario and seed";
  }
  const std::string steps = slurp(a / "steps.csv");
  EXPECT_EQ(std::count(steps.begin(), steps.end(), '\n'), 1 + 8 * 8);
  EXPECT_NE(slurp(a / "summary.json").find("\"world\": \"flow\""), std::string::npos);
}

TEST(FlowScenario, ContentionSlowsTheStepsItOverlaps) {
  Simulation sim(parse_scenario(kScenario, "flow-small.yaml", {"events=[]"}));
  sim.run();
  Simulation contended(parse_scenario(
      kScenario, "flow-small.yaml",
      {"events=[{contention: {from: host0, to: outside, flows: 4, start: {step: 3}}}]"}));
  contended.run();
  const auto calm = sim.recorder().cluster_steps();
  const auto busy = contended.recorder().cluster_steps();
  ASSERT_EQ(calm.size(), 8u);
  ASSERT_EQ(busy.size(), 8u);
  const auto length = [](const ClusterStep& s) { return to_seconds(s.end - s.begin); };
  EXPECT_NEAR(length(busy[1]), length(calm[1]), 1e-9);  // before: the same
  EXPECT_GT(length(busy[6]), 1.5 * length(calm[6]));    // during: host0 shares its link 5 ways
  EXPECT_TRUE(contended.summary()["errors"].empty());
}

// workload.tensors + compute 0: each step is exactly one allreduce of the given size.
TEST(FlowScenario, SyntheticTensorsAreTheOnlyCollectivesAndComputeIsZero) {
  Simulation sim(parse_scenario(
      kScenario, "flow-small.yaml",
      {"events=[]", "steps=3", "workload={tensors: [4MiB], compute: 0s, compute_jitter: 0}"}));
  sim.run();
  const auto dir = std::filesystem::temp_directory_path() / "kf_flow_test_tensors";
  std::filesystem::remove_all(dir);
  sim.write(dir.string());
  const std::string coll = slurp(dir / "collectives.csv");
  EXPECT_EQ(std::count(coll.begin(), coll.end(), '\n'), 1 + 3 * 8);  // 8 workers, one per step
  EXPECT_EQ(std::count(coll.begin(), coll.end(), ','), 7 * (1 + 3 * 8));
  std::size_t at = 0, sized = 0;
  while ((at = coll.find(",grad/tensor0,4194304,", at + 1)) != std::string::npos)
    ++sized;
  EXPECT_EQ(sized, 3u * 8u);
  for (const auto& s : sim.recorder().cluster_steps())
    EXPECT_GT(to_seconds(s.end - s.begin), 4.0 * (1 << 20) / 125e6);  // at least the bytes once
  EXPECT_TRUE(sim.summary()["errors"].empty());
}

TEST(FlowScenario, AFailedWorkerBecomesAnErrorNotAHang) {
  Simulation sim(parse_scenario(kScenario, "flow-small.yaml",
                                {"events=[{fail: {worker: 2, at: {step: 2}}}]", "timeout=5s"}));
  sim.run();
  const auto summary = sim.summary();
  EXPECT_FALSE(summary["errors"].empty());
  EXPECT_LT(summary["simulation_end_s"].get<double>(), 60.0);
}

// A scenario that must be refused with `message` at line:column.
void expect_error_at(const std::string& yaml, int line, int column, const std::string& message) {
  try {
    parse_scenario(yaml, "w.yaml");
    FAIL() << "no error";
  } catch (const ScenarioError& e) {
    EXPECT_EQ(e.line(), line);
    EXPECT_EQ(e.column(), column);
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(FlowScenario, FlowTcpChoosesWindowsOrEqualSharesAndAnUnknownModelIsAnErrorAtItsPlace) {
  Simulation cubic(parse_scenario(kScenario, "flow-small.yaml", {"events=[]", "steps=3"}));
  cubic.run();
  Simulation fair(
      parse_scenario(kScenario, "flow-small.yaml", {"events=[]", "steps=3", "flow_tcp=fair"}));
  fair.run();
  EXPECT_EQ(cubic.summary()["flow_tcp"], "cubic");
  EXPECT_EQ(fair.summary()["flow_tcp"], "fair");
  EXPECT_GT(cubic.summary()["world_stats"]["tcp_rounds"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(fair.summary()["world_stats"]["tcp_rounds"].get<std::uint64_t>(), 0u);
  expect_error_at("steps: 1\ntopology: {hosts: 2}\nflow_tcp: reno\n", 3, 11,
                  "unknown flow-world TCP model 'reno' (known: cubic, fair)");
}

TEST(FlowScenario, AnUnknownWorldIsAnErrorAtItsPlace) {
  expect_error_at("steps: 1\ntopology: {hosts: 2}\nworld: foo\n", 3, 8,
                  "unknown world 'foo' (known: ns3, flow)");
}

// perf.json's learning_wall_seconds: the part of the wall time that is the numeric workload's own
// (its data, its model's passes), the same in every world; zero without a numeric workload.
TEST(FlowScenario, TheLearningsWallTimeIsCountedApartAndOnlyForNumericWorkloads) {
  Simulation phantom(parse_scenario(kScenario, "flow-small.yaml", {"events=[]", "steps=3"}));
  phantom.run();
  EXPECT_EQ(phantom.perf()["learning_wall_seconds"].get<double>(), 0.0);

  Simulation learning(parse_scenario(
      "name: learning\nseed: 3\nsteps: 40\nworld: flow\n"
      "topology: {kind: star, hosts: 4, link: {bandwidth: 1Gbps, latency: 20us}}\n"
      "workload: {model: resnet56, device: k80, batch_per_worker: 256,\n"
      "  numeric: {model: mlp, hidden: 64, features: 64, classes: 4, train: 16384, test: 4096,\n"
      "            eval_every: 1}}\n",
      "learning.yaml", {}));
  learning.run();
  ASSERT_TRUE(learning.summary()["errors"].empty()) << learning.summary()["errors"].dump();
  const auto perf = learning.perf();
  const double wall = perf["wall_seconds"].get<double>();
  const double learn = perf["learning_wall_seconds"].get<double>();
  EXPECT_GT(learn, 0.0);
  EXPECT_LE(learn, wall);
}

TEST(TimedNumericModel, GivesTheModelsOwnResultsAndAddsTheTimeTheyTook) {
  const std::shared_ptr<const NumericModel> plain = make_numeric_model("mlp", 8, 3, 16);
  auto seconds = std::make_shared<double>(0.0);
  const TimedNumericModel timed(plain, seconds);
  EXPECT_EQ(timed.name(), plain->name());
  EXPECT_EQ(timed.tensors(), plain->tensors());
  const std::vector<float> params = timed.initial_parameters(7);
  EXPECT_EQ(params, plain->initial_parameters(7));

  Dataset data{.features = 8, .classes = 3};
  std::mt19937 rng(1);
  std::normal_distribution<float> x;
  for (int i = 0; i < 64; ++i) {
    for (int f = 0; f < 8; ++f)
      data.x.push_back(x(rng));
    data.y.push_back(i % 3);
  }
  std::vector<std::size_t> batch(64);
  std::iota(batch.begin(), batch.end(), 0);
  std::vector<float> g1(params.size()), g2(params.size());
  EXPECT_EQ(timed.loss_and_gradient(params, data, batch, g1),
            plain->loss_and_gradient(params, data, batch, g2));
  EXPECT_EQ(g1, g2);
  const double after_gradient = *seconds;
  EXPECT_GT(after_gradient, 0.0);
  EXPECT_EQ(timed.evaluate(params, data).loss, plain->evaluate(params, data).loss);
  EXPECT_GT(*seconds, after_gradient);
}

}  // namespace
}  // namespace kf
