// Overlapping communication with the backward pass (workload.bucketing), in the flow world with
// fair sharing and no jitter: a 3-layer toy model whose timeline is computed here by hand, and
// every step checked against it to the nanosecond.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "sim/scenario/scenario.h"
#include "sim/simulation.h"

namespace kf {
namespace {

using std::chrono::milliseconds;

// Two workers, a fast network; three tensors (forward order) of 4, 8 and 4 MiB whose step computes
// 12 ms. With no FLOPs known, the timeline shares the compute by parameters (1 : 2 : 1 elements):
// forward 1/3 (4 ms), then backward 2/3: t2 ready at 6 ms, t1 at 10 ms, t0 at 12 ms.
std::string toy(const std::string& bucketing, const std::string& tensors = "[4MiB, 8MiB, 4MiB]",
                int hosts = 2) {
  return "steps: 6\n"
         "world: flow\n"
         "flow_tcp: fair\n"
         "strategy: STAR\n"
         "topology: {hosts: " +
         std::to_string(hosts) +
         ", link: {bandwidth: 100Gbps, latency: 1us, mtu: 9000}}\n"
         "workload: {tensors: " +
         tensors + ", compute: 12ms, batch_per_worker: 1, compute_jitter: 0" +
         (bucketing.empty() ? "" : ", bucketing: " + bucketing) + "}\n";
}

struct Records {
  std::vector<StepRecord> steps;
  std::vector<CollectiveRecord> collectives;
};

Records run(const std::string& yaml) {
  Simulation sim(parse_scenario(yaml, "toy.yaml"));
  sim.run();
  EXPECT_TRUE(sim.recorder().errors().empty());
  return {sim.recorder().steps(), sim.recorder().collectives()};
}

const StepRecord& step_of(const Records& r, int rank, std::int64_t step) {
  for (const auto& s : r.steps)
    if (s.rank == rank && s.step == step) return s;
  throw std::runtime_error("no step");
}

// Step `step` of `rank` in a run of one allreduce per step (a `none` run of one tensor): how long
// its allreduce took, which is how long that bucket takes alone on the network.
Duration alone(const std::string& tensors, int rank, std::int64_t step) {
  const Records r = run(toy("", tensors));
  const StepRecord& s = step_of(r, rank, step);
  return s.end - s.compute_end;
}

// Checks every step of `r` from step 2 (the connections are open and the workers' steps settled):
// each collective starts at its bucket's launch offset from the step's start (`launch`, by its
// name), the compute takes 12 ms, the step ends with its last collective, and its length is
// `last_launch` + the last bucket's time alone.
void check(const Records& r, const std::map<std::string, Duration>& launch, Duration last_launch,
           const std::string& last_tensors) {
  for (int rank = 0; rank < 2; ++rank) {
    const Duration last = alone(last_tensors, rank, 3);
    for (std::int64_t step = 2; step < 6; ++step) {
      const StepRecord& s = step_of(r, rank, step);
      EXPECT_EQ(s.compute_end - s.begin, milliseconds(12));
      TimePoint end = s.compute_end;
      for (const auto& c : r.collectives) {
        if (c.rank != rank || c.step != step) continue;
        ASSERT_TRUE(launch.count(c.name)) << c.name;
        EXPECT_EQ(c.begin - s.begin, launch.at(c.name)) << c.name << " step " << step;
        end = std::max(end, c.end);
      }
      EXPECT_EQ(s.end, end) << "step " << step;
      EXPECT_EQ(s.end - s.begin, last_launch + last) << "rank " << rank << " step " << step;
    }
  }
}

TEST(Overlap, KungfuSendsEachTensorAtItsReadyTime) {
  check(run(toy("kungfu")),
        {{"grad/tensor2", milliseconds(6)},
         {"grad/tensor1", milliseconds(10)},
         {"grad/tensor0", milliseconds(12)}},
        milliseconds(12), "[4MiB]");
}

TEST(Overlap, DdpSendsABucketWhenFull) {
  // Backward order t2 (4 MiB >= the 1 MiB first bucket: alone), then t1 + t0 (12 MiB < 25 MiB).
  check(run(toy("ddp")), {{"grad/tensor2", milliseconds(6)}, {"grad/tensor1", milliseconds(12)}},
        milliseconds(12), "[12MiB]");
}

TEST(Overlap, HorovodSendsWhatEachCycleFindsReady) {
  // Cycles at 5, 10, 15 ms: t2 (6) and t1 (10) at 10 ms, t0 (12) at 15 ms.
  check(run(toy("horovod")),
        {{"grad/tensor2", milliseconds(10)}, {"grad/tensor0", milliseconds(15)}}, milliseconds(15),
        "[4MiB]");
}

TEST(Overlap, AProfileFileIsTheSameModel) {
  // tests/data/profiles/toy3.yaml: the toy's three layers with measured v100 times (1 + 2 ms,
  // 2 + 4 ms, 1 + 2 ms): the same timeline, so the same steps as the tensors above.
  const std::string yaml =
      "steps: 6\nworld: flow\nflow_tcp: fair\nstrategy: STAR\n"
      "topology: {hosts: 2, link: {bandwidth: 100Gbps, latency: 1us, mtu: "
      "9000}}\nworkload: {profile: " KF_TEST_DATA_DIR
      "/profiles/toy3.yaml, device: v100, batch_per_worker: 1, "
      "compute_jitter: 0, bucketing: kungfu}\n";
  const Records p = run(yaml);
  const Records t = run(toy("kungfu"));
  ASSERT_EQ(p.steps.size(), t.steps.size());
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    EXPECT_EQ(p.steps[i].end, t.steps[i].end) << i;
    EXPECT_EQ(p.steps[i].compute_end - p.steps[i].begin, milliseconds(12));
  }
}

TEST(Overlap, NoneIsTodaysStep) {
  // Explicit none and no key at all: the same records, every bucket at the compute's end.
  const Records a = run(toy("none"));
  const Records b = run(toy(""));
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    EXPECT_EQ(a.steps[i].end, b.steps[i].end);
    EXPECT_FALSE(a.steps[i].comm_begin.has_value());
    EXPECT_EQ(a.steps[i].timeline, nullptr);
  }
  for (const auto& c : a.collectives) {
    const StepRecord& s = step_of(a, c.rank, c.step);
    EXPECT_EQ(c.begin, s.compute_end);
  }
}

TEST(Overlap, ExposedCommunicationIsWithinCommunication) {
  for (const std::string mode : {"none", "kungfu", "ddp", "horovod"}) {
    const Records r = run(toy(mode));
    for (const auto& s : r.steps) {
      const TimePoint from = s.comm_begin ? std::min(*s.comm_begin, s.compute_end) : s.compute_end;
      const Duration comm = s.end - from;
      const Duration exposed = s.end - s.compute_end;
      EXPECT_GE(exposed.count(), 0) << mode;
      EXPECT_LE(exposed, comm) << mode;
      if (mode != "none") {
        EXPECT_LT(exposed, comm) << mode << " hides nothing";
      }
    }
  }
}

TEST(Overlap, WithoutCommunicationAStepIsItsCompute) {
  // One worker: every allreduce completes at once.
  for (const std::string mode : {"none", "kungfu", "ddp"}) {
    const Records r = run(toy(mode, "[4MiB, 8MiB, 4MiB]", 1));
    for (const auto& s : r.steps)
      EXPECT_EQ(s.end - s.begin, milliseconds(12)) << mode;
  }
}

TEST(Overlap, ResNet50ShipsEveryGradientOnce) {
  // A real model in every mode: every tensor's bytes move each step, whatever the buckets.
  const std::string base =
      "steps: 2\nworld: flow\nflow_tcp: fair\ntopology: {hosts: 4, link: {bandwidth: 10Gbps}}\n"
      "workload: {model: resnet50, device: v100, compute_jitter: 0, bucketing: ";
  std::size_t expected = 0;
  for (const std::string mode : {"none", "kungfu", "ddp", "horovod"}) {
    const Records r = run(base + mode + "}\n");
    std::size_t bytes = 0;
    for (const auto& c : r.collectives)
      if (c.rank == 0 && c.step == 1) bytes += c.bytes;
    if (expected == 0) expected = bytes;
    EXPECT_EQ(bytes, expected) << mode;
    EXPECT_EQ(bytes, model_profile("resnet50").parameter_count() * 4) << mode;
  }
}

}  // namespace
}  // namespace kf
