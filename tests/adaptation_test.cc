// Adaptation, world-agnostic parts: interference detection, cluster resizing, the policy
// registry, each policy's decisions from given sums, the policy runner's agreement round over
// the in-process world, monitoring, latency probes and cluster-version handling in the engine.
#include <gtest/gtest.h>

#include <future>

#include "harness.h"
#include "policies/adaptive_batch_size.h"
#include "policies/adaptive_strategy.h"
#include "policies/elastic_provisioning.h"
#include "policies/policy_runner.h"
#include "policies/registry.h"
#include "policies/scheduled_resize.h"
#include "runtime/interference.h"
#include "runtime/monitor.h"

namespace kf {
namespace {

using testing::expect_all_ok;
using testing::run_on_all;

// ---- interference detection ----

TEST(Interference, ReferenceThenVoteBelowThresholdWithHysteresis) {
  InterferenceDetector d({.threshold = 0.8, .clear_threshold = 0.9, .window = 2, .warmup = 1});
  EXPECT_FALSE(d.observe(1.0));  // warm-up: ignored
  EXPECT_FALSE(d.observe(100));
  EXPECT_FALSE(d.observe(100));  // window full: the reference
  ASSERT_TRUE(d.reference());
  EXPECT_DOUBLE_EQ(*d.reference(), 100);
  EXPECT_FALSE(d.observe(70));  // mean 85: above 80
  EXPECT_TRUE(d.observe(70));   // mean 70: vote
  EXPECT_TRUE(d.observe(95));   // mean 82.5: above 80 but below the clear threshold 90: still
  EXPECT_FALSE(d.observe(95));  // mean 95: cleared
  EXPECT_FALSE(d.observe(85));  // mean 90: not voting again until below 80
  d.reset();
  EXPECT_FALSE(d.reference());
  EXPECT_FALSE(d.observe(10));
}

TEST(Interference, OneNoisyStepDoesNotVote) {
  InterferenceDetector d({.window = 3, .warmup = 0});
  for (int i = 0; i < 3; ++i)
    d.observe(100);
  EXPECT_FALSE(d.observe(50));  // mean 83
  EXPECT_FALSE(d.observe(100));
}

TEST(Interference, BadOptionsAreRefused) {
  EXPECT_THROW(InterferenceDetector({.threshold = 1.2}), std::invalid_argument);
  EXPECT_THROW(InterferenceDetector({.threshold = 0.8, .clear_threshold = 0.5}),
               std::invalid_argument);
  EXPECT_THROW(InterferenceDetector({.window = 0}), std::invalid_argument);
}

// ---- resize proposals ----

ClusterSpec two_hosts(int workers_on_a, int workers_on_b) {
  std::vector<PeerID> w;
  for (int i = 0; i < workers_on_a; ++i)
    w.push_back({"10.0.0.1", static_cast<std::uint16_t>(10000 + i)});
  for (int i = 0; i < workers_on_b; ++i)
    w.push_back({"10.0.0.2", static_cast<std::uint16_t>(10000 + i)});
  return ClusterSpec(7, {{"10.0.0.1", 38080}, {"10.0.0.2", 38080}}, w);
}

TEST(Resize, ShrinkDropsTheLastWorkers) {
  const ClusterSpec c = two_hosts(2, 2).resized(3, 10000);
  ASSERT_EQ(c.size(), 3);
  EXPECT_EQ(c.worker(2), (PeerID{"10.0.0.2", 10000}));
  EXPECT_EQ(c.version(), 7u);  // the config server bumps it
}

TEST(Resize, GrowFillsTheRunnerWithFewestWorkersAndKeepsRanks) {
  const ClusterSpec before = two_hosts(2, 0);
  const ClusterSpec c = before.resized(5, 10000);
  ASSERT_EQ(c.size(), 5);
  for (int r = 0; r < before.size(); ++r)
    EXPECT_EQ(c.worker(r), before.worker(r));
  EXPECT_EQ(c.worker(2), (PeerID{"10.0.0.2", 10000}));
  EXPECT_EQ(c.worker(3), (PeerID{"10.0.0.2", 10001}));
  EXPECT_EQ(c.worker(4), (PeerID{"10.0.0.1", 10002}));  // a tie goes to the first runner
  EXPECT_FALSE(c.problem());
}

TEST(Resize, SlotsPerHostAndBadSizesAreRefused) {
  EXPECT_THROW((void)two_hosts(2, 2).resized(5, 10000, 2), std::invalid_argument);
  EXPECT_THROW((void)two_hosts(2, 2).resized(0, 10000), std::invalid_argument);
  EXPECT_EQ(two_hosts(1, 0).resized(2, 10000, 1).worker(1).host, "10.0.0.2");
}

// ---- the registry ----

TEST(PolicyRegistry, FlagsAndErrors) {
  const PolicySpec s = parse_policy_flag("scheduled_resize:schedule=10:4,20:2");
  ASSERT_EQ(s.params.size(), 1u);
  EXPECT_EQ(s.params[0].second, "10:4,20:2");
  const PolicySpec a = parse_policy_flag("adaptive_strategy:threshold=0.7,window=5");
  EXPECT_EQ(a.params.size(), 2u);
  EXPECT_NE(make_policy(a), nullptr);
  EXPECT_NE(make_policy(parse_policy_flag("elastic_provisioning")), nullptr);
  const auto message = [](const std::string& flag) {
    try {
      (void)make_policy(parse_policy_flag(flag));
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("greedy").find(
                "unknown policy 'greedy' (known: adaptive_batch_size, adaptive_strategy"),
            std::string::npos);
  EXPECT_NE(message("adaptive_strategy:window=x").find("parameter 'window': 'x' is not a number"),
            std::string::npos);
  EXPECT_NE(message("adaptive_strategy:windw=3").find("unknown parameter 'windw' (accepted:"),
            std::string::npos);
  EXPECT_NE(message("scheduled_resize").find("parameter 'schedule': missing"), std::string::npos);
  EXPECT_NE(message("scheduled_resize:schedule=0:4").find("steps start at 1"), std::string::npos);
  EXPECT_NE(message("elastic_provisioning:settle=20").find("settle must be in [0, interval)"),
            std::string::npos);
  EXPECT_THROW(parse_policy_flag("adaptive_strategy:threshold"), std::invalid_argument);
}

// ---- decisions from given sums ----

TrainingState state_of(std::int64_t step, int n) {
  TrainingState s;
  s.step = step;
  s.cluster_size = n;
  s.max_cluster_size = 8;
  s.host_of.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    s.host_of[static_cast<std::size_t>(r)] = r;
  s.configured_strategy = StrategyName::star;
  return s;
}

TEST(ScheduledResize, AsksBeforeTheListedStep) {
  ScheduledResize p(ScheduledResize::parse("6:4,12:3"));
  std::vector<Action> actions;
  p.after_step({}, {}, state_of(4, 2), actions);
  EXPECT_TRUE(actions.empty());
  p.after_step({}, {}, state_of(5, 2), actions);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(std::get<Resize>(actions[0]).workers, 4);
  actions.clear();
  p.after_step({}, {}, state_of(11, 3), actions);  // already 3: nothing to do
  EXPECT_TRUE(actions.empty());
}

TEST(ElasticProvisioning, GrowsWhileItPaysThenGivesBackTheLastAndHolds) {
  ElasticProvisioning p({.interval = 3, .grow_by = 1, .threshold = 0.1, .settle = 1});
  std::vector<Action> actions;
  int n = 2;
  std::int64_t step = 0;
  // Total throughput per size: 2 -> 100, 3 -> 140 (+40%: grow), 4 -> 150 (+7%: give back).
  const std::map<int, double> total{{2, 100}, {3, 140}, {4, 150}};
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 3; ++i) {
      const double sum = total.at(n);
      p.after_step({}, std::span<const double>(&sum, 1), state_of(step++, n), actions);
    }
    ASSERT_EQ(actions.size(), 1u) << "round " << round;
    const int next = std::get<Resize>(actions[0]).workers;
    p.applied(actions[0], state_of(step, next));
    actions.clear();
    EXPECT_EQ(next, round < 2 ? n + 1 : 3);
    n = next;
  }
  // Holding: no more actions, and the state survives a save / load (a worker that joins).
  const double sum = 500;
  p.after_step({}, std::span<const double>(&sum, 1), state_of(step++, n), actions);
  EXPECT_TRUE(actions.empty());
  ElasticProvisioning joined({.interval = 3, .grow_by = 1, .threshold = 0.1, .settle = 1});
  joined.load_state(p.save_state());
  joined.after_step({}, std::span<const double>(&sum, 1), state_of(step, n), actions);
  EXPECT_TRUE(actions.empty());
}

TEST(AdaptiveStrategy, MajorityVoteSwitchesToAStarRootedElsewhere) {
  AdaptiveStrategy p({});
  std::vector<Action> actions;
  const double two = 2;  // of 4: not a majority
  p.after_step({}, std::span<const double>(&two, 1), state_of(10, 4), actions);
  EXPECT_TRUE(actions.empty());
  const double three = 3;
  p.after_step({}, std::span<const double>(&three, 1), state_of(11, 4), actions);
  ASSERT_EQ(actions.size(), 1u);
  const auto& s = std::get<SwitchStrategy>(actions[0]);
  EXPECT_EQ(s.label, "STAR@1");
  EXPECT_EQ(s.forest, (std::vector<int>{1, 1, 1, 1}));
  // After the switch it does not switch again on further votes.
  p.applied(actions[0], state_of(12, 4));
  actions.clear();
  p.after_step({}, std::span<const double>(&three, 1), state_of(12, 4), actions);
  EXPECT_TRUE(actions.empty());
}

TEST(AdaptiveStrategy, SwitchBackProbesTheOriginalAndStaysWhenItIsGoodAgain) {
  AdaptiveStrategyOptions o;
  o.switch_back = true;
  o.probe_every = 2;
  AdaptiveStrategy p(o);
  std::vector<Action> actions;
  const double all = 4, none = 0;
  p.after_step({}, std::span<const double>(&all, 1), state_of(1, 4), actions);
  ASSERT_EQ(actions.size(), 1u);
  p.applied(actions[0], state_of(2, 4));
  actions.clear();
  p.after_step({}, std::span<const double>(&none, 1), state_of(2, 4), actions);
  EXPECT_TRUE(actions.empty());
  p.after_step({}, std::span<const double>(&none, 1), state_of(3, 4), actions);
  ASSERT_EQ(actions.size(), 1u);
  const auto& probe = std::get<SwitchStrategy>(actions[0]);
  EXPECT_EQ(probe.name, StrategyName::star);
  EXPECT_EQ(probe.label, "STAR (probe)");
  p.applied(actions[0], state_of(4, 4));
  actions.clear();
  // The probe step: still slow on a majority -> back to the alternative.
  p.after_step({}, std::span<const double>(&none, 1), state_of(4, 4), actions);
  ASSERT_EQ(actions.size(), 1u);
  EXPECT_EQ(std::get<SwitchStrategy>(actions[0]).label, "STAR@1");
  p.applied(actions[0], state_of(5, 4));
  actions.clear();
  for (std::int64_t step = 5; step < 7; ++step)
    p.after_step({}, std::span<const double>(&none, 1), state_of(step, 4), actions);
  ASSERT_EQ(actions.size(), 1u);  // the next probe
  p.applied(actions[0], state_of(7, 4));
  actions.clear();
  p.after_step({}, std::span<const double>(&all, 1), state_of(7, 4), actions);  // good again
  EXPECT_TRUE(actions.empty());
}

TEST(AdaptiveStrategy, MstAlternativeAvoidsTheSlowPeer) {
  AdaptiveStrategyOptions o;
  o.alternative = AdaptiveStrategyOptions::Alternative::mst;
  AdaptiveStrategy p(o);
  // Summed contributions: the vote, then the 3 x 3 latency matrix (peer 0 slow to everyone).
  const std::vector<double> sums{3, 0, 9, 9, 9, 0, 1, 9, 1, 0};
  std::vector<Action> actions;
  p.after_step({}, sums, state_of(3, 3), actions);
  ASSERT_EQ(actions.size(), 1u);
  const auto& s = std::get<SwitchStrategy>(actions[0]);
  EXPECT_EQ(s.label, "MST");
  ASSERT_EQ(s.forest.size(), 3u);
  // 1 and 2 are joined directly; 0 hangs off one of them by a single edge.
  EXPECT_TRUE(s.forest[2] == 1 || s.forest[1] == 2);
}

TEST(AdaptiveBatchSize, FollowsTheNoiseScaleWithTheLearningRateRescaled) {
  AdaptiveBatchSize p({.interval = 5, .min_batch = 16, .max_batch = 512, .scale = 1.0});
  TrainingState s = state_of(0, 4);
  s.batch_per_worker = 32;
  s.learning_rate = 0.1;
  p.before_train(s);
  std::vector<Action> actions;
  // Four workers measured a noise scale of 1000 on average: a global batch of 1000 = 250 each.
  const std::vector<double> sums{4000, 4};
  s.step = 3;
  p.after_step({}, sums, s, actions);
  EXPECT_TRUE(actions.empty());  // not a decision step
  s.step = 4;
  p.after_step({}, sums, s, actions);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(std::get<SetBatchSize>(actions[0]).per_worker, 250);
  EXPECT_DOUBLE_EQ(std::get<SetLearningRate>(actions[1]).value, 0.1 * 250 / 32);
  // Within min_change of the target: no change; far beyond max: clamped.
  actions.clear();
  s.batch_per_worker = 240;
  s.step = 9;
  p.after_step({}, sums, s, actions);
  EXPECT_TRUE(actions.empty());
  const std::vector<double> huge{4e6, 4};
  p.after_step({}, huge, s, actions);
  ASSERT_FALSE(actions.empty());
  EXPECT_EQ(std::get<SetBatchSize>(actions[0]).per_worker, 512);
  // No estimate yet (one worker, or the monitor off): nothing.
  actions.clear();
  const std::vector<double> none{0, 0};
  p.after_step({}, none, s, actions);
  EXPECT_TRUE(actions.empty());
  EXPECT_THROW(AdaptiveBatchSize({.lr_rule = "cubic"}), std::invalid_argument);
}

// ---- the agreement round, over the in-process world ----

// Contributes its rank; decides "batch = sum" (the same everywhere) or, when `honest` is false,
// "batch = own rank" (different everywhere: the consensus must catch it).
class RankPolicy final : public Policy {
 public:
  explicit RankPolicy(bool honest) : honest_(honest) {}
  std::string name() const override { return "rank"; }
  std::vector<double> contribute(const StepMetrics&, const TrainingState& s) override {
    return {static_cast<double>(s.rank)};
  }
  void after_step(const StepMetrics&, std::span<const double> sums, const TrainingState& s,
                  std::vector<Action>& actions) override {
    actions.emplace_back(SetBatchSize{.per_worker = honest_ ? static_cast<int>(sums[0]) : s.rank});
  }

 private:
  bool honest_;
};

std::vector<std::pair<Status, PolicyOutcome>> agree(bool honest) {
  InprocWorld world(4);
  std::vector<PolicyRunner> runners;
  for (int r = 0; r < 4; ++r) {
    std::vector<std::unique_ptr<Policy>> p;
    p.push_back(std::make_unique<RankPolicy>(honest));
    runners.emplace_back(std::move(p));
  }
  std::vector<std::pair<Status, PolicyOutcome>> out(4);
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    TrainingState s = state_of(3, 4);
    s.rank = e.rank();
    runners[static_cast<std::size_t>(e.rank())].after_step(
        e, {}, s, [&out, r = e.rank(), done](Status st, PolicyOutcome o) {
          out[static_cast<std::size_t>(r)] = {st, std::move(o)};
          done(Status{});
        });
  }));
  return out;
}

TEST(PolicyRunner, EveryWorkerGetsTheSameSumsAndActions) {
  for (const auto& [status, outcome] : agree(true)) {
    ASSERT_TRUE(status.ok()) << status.to_string();
    EXPECT_EQ(outcome.sums, std::vector<double>{6});
    ASSERT_EQ(outcome.actions.size(), 1u);
    EXPECT_EQ(std::get<SetBatchSize>(outcome.actions[0]).per_worker, 6);
  }
}

TEST(PolicyRunner, DifferentDecisionsAreAnErrorNotASilentSplit) {
  for (const auto& [status, outcome] : agree(false)) {
    EXPECT_EQ(status.code(), ErrorCode::protocol);
    EXPECT_NE(status.message().find("policies decided differently"), std::string::npos);
    EXPECT_TRUE(outcome.actions.empty());
  }
}

// The phases a caller runs the collectives around (the Python bindings): contributions() per
// worker, their sum, decide() per worker. They give what the engine round gives, with each
// action's policy, whatever the local metrics.
TEST(PolicyRunner, PhasesDecideFromTheSumsAsTheRoundDoes) {
  const auto stack = [] {
    std::vector<std::unique_ptr<Policy>> p;
    p.push_back(std::make_unique<RankPolicy>(true));
    p.push_back(std::make_unique<AdaptiveBatchSize>(
        AdaptiveBatchSizeOptions{.interval = 1, .min_batch = 1, .max_batch = 4096}));
    return PolicyRunner(std::move(p));
  };
  std::vector<PolicyRunner> runners;
  std::vector<double> sums;
  for (int r = 0; r < 4; ++r) {
    runners.push_back(stack());
    TrainingState s = state_of(3, 4);
    s.rank = r;
    s.batch_per_worker = 32;
    s.learning_rate = 0.1;
    runners.back().before_train(s);
    StepMetrics m;
    m.values["gns"] = 100.0 * (r + 1);  // every worker its own estimate
    const auto mine = runners.back().contributions(m, s);
    ASSERT_EQ(mine, (std::vector<double>{static_cast<double>(r), 100.0 * (r + 1), 1.0}));
    sums.resize(mine.size());
    for (std::size_t i = 0; i < mine.size(); ++i)
      sums[i] += mine[i];
  }
  for (int r = 0; r < 4; ++r) {
    TrainingState s = state_of(3, 4);
    s.rank = r;
    s.batch_per_worker = 32;
    s.learning_rate = 0.1;
    StepMetrics m;
    m.values["gns"] = -1.0;  // local metrics play no part in the decision
    const PolicyOutcome o = runners[static_cast<std::size_t>(r)].decide(m, sums, s);
    EXPECT_EQ(o.sums, sums);
    // Rank policy: batch = 0+1+2+3; adaptive_batch_size: mean noise scale 250 over 4 workers.
    ASSERT_EQ(o.actions.size(), 3u);
    EXPECT_EQ(describe(o.actions[0]), "batch 6");
    EXPECT_EQ(describe(o.actions[1]), "batch 63");
    EXPECT_DOUBLE_EQ(std::get<SetLearningRate>(o.actions[2]).value, 0.1 * 63 / 32);
    EXPECT_EQ(o.asked_by, (std::vector<std::size_t>{0, 1, 1}));
    EXPECT_EQ(encode(o.actions), encode(runners[0].decide(m, sums, s).actions));
  }
  EXPECT_EQ(PolicyRunner::sums_name(7), "kf.policy/7");
  EXPECT_EQ(PolicyRunner::agreement_name(7), "kf.policy.agree/7");
  const Status s = PolicyRunner::disagreement(2, {SetBatchSize{.per_worker = 2}});
  EXPECT_EQ(s.code(), ErrorCode::protocol);
  EXPECT_NE(s.message().find("rank 2 decided batch 2"), std::string::npos);
}

TEST(PolicyRunner, DecideNeedsTheLayoutOfContributions) {
  std::vector<std::unique_ptr<Policy>> p;
  p.push_back(std::make_unique<RankPolicy>(true));
  PolicyRunner runner(std::move(p));
  const std::vector<double> one{1.0}, two{1.0, 2.0};
  EXPECT_THROW(runner.decide({}, one, state_of(0, 2)), std::logic_error);  // no contributions()
  runner.contributions({}, state_of(0, 2));
  EXPECT_THROW(runner.decide({}, two, state_of(0, 2)), std::logic_error);
  EXPECT_EQ(runner.decide({}, one, state_of(0, 2)).actions.size(), 1u);
  PolicyRunner none;
  EXPECT_TRUE(none.contributions({}, state_of(0, 2)).empty());
  EXPECT_TRUE(none.decide({}, {}, state_of(0, 2)).actions.empty());
}

// ---- monitoring, latency probes, cluster versions ----

TEST(Monitor, StepMetricsFromCollectivesAndTheEngineCounters) {
  InprocWorld world(2);
  std::vector<float> data(1 << 16, 1.0f);
  std::vector<StepMetrics> metrics(2);
  std::vector<Monitor> monitors(2);
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    auto& m = monitors[static_cast<std::size_t>(e.rank())];
    const TimePoint begin = e.executor().now();
    m.begin_step(0, begin, e);
    auto mine = std::make_shared<std::vector<float>>(data);
    const auto v = BufferView::of(std::span<float>(*mine), DType::f32);
    allreduce(e, {.name = "g", .input = v, .output = v},
              [&, mine, begin, e_ptr = &e, done](Status s) {
                auto& mon = monitors[static_cast<std::size_t>(e_ptr->rank())];
                mon.collective_done("AUTO", mine->size() * 4, begin, e_ptr->executor().now());
                metrics[static_cast<std::size_t>(e_ptr->rank())] =
                    mon.end_step(begin, e_ptr->executor().now(), *e_ptr, 32, 32, 0.1);
                done(s);
              });
  }));
  for (const auto& m : metrics) {
    EXPECT_EQ(m.collective_bytes, (1u << 16) * 4u);
    EXPECT_GT(m.collective_throughput, 0);
    EXPECT_GT(m.samples_per_second, 0);
    ASSERT_EQ(m.egress_bps.size(), 1u);  // only the peer it sent to
    EXPECT_GT(m.egress_bps.get(1 - m.rank), 0);
    EXPECT_EQ(m.egress_bps.get(m.rank, -1.0), -1.0);
    EXPECT_GT(m.ingress_total_bps(), 0);
    EXPECT_EQ(m.strategies.at("AUTO").bytes, (1u << 16) * 4u);
  }
}

// A step's period is the wall-clock cycle since the previous step ended (what ran between the steps
// included); elastic_provisioning's throughput divides by it, not by the step's own time.
TEST(Monitor, PeriodCoversTheTimeBetweenSteps) {
  InprocWorld world(1);
  std::vector<StepMetrics> m;
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    Monitor mon;
    const TimePoint t0 = e.executor().now();
    mon.begin_step(0, t0, e);
    m.push_back(mon.end_step(t0, t0 + std::chrono::seconds(1), e, 32, 32, 0.1));
    mon.begin_step(1, t0 + std::chrono::milliseconds(1500), e);
    m.push_back(mon.end_step(t0, t0 + std::chrono::milliseconds(2500), e, 32, 32, 0.1));
    done(Status{});
  }));
  ASSERT_EQ(m.size(), 2u);
  EXPECT_DOUBLE_EQ(m[0].period_seconds, m[0].step_seconds);  // the first: its own time
  EXPECT_DOUBLE_EQ(m[1].step_seconds, 1.0);
  EXPECT_DOUBLE_EQ(m[1].period_seconds, 1.5);
  ElasticProvisioning p({});
  EXPECT_DOUBLE_EQ(p.contribute(m[1], state_of(1, 1))[0], 32 / 1.5);
}

TEST(Ping, MeasuresARoundTripAndRefusesItself) {
  InprocWorld world(3);
  std::vector<Duration> rtt(3, Duration::zero());
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    ping(e, {.peer = (e.rank() + 1) % 3}, [&rtt, r = e.rank(), done](Status s, Duration d) {
      rtt[static_cast<std::size_t>(r)] = d;
      done(s);
    });
  }));
  for (const auto d : rtt)
    EXPECT_GT(d, Duration::zero());
  const auto self = run_on_all(world, [&](Engine& e, DoneCallback done) {
    ping(e, {.peer = e.rank()}, [done](Status s, Duration) { done(s); });
  });
  for (const auto& s : self)
    EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
}

TEST(ClusterVersion, StaleMessagesAreDroppedNewerOnesKeptForTheNextEngine) {
  InprocWorld world(ClusterSpec(5, {}, ClusterSpec::local(2).workers()));
  std::promise<void> checked;
  world.post(0, [&](Engine& e) {
    Message stale;
    stale.header.name = "x";
    stale.header.cluster_version = 4;
    e.deliver(1, std::move(stale));
    EXPECT_EQ(e.stale_messages(), 1u);
    EXPECT_EQ(e.mailbox_size(), 0u);
    Message newer;
    newer.header.name = "y";
    newer.header.cluster_version = 6;
    e.deliver(1, std::move(newer));
    EXPECT_EQ(e.mailbox_size(), 0u);
    const auto kept = e.take_newer_messages();
    ASSERT_EQ(kept.size(), 1u);
    EXPECT_EQ(kept[0].second.header.name, "y");
    Message current;
    current.header.name = "z";
    current.header.cluster_version = 5;
    e.deliver(1, std::move(current));
    EXPECT_EQ(e.mailbox_size(), 1u);
    checked.set_value();
  });
  ASSERT_EQ(checked.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace kf
