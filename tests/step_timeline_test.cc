// The step timeline (workloads/step_timeline.h) and the gradient buckets made from it
// (workloads/bucketing.h): pure computations, checked to the nanosecond on toy models.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "workloads/bucketing.h"
#include "workloads/model.h"
#include "workloads/step_timeline.h"

namespace kf {
namespace {

using std::chrono::milliseconds;

// Three layers a, b, c (forward order) of 1, 2 and 1 GFLOPs per sample; a and c have a kernel and
// a bias, b a kernel only. Element counts: a 1000 + 10, b 2'000'000, c 300'000 + 30.
ModelProfile toy() {
  ModelProfile p{.name = "toy",
                 .tensors = {{"a/kernel", 1000},
                             {"a/bias", 10},
                             {"b/kernel", 2'000'000},
                             {"c/kernel", 300'000},
                             {"c/bias", 30}},
                 .forward_gflops = 4};
  p.layers = {{.name = "a", .first_tensor = 0, .tensor_count = 2, .forward_gflops = 1},
              {.name = "b", .first_tensor = 2, .tensor_count = 1, .forward_gflops = 2},
              {.name = "c", .first_tensor = 3, .tensor_count = 2, .forward_gflops = 1}};
  return p;
}

std::vector<Duration> ms(std::initializer_list<int> values) {
  std::vector<Duration> out;
  for (int v : values)
    out.push_back(milliseconds(v));
  return out;
}

TEST(StepTimeline, FlopsShareForwardAThirdAndBackwardTwoThirds) {
  // Weights: forward 1 + 2 + 1, backward 2 + 4 + 2, of 12: forward 4 ms of 12, then c 2 ms,
  // b 4 ms, a 2 ms.
  const StepTimeline t = step_timeline(toy(), "k80", milliseconds(12));
  EXPECT_EQ(t.compute, milliseconds(12));
  EXPECT_EQ(t.forward_end, milliseconds(4));
  EXPECT_EQ(t.ready, ms({12, 12, 10, 6, 6}));
  ASSERT_EQ(t.backward.size(), 3u);
  EXPECT_EQ(t.backward[0].name, "c");
  EXPECT_EQ(t.backward[0].begin, milliseconds(4));
  EXPECT_EQ(t.backward[0].end, milliseconds(6));
  EXPECT_EQ(t.backward[1].name, "b");
  EXPECT_EQ(t.backward[2].name, "a");
  EXPECT_EQ(t.backward[2].end, milliseconds(12));
}

TEST(StepTimeline, OffsetsAreFlooredAndTheLastIsTheCompute) {
  const StepTimeline t = step_timeline(toy(), "k80", Duration(1'000'000'001));
  EXPECT_EQ(t.forward_end, Duration(333'333'333));  // floor(1'000'000'001 x 4 / 12)
  EXPECT_EQ(t.ready[3], Duration(500'000'000));     // floor(... x 6 / 12)
  EXPECT_EQ(t.ready[0], Duration(1'000'000'001));
}

TEST(StepTimeline, MeasuredTimesArePreferredForTheirDevice) {
  ModelProfile p = toy();
  p.layers[0].times["v100"] = {milliseconds(1), milliseconds(1)};
  p.layers[1].times["v100"] = {milliseconds(1), milliseconds(5)};
  p.layers[2].times["v100"] = {milliseconds(2), milliseconds(2)};
  const StepTimeline t = step_timeline(p, "v100", milliseconds(12));
  EXPECT_EQ(t.forward_end, milliseconds(4));
  EXPECT_EQ(t.ready, ms({12, 12, 11, 6, 6}));
  // Another device: no times, so FLOPs.
  EXPECT_EQ(step_timeline(p, "k80", milliseconds(12)).ready, ms({12, 12, 10, 6, 6}));
}

TEST(StepTimeline, ParametersWhenNoFlopsAreKnown) {
  // A synthetic workload: no layers, each tensor a layer weighted by its elements.
  const ModelProfile p{.name = "tensors", .tensors = {{"t0", 100}, {"t1", 300}}};
  const StepTimeline t = step_timeline(p, "k80", milliseconds(12));
  EXPECT_EQ(t.forward_end, milliseconds(4));
  EXPECT_EQ(t.ready, ms({12, 10}));
}

TEST(StepTimeline, NoComputeMeansEverythingReadyAtOnce) {
  const StepTimeline t = step_timeline(toy(), "k80", Duration(0));
  EXPECT_EQ(t.ready, ms({0, 0, 0, 0, 0}));
}

TEST(StepTimeline, ShippedModelsLayersCoverTheirTensorsInBackwardOrder) {
  for (const auto& name : model_names()) {
    const ModelProfile& p = model_profile(name);
    std::size_t next = 0;
    double gflops = 0;
    for (const auto& l : p.layers) {
      EXPECT_EQ(l.first_tensor, next) << name << " " << l.name;
      EXPECT_GT(l.tensor_count, 0u) << name << " " << l.name;
      next += l.tensor_count;
      gflops += l.forward_gflops;
    }
    EXPECT_EQ(next, p.tensors.size()) << name;
    EXPECT_NEAR(gflops, p.forward_gflops, 1e-9 * p.forward_gflops) << name;
    const StepTimeline t = step_timeline(p, "k80", milliseconds(300));
    for (std::size_t i = 1; i < p.tensors.size(); ++i)
      EXPECT_GE(t.ready[i - 1], t.ready[i]) << name << " " << p.tensors[i].name;
    EXPECT_EQ(t.ready.front(), milliseconds(300)) << name;
    EXPECT_GT(t.ready.back(), t.forward_end) << name;
  }
}

std::vector<std::vector<int>> groups(const std::vector<GradientBucket>& buckets) {
  std::vector<std::vector<int>> out;
  for (const auto& b : buckets)
    out.push_back(b.tensors);
  return out;
}

TEST(Bucketing, NoneIsTodaysFusionAfterTheCompute) {
  const ModelProfile p = toy();
  const StepTimeline t = step_timeline(p, "k80", milliseconds(12));
  const auto buckets = plan_buckets(p, t, {.mode = Bucketing::none}, 0);
  EXPECT_EQ(groups(buckets), fuse_gradients(p, 0));
  for (const auto& b : buckets)
    EXPECT_EQ(b.ready, milliseconds(12));
}

TEST(Bucketing, KungfuSendsEachTensorWhenReady) {
  const ModelProfile p = toy();
  const auto buckets =
      plan_buckets(p, step_timeline(p, "k80", milliseconds(12)), {.mode = Bucketing::kungfu});
  EXPECT_EQ(groups(buckets), (std::vector<std::vector<int>>{{4}, {3}, {2}, {1}, {0}}));
  EXPECT_EQ(buckets[0].ready, milliseconds(6));
  EXPECT_EQ(buckets[2].ready, milliseconds(10));
  EXPECT_EQ(buckets[4].ready, milliseconds(12));
}

TEST(Bucketing, DdpFillsBucketsInReverseUntilTheirCap) {
  const ModelProfile p = toy();
  const StepTimeline t = step_timeline(p, "k80", milliseconds(12));
  // Bytes in backward order: c/bias 120, c/kernel 1.2 MB, b 8 MB, a/bias 40, a/kernel 4000.
  // First cap 1 MiB: c/bias + c/kernel (1'200'120 >= 1 MiB); then 25 MiB: the rest.
  auto buckets = plan_buckets(p, t, {.mode = Bucketing::ddp});
  EXPECT_EQ(groups(buckets), (std::vector<std::vector<int>>{{4, 3}, {2, 1, 0}}));
  EXPECT_EQ(buckets[0].ready, milliseconds(6));
  EXPECT_EQ(buckets[1].ready, milliseconds(12));
  // Small caps: a bucket closes once it holds at least its cap, so b is alone.
  buckets = plan_buckets(p, t, {.mode = Bucketing::ddp, .bucket_cap = 1000, .first_bucket = 100});
  EXPECT_EQ(groups(buckets), (std::vector<std::vector<int>>{{4}, {3}, {2}, {1, 0}}));
  EXPECT_EQ(buckets[2].ready, milliseconds(10));
}

TEST(Bucketing, HorovodFusesWhatEachCycleFindsReady) {
  const ModelProfile p = toy();
  const StepTimeline t = step_timeline(p, "k80", milliseconds(12));
  // Cycle 5 ms: ticks at 5, 10, 15. c is ready at 6 (tick 10), b at 10 (tick 10), a at 12 (15).
  auto buckets = plan_buckets(p, t, {.mode = Bucketing::horovod, .cycle = milliseconds(5)});
  EXPECT_EQ(groups(buckets), (std::vector<std::vector<int>>{{4, 3, 2}, {1, 0}}));
  EXPECT_EQ(buckets[0].ready, milliseconds(10));
  EXPECT_EQ(buckets[1].ready, milliseconds(12));
  // A 2 MB buffer: b (8 MB) goes alone.
  buckets = plan_buckets(
      p, t, {.mode = Bucketing::horovod, .fusion_bytes = 2'000'000, .cycle = milliseconds(5)});
  EXPECT_EQ(groups(buckets), (std::vector<std::vector<int>>{{4, 3}, {2}, {1, 0}}));
  EXPECT_EQ(next_cycle(milliseconds(6), milliseconds(5)), milliseconds(10));
  EXPECT_EQ(next_cycle(milliseconds(10), milliseconds(5)), milliseconds(10));
  EXPECT_EQ(next_cycle(Duration(0), milliseconds(5)), milliseconds(5));
}

TEST(Bucketing, EveryModeSendsEveryTensorOnce) {
  for (const auto& name : model_names()) {
    const ModelProfile& p = model_profile(name);
    const StepTimeline t = step_timeline(p, "v100", milliseconds(100));
    for (const Bucketing mode :
         {Bucketing::none, Bucketing::kungfu, Bucketing::ddp, Bucketing::horovod}) {
      std::vector<int> seen(p.tensors.size(), 0);
      Duration last{0};
      for (const auto& b : plan_buckets(p, t, {.mode = mode})) {
        EXPECT_GE(b.ready, last) << name;
        last = b.ready;
        for (int i : b.tensors)
          ++seen[static_cast<std::size_t>(i)];
      }
      EXPECT_EQ(seen, std::vector<int>(p.tensors.size(), 1)) << name;
    }
  }
}

}  // namespace
}  // namespace kf
