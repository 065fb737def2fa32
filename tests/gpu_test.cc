// The GPU world.
//
// Without a GPU (and in builds without CUDA) these run: device strategy names, the device
// pipeline and staged allreduce on a host-memory fake Device (runtime/device.h), the GPU step
// program on a host-memory backend (bucketing none, and kungfu / ddp overlapping the backward
// pass with the allreduces), and the clear failures of the GPU entry points (GpuContext::open,
// GpuPeer with NCCL, kfbench --device cuda).
// With a GPU they also check the CUDA reduction kernels against the CPU kernels bit for bit for
// every dtype and op (random data, and special values: inf, NaN, subnormals), and the NCCL,
// NCCL_HIERARCHICAL and STAGED allreduce paths (one GPU: single ranks, and two "hosts" of one
// worker each; two or more GPUs: NCCL across ranks and forests).
// Tests that need a GPU skip with "no CUDA device: ..." when there is none.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu.h"
#include "gpu/gpu_step_backend.h"
#include "harness.h"
#include "launch/peer.h"
#include "runtime/device_collectives.h"
#include "runtime/reduce.h"
#include "workloads/gpu_step_program.h"

#ifdef KF_WITH_CUDA
#include <cuda_runtime_api.h>

#include "gpu/cuda_device.h"
#include "gpu/reduce_kernels.h"
#endif

namespace kf {
namespace {

using testing::expect_all_ok;
using testing::run_on_all;

#define KF_NEED_GPU()                                             \
  do {                                                            \
    if (const auto why = gpu_unavailable()) GTEST_SKIP() << *why; \
  } while (0)

// ---- device strategy names ----------------------------------------------------------------------

TEST(DeviceStrategy, ParsesNames) {
  EXPECT_EQ(parse_device_strategy("NCCL"), DeviceStrategy{.path = DevicePath::nccl});
  EXPECT_EQ(parse_device_strategy("nccl"), DeviceStrategy{.path = DevicePath::nccl});
  EXPECT_EQ(parse_device_strategy("NCCL_HIERARCHICAL"),
            DeviceStrategy{.path = DevicePath::nccl_hierarchical});
  EXPECT_EQ(parse_device_strategy("staged"), DeviceStrategy{.path = DevicePath::staged});
  EXPECT_EQ(
      parse_device_strategy("STAGED:RING_RS_AG"),
      (DeviceStrategy{.path = DevicePath::staged, .host_strategy = StrategyName::ring_rs_ag}));
  EXPECT_EQ(parse_device_strategy("binary_tree_star"),
            (DeviceStrategy{.path = DevicePath::staged,
                            .host_strategy = StrategyName::binary_tree_star}));
  EXPECT_EQ(parse_device_strategy("NCCL "), std::nullopt);
  EXPECT_EQ(parse_device_strategy("STAGED:NOPE"), std::nullopt);
  EXPECT_EQ(parse_device_strategy(""), std::nullopt);
  for (const char* name : {"NCCL", "NCCL_HIERARCHICAL", "STAGED", "STAGED:HALVING_DOUBLING"}) {
    const auto s = parse_device_strategy(name);
    ASSERT_TRUE(s) << name;
    EXPECT_EQ(device_strategy_name(*s), name);
  }
  for (StrategyName s : kAllStrategyNames) {
    const auto d = parse_device_strategy(strategy_name(s));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->host_strategy, s);
  }
  EXPECT_NE(device_strategy_names().find("NCCL_HIERARCHICAL"), std::string::npos);
}

TEST(DeviceStrategy, SequencerRunsInTicketOrder) {
  PhaseSequencer seq;
  const auto a = seq.take(), b = seq.take(), c = seq.take();
  std::vector<int> ran;
  seq.ready(c, [&] { ran.push_back(3); });
  seq.ready(b, [&] { ran.push_back(2); });
  EXPECT_TRUE(ran.empty());
  seq.ready(a, [&] { ran.push_back(1); });
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

// ---- the device pipeline on a host-memory Device ------------------------------------------------

// A Device on host memory: work runs at once, notify posts. `fail_copies_from` fails every copy
// after that many (to check error reporting).
class HostDevice final : public Device {
 public:
  explicit HostDevice(int ordinal) { info_.name = "host-fake:" + std::to_string(ordinal); }
  int copies = 0;
  int fail_copies_from = -1;

  const DeviceInfo& info() const override { return info_; }
  Status allocate(std::size_t bytes, void** out) override {
    *out = std::malloc(std::max<std::size_t>(bytes, 1));
    allocations[*out] = bytes;
    return Status{};
  }
  void release(void* p) noexcept override {
    allocations.erase(p);
    std::free(p);
  }
  Status allocate_pinned(std::size_t bytes, void** out) override {
    ++pinned_allocations;
    return allocate(bytes, out);
  }
  void release_pinned(void* p) noexcept override { std::free(p); }
  Status create_stream(std::unique_ptr<DeviceStream>* out) override {
    *out = std::make_unique<DeviceStream>();
    return Status{};
  }
  Status create_event(std::unique_ptr<DeviceEvent>* out) override {
    *out = std::make_unique<DeviceEvent>();
    return Status{};
  }
  Status copy(void* dst, const void* src, std::size_t bytes, CopyKind, DeviceStream&) override {
    if (fail_copies_from >= 0 && copies++ >= fail_copies_from)
      return Status(ErrorCode::device, "fakeMemcpy on " + info_.name + ": injected failure");
    std::memmove(dst, src, bytes);
    return Status{};
  }
  Status fill_zero(void* dst, std::size_t bytes, DeviceStream&) override {
    std::memset(dst, 0, bytes);
    return Status{};
  }
  Status reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                DeviceStream&) override {
    reduce_into(dst, src, count, dtype, op);
    return Status{};
  }
  Status divide(void* data, std::size_t count, DType dtype, std::size_t divisor,
                DeviceStream&) override {
    kf::divide(data, count, dtype, divisor);
    return Status{};
  }
  Status record(DeviceEvent&, DeviceStream&) override { return Status{}; }
  Status wait(DeviceStream&, DeviceEvent&) override { return Status{}; }
  Status synchronize(DeviceStream&) override { return Status{}; }
  Status notify(DeviceStream&, Executor& executor, std::function<void(Status)> done) override {
    executor.post([done = std::move(done)] { done(Status{}); });
    return Status{};
  }
  int pinned_allocations = 0;
  std::map<const void*, std::size_t> allocations;  // live allocations: bytes

 private:
  DeviceInfo info_;
};

struct FakeRanks {
  std::vector<std::unique_ptr<HostDevice>> devices;
  std::vector<std::unique_ptr<DeviceStaging>> staging;
  explicit FakeRanks(int n, std::size_t piece_bytes) {
    for (int r = 0; r < n; ++r) {
      devices.push_back(std::make_unique<HostDevice>(r));
      std::unique_ptr<DeviceStaging> s;
      EXPECT_TRUE(DeviceStaging::create(*devices.back(), &s).ok());
      s->piece_bytes = piece_bytes;
      staging.push_back(std::move(s));
    }
  }
};

class StagedPipeline
    : public ::testing::TestWithParam<std::tuple<int, DType, ReduceOp, std::size_t>> {};

TEST_P(StagedPipeline, MatchesTheReference) {
  const auto [n, dtype, op, piece] = GetParam();
  if (!reduce_op_supports(op, dtype)) GTEST_SKIP() << "avg needs a floating dtype";
  constexpr std::size_t kCount = 1000;
  InprocWorld world(n, {.strategy = StrategyName::ring_rs_ag});
  FakeRanks fake(n, piece);
  std::vector<Buffer> data;
  for (int r = 0; r < n; ++r)
    data.push_back(testing::make_input(r, kCount, dtype, op));
  const auto statuses = run_on_all(world, [&](Engine& e, DoneCallback done) {
    auto& b = data[static_cast<std::size_t>(e.rank())];
    staged_allreduce(e, *fake.staging[static_cast<std::size_t>(e.rank())],
                     {.name = "grads",
                      .input = b.view().data(),
                      .output = b.view().data(),
                      .count = kCount,
                      .dtype = dtype,
                      .op = op},
                     nullptr, std::move(done));
  });
  expect_all_ok(statuses);
  const auto ranks = testing::all_ranks(n);
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < kCount; ++i) {
      const double want = testing::reference(ranks, i, op, dtype);  // avg: divided already
      ASSERT_NEAR(testing::load(data[static_cast<std::size_t>(r)].view(), i), want,
                  testing::tolerance(dtype, op) * std::max(1.0, std::abs(want)))
          << "rank " << r << " element " << i;
    }
  }
  // The pool keeps its pinned block for the next operation.
  EXPECT_EQ(fake.devices[0]->pinned_allocations, 1);
}

INSTANTIATE_TEST_SUITE_P(
    Host, StagedPipeline,
    ::testing::Combine(::testing::Values(1, 2, 3),
                       ::testing::Values(DType::f32, DType::i32, DType::f16, DType::u8),
                       ::testing::Values(ReduceOp::sum, ReduceOp::max, ReduceOp::avg),
                       ::testing::Values(std::size_t{64}, std::size_t{4} << 20)));

TEST(StagedPipelineErrors, DeviceFailureNamesTheCallAndTheOperationAndDoesNotHangPeers) {
  constexpr int n = 3;
  constexpr std::size_t kCount = 256;
  InprocWorld world(n);
  FakeRanks fake(n, 64);
  fake.devices[1]->fail_copies_from = 2;  // the third copy on rank 1 fails
  std::vector<std::vector<float>> data(n, std::vector<float>(kCount, 1.0f));
  const auto statuses = run_on_all(
      world,
      [&](Engine& e, DoneCallback done) {
        auto& v = data[static_cast<std::size_t>(e.rank())];
        staged_allreduce(e, *fake.staging[static_cast<std::size_t>(e.rank())],
                         {.name = "grads", .input = v.data(), .output = v.data(), .count = kCount},
                         nullptr, std::move(done));
      },
      std::chrono::seconds(30));
  EXPECT_TRUE(statuses[0].ok()) << statuses[0].to_string();
  EXPECT_TRUE(statuses[2].ok()) << statuses[2].to_string();
  ASSERT_FALSE(statuses[1].ok());
  EXPECT_EQ(statuses[1].code(), ErrorCode::device);
  EXPECT_NE(statuses[1].message().find("allreduce 'grads' on rank 1"), std::string::npos)
      << statuses[1].message();
  EXPECT_NE(statuses[1].message().find("fakeMemcpy"), std::string::npos) << statuses[1].message();
}

TEST(StagedPipelineErrors, RejectsAvgOnIntegers) {
  InprocWorld world(1);
  FakeRanks fake(1, 64);
  std::vector<std::int32_t> v(8, 1);
  const auto statuses = run_on_all(world, [&](Engine& e, DoneCallback done) {
    staged_allreduce(e, *fake.staging[0],
                     {.name = "x",
                      .input = v.data(),
                      .output = v.data(),
                      .count = v.size(),
                      .dtype = DType::i32,
                      .op = ReduceOp::avg},
                     nullptr, std::move(done));
  });
  EXPECT_EQ(statuses[0].code(), ErrorCode::invalid_argument) << statuses[0].to_string();
}

// ---- without a GPU: clear failures
// ---------------------------------------------------------------

// A tool of this build: where the build put it, or beside this test's own folder (a bundle made
// by bench/gpu_bundle.sh, carried elsewhere, keeps the build's layout).
std::string tool(const char* built, const char* relative) {
  if (::access(built, X_OK) == 0) return built;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path() / relative)
      .string();
}

bool names_missing_gpu(const std::string& text) {
  return text.find("no CUDA device") != std::string::npos ||
         text.find("built without CUDA") != std::string::npos;
}

// ---- the GPU step program (workloads/gpu_step_program.h) on a host-memory backend ---------------

// The step program's GPU on host memory: products really computed (k x k times k x m), the
// allreduce by the staged path over a HostDevice. `corrupt` changes one element of rank 0's
// result after its allreduce, as a broken path would.
//
// For the overlap tests it logs every product, fill and allreduce start in the order they come
// (products and fills from the compute's thread, allreduces from the engine's), and it paces the
// compute as a GPU busy with products would: a product waits (up to 2 s, once per backend) until
// every allocation whose bytes have all been filled since its last allreduce has had its
// allreduce started. A program that overlaps launches those at once; one that does not makes a
// product time out (`stalled`).
class HostStepBackend final : public GpuStepBackend {
 public:
  struct Entry {
    enum Kind { gemm, fill, allreduce } kind;
    std::size_t rows = 0;          // gemm
    const void* bucket = nullptr;  // fill (the allocation filled into), allreduce
    bool complete = false;         // allreduce: every byte of the bucket filled before it
  };
  // What a backend did, kept by the test (the program owns and destroys the backend).
  struct Counters {
    std::size_t rows = 0;
    int shutdowns = 0;
    std::vector<Entry> log;
    bool stalled = false;
  };
  HostStepBackend(int rank, std::size_t k, Counters& counters)
      : counters_(counters), device_(rank), k_(k), a_(k * k, 1.0f), c_(k * k) {
    EXPECT_TRUE(DeviceStaging::create(device_, &staging_).ok());
  }
  Device& device() override { return device_; }
  std::size_t gemm_dim() const override { return k_; }
  Status gemm(std::size_t m, DeviceStream&) override {
    if (m < 1 || m > k_) return Status(ErrorCode::invalid_argument, "gemm: m out of range");
    pace();
    for (std::size_t j = 0; j < m; ++j)
      for (std::size_t i = 0; i < k_; ++i) {
        float sum = 0;
        for (std::size_t p = 0; p < k_; ++p)
          sum += a_[p * k_ + i] * a_[j * k_ + p];
        c_[j * k_ + i] = sum;
      }
    std::lock_guard<std::mutex> lock(mu_);
    counters_.rows += m;
    counters_.log.push_back({.kind = Entry::gemm, .rows = m});
    return Status{};
  }
  Status fill(float* data, std::size_t count, float value, DeviceStream&) override {
    std::fill(data, data + count, value);
    std::lock_guard<std::mutex> lock(mu_);
    const void* bucket = allocation_of(data);
    filled_[bucket] += count * sizeof(float);
    counters_.log.push_back({.kind = Entry::fill, .bucket = bucket});
    return Status{};
  }
  void allreduce(Engine& engine, DeviceAllreduceOptions options, DoneCallback done) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      const void* bucket = options.input;
      const bool complete = filled_[bucket] == device_.allocations.at(bucket);
      filled_[bucket] = 0;
      counters_.log.push_back({.kind = Entry::allreduce, .bucket = bucket, .complete = complete});
    }
    ready_.notify_all();
    float* out = static_cast<float*>(options.output);
    staged_allreduce(engine, *staging_, std::move(options), nullptr,
                     [this, out, rank = engine.rank(), done = std::move(done)](Status s) {
                       if (corrupt && rank == 0) out[3] += 1;
                       done(s);
                     });
  }
  TimePoint now() const override {
    return TimePoint(
        std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now().time_since_epoch()));
  }
  void shutdown() override { ++counters_.shutdowns; }

  bool corrupt = false;

 private:
  const void* allocation_of(const void* p) const {
    auto it = device_.allocations.upper_bound(p);
    EXPECT_NE(it, device_.allocations.begin()) << "a fill outside every allocation";
    return std::prev(it)->first;
  }
  // Filled allocations whose allreduce has not started (under mu_).
  bool unsent() const {
    for (const auto& [bucket, bytes] : filled_)
      if (bytes > 0 && bytes == device_.allocations.at(bucket)) return true;
    return false;
  }
  void pace() {
    std::unique_lock<std::mutex> lock(mu_);
    if (counters_.stalled) return;
    if (!ready_.wait_for(lock, std::chrono::seconds(2), [this] { return !unsent(); }))
      counters_.stalled = true;
  }

  Counters& counters_;
  HostDevice device_;
  std::size_t k_;
  std::vector<float> a_, c_;
  std::unique_ptr<DeviceStaging> staging_;
  std::mutex mu_;  // the compute's thread vs the engine's
  std::condition_variable ready_;
  std::map<const void*, std::size_t> filled_;  // bytes filled since the last allreduce
};

// Runs `steps` steps of the GPU step program on every rank of a 2-rank in-process world.
std::vector<Status> run_gpu_steps(const ModelProfile& model, bool corrupt, int steps,
                                  std::vector<HostStepBackend::Counters>* counters,
                                  std::vector<std::map<std::string, double>>* values) {
  constexpr int n = 2;
  InprocWorld world(n);
  std::vector<std::unique_ptr<StepProgram>> programs;
  counters->resize(n);
  for (int r = 0; r < n; ++r) {
    auto backend =
        std::make_unique<HostStepBackend>(r, 64, (*counters)[static_cast<std::size_t>(r)]);
    backend->corrupt = corrupt;
    programs.push_back(make_gpu_step_program(
        std::move(backend), {.model = &model, .fusion_bytes = 0, .verify = true}, r, n));
  }
  std::vector<Status> last(n);
  for (int step = 0; step < steps; ++step) {
    for (auto& p : programs)
      p->compute(step, 16)();
    last = run_on_all(world, [&](Engine& e, DoneCallback done) {
      programs[static_cast<std::size_t>(e.rank())]->communicate(
          {.engine = e, .step = step, .batch_per_worker = 16}, std::move(done));
    });
  }
  for (auto& p : programs) {
    values->emplace_back();
    p->values(values->back());
  }
  programs.clear();
  return last;
}

TEST(GpuStepProgram, ComputesTheProfiledFlopsAndItsBucketsSumOnEveryRank) {
  // 2 x 64^3 FLOPs per full product: 0.0005 GFLOP forward x 3 x 16 samples = 24 MFLOP.
  const ModelProfile model{
      .name = "tiny",
      .tensors = {{.name = "fc.w", .count = 1000}, {.name = "fc.b", .count = 10}},
      .forward_gflops = 0.0005};
  std::vector<HostStepBackend::Counters> counters;
  std::vector<std::map<std::string, double>> values;
  const auto statuses = run_gpu_steps(model, false, 3, &counters, &values);
  expect_all_ok(statuses);
  // ceil(24e6 / (2 x 64^3)) = 46 products of 64 rows (the rows rounded up to 8): per step.
  EXPECT_EQ(counters[0].rows, 3u * 46 * 64);
  EXPECT_EQ(counters[1].rows, 3u * 46 * 64);
  EXPECT_EQ(counters[0].shutdowns, 1);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_TRUE(values[0].count("gpu_compute_ms"));
  EXPECT_GT(values[0].at("gpu_tflops"), 0);
}

TEST(GpuStepProgram, VerifyNamesTheBucketAndTheWrongElement) {
  const ModelProfile model{
      .name = "tiny", .tensors = {{.name = "fc.w", .count = 100}}, .forward_gflops = 0};
  std::vector<HostStepBackend::Counters> counters;
  std::vector<std::map<std::string, double>> values;
  const auto statuses = run_gpu_steps(model, true, 1, &counters, &values);
  EXPECT_TRUE(statuses[1].ok()) << statuses[1].to_string();
  ASSERT_FALSE(statuses[0].ok());
  EXPECT_NE(statuses[0].message().find("verify: device allreduce of grad/fc.w at step 0 on rank 0 "
                                       "of 2: element 3 is 4, expected 3"),
            std::string::npos)
      << statuses[0].message();
}

// ---- overlap: buckets allreduced as the backward pass makes them --------------------------------

// Four layers with FLOPs but one (a norm), sizes such that ddp with a 4000-byte first bucket and
// 8000-byte buckets makes three buckets: {l3.b, l3.w}, {l2.*, l1.*}, {l0.*}.
ModelProfile layered_model() {
  return {
      .name = "layered",
      .tensors = {{.name = "l0.w", .count = 3000},
                  {.name = "l0.b", .count = 10},
                  {.name = "l1.w", .count = 2000},
                  {.name = "l1.b", .count = 10},
                  {.name = "l2.w", .count = 64},
                  {.name = "l2.b", .count = 64},
                  {.name = "l3.w", .count = 1000},
                  {.name = "l3.b", .count = 10}},
      .forward_gflops = 0.0005,
      .layers = {{.name = "l0", .first_tensor = 0, .tensor_count = 2, .forward_gflops = 0.0002},
                 {.name = "l1", .first_tensor = 2, .tensor_count = 2, .forward_gflops = 0.0002},
                 {.name = "l2", .first_tensor = 4, .tensor_count = 2, .forward_gflops = 0},
                 {.name = "l3", .first_tensor = 6, .tensor_count = 2, .forward_gflops = 0.0001}}};
}

struct OverlapRun {
  std::vector<Status> last;
  std::vector<HostStepBackend::Counters> counters;
  // Per step, per rank: the backend's log of that step.
  std::vector<std::vector<std::vector<HostStepBackend::Entry>>> logs;
  std::vector<std::map<std::string, double>> values;  // per rank, after the last step
  std::size_t timeline_layers = 0;
};

// One step of every rank's program, as the Trainer runs it: begin() and compute() on the engine's
// executor, the compute on a thread of its own, communicate() on the executor once the compute
// has returned. The ranks' statuses.
std::vector<Status> run_trainer_step(InprocWorld& world,
                                     std::vector<std::unique_ptr<StepProgram>>& programs, int step,
                                     int batch) {
  std::vector<std::thread> computes(programs.size());
  auto statuses = run_on_all(world, [&](Engine& e, DoneCallback done) {
    StepProgram& p = *programs[static_cast<std::size_t>(e.rank())];
    const StepContext ctx{.engine = e, .step = step, .batch_per_worker = batch};
    p.begin(ctx);
    computes[static_cast<std::size_t>(e.rank())] =
        std::thread([&p, &e, ctx, work = p.compute(step, batch), done]() mutable {
          work();
          e.executor().post([&p, ctx, done] { p.communicate(ctx, done); });
        });
  });
  for (auto& t : computes)
    if (t.joinable()) t.join();
  return statuses;
}

// Runs `steps` steps on a 2-rank in-process world over the host-memory backend.
OverlapRun run_overlap_steps(const ModelProfile& model, BucketingOptions bucketing, int steps) {
  constexpr int n = 2, batch = 16;
  InprocWorld world(n);
  OverlapRun run;
  run.counters.resize(n);
  std::vector<std::unique_ptr<StepProgram>> programs;
  for (int r = 0; r < n; ++r) {
    programs.push_back(make_gpu_step_program(
        std::make_unique<HostStepBackend>(r, 64, run.counters[static_cast<std::size_t>(r)]),
        {.model = &model, .verify = true, .bucketing = bucketing}, r, n));
  }
  for (int step = 0; step < steps; ++step) {
    run.last = run_trainer_step(world, programs, step, batch);
    run.logs.emplace_back();
    for (auto& c : run.counters)
      run.logs.back().push_back(std::exchange(c.log, {}));
  }
  if (auto tl = programs[0]->timeline()) run.timeline_layers = tl->backward.size();
  for (auto& p : programs) {
    run.values.emplace_back();
    p->values(run.values.back());
  }
  programs.clear();
  return run;
}

std::size_t gemm_rows(const std::vector<HostStepBackend::Entry>& log) {
  std::size_t rows = 0;
  for (const auto& e : log)
    if (e.kind == HostStepBackend::Entry::gemm) rows += e.rows;
  return rows;
}

// The overlap contract on one rank's step: every bucket allreduced once, each after all its bytes
// were filled, the first before the last layer's backward products were queued.
void expect_overlapped(const std::vector<HostStepBackend::Entry>& log, std::size_t buckets,
                       const std::string& where) {
  using Entry = HostStepBackend::Entry;
  std::map<const void*, int> allreduced;
  std::size_t first_allreduce = log.size(), last_gemm = 0;
  for (std::size_t i = 0; i < log.size(); ++i) {
    if (log[i].kind == Entry::gemm) last_gemm = i;
    if (log[i].kind != Entry::allreduce) continue;
    first_allreduce = std::min(first_allreduce, i);
    ++allreduced[log[i].bucket];
    EXPECT_TRUE(log[i].complete) << where << ": an allreduce before all its tensors were filled";
  }
  EXPECT_EQ(allreduced.size(), buckets) << where;
  for (const auto& [bucket, times] : allreduced)
    EXPECT_EQ(times, 1) << where << ": a bucket allreduced " << times << " times";
  // The last layer's backward products: those after the last fill before the last product.
  std::size_t last_layer_begin = last_gemm;
  while (last_layer_begin > 0 && log[last_layer_begin - 1].kind != Entry::fill)
    --last_layer_begin;
  while (log[last_layer_begin].kind != Entry::gemm)
    ++last_layer_begin;
  EXPECT_LT(first_allreduce, last_layer_begin)
      << where << ": the first allreduce started only after the last layer's products";
}

void expect_overlap_mode(BucketingOptions bucketing, std::size_t buckets) {
  const ModelProfile model = layered_model();
  constexpr int steps = 3;
  const OverlapRun run = run_overlap_steps(model, bucketing, steps);
  expect_all_ok(run.last);  // with verify: every element of every bucket summed right
  std::vector<HostStepBackend::Counters> none_counters;
  std::vector<std::map<std::string, double>> none_values;
  expect_all_ok(run_gpu_steps(model, false, 1, &none_counters, &none_values));
  for (int step = 0; step < steps; ++step) {
    for (std::size_t r = 0; r < run.logs[static_cast<std::size_t>(step)].size(); ++r) {
      const auto& log = run.logs[static_cast<std::size_t>(step)][r];
      const std::string where = fmt::format("step {} rank {}", step, r);
      expect_overlapped(log, buckets, where);
      // The same products as bucketing none's: the same rows, so the same FLOPs, and the same
      // shapes (never split at a layer's end), so the same rate.
      EXPECT_EQ(gemm_rows(log), none_counters[r].rows) << where;
      std::set<std::size_t> shapes;
      for (const auto& e : log)
        if (e.kind == HostStepBackend::Entry::gemm) shapes.insert(e.rows);
      EXPECT_EQ(shapes.size(), 1u) << where << ": products of several shapes";
    }
  }
  for (const auto& c : run.counters) {
    EXPECT_FALSE(c.stalled) << "a product waited 2 s for an allreduce that did not start";
    EXPECT_EQ(c.shutdowns, 1);
  }
  EXPECT_EQ(run.timeline_layers, model.layers.size());
  for (const auto& v : run.values) {
    ASSERT_TRUE(v.count("gpu_comm_ms") && v.count("gpu_exposed_comm_ms"));
    EXPECT_GT(v.at("gpu_comm_ms"), 0);
    EXPECT_GE(v.at("gpu_exposed_comm_ms"), 0);
    EXPECT_LE(v.at("gpu_exposed_comm_ms"), v.at("gpu_comm_ms"));
    EXPECT_GT(v.at("gpu_tflops"), 0);
  }
}

TEST(GpuStepProgramOverlap, DdpBucketsGoAsTheBackwardPassFillsThem) {
  BucketingOptions ddp{.mode = Bucketing::ddp, .bucket_cap = 8000, .first_bucket = 4000};
  expect_overlap_mode(ddp, 3);
}

TEST(GpuStepProgramOverlap, KungfuTensorsGoAsTheBackwardPassFillsThem) {
  expect_overlap_mode({.mode = Bucketing::kungfu}, 8);
}

TEST(GpuStepProgramOverlap, NoneKeepsComputeThenEveryBucket) {
  // Bucketing none: every product, then every fill, then the allreduces; no overlap values.
  const ModelProfile model = layered_model();
  std::vector<HostStepBackend::Counters> counters;
  std::vector<std::map<std::string, double>> values;
  expect_all_ok(run_gpu_steps(model, false, 1, &counters, &values));
  using Entry = HostStepBackend::Entry;
  const auto& log = counters[0].log;
  std::size_t last_gemm = 0, first_fill = log.size(), first_allreduce = log.size(), last_fill = 0;
  for (std::size_t i = 0; i < log.size(); ++i) {
    if (log[i].kind == Entry::gemm) last_gemm = i;
    if (log[i].kind == Entry::fill) {
      first_fill = std::min(first_fill, i);
      last_fill = i;
    }
    if (log[i].kind == Entry::allreduce) first_allreduce = std::min(first_allreduce, i);
  }
  EXPECT_LT(last_gemm, first_fill);
  EXPECT_LT(last_fill, first_allreduce);
  EXPECT_FALSE(values[0].count("gpu_comm_ms"));
}

TEST(GpuStepProgramOverlap, RefusesHorovodNamingTheFlag) {
  const ModelProfile model = layered_model();
  HostStepBackend::Counters counters;
  try {
    (void)make_gpu_step_program(std::make_unique<HostStepBackend>(0, 64, counters),
                                {.model = &model, .bucketing = {.mode = Bucketing::horovod}}, 0, 1);
    ADD_FAILURE() << "horovod bucketing was accepted on the GPU";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--bucketing horovod: not with -gpu"), std::string::npos)
        << e.what();
  }
}

TEST(GpuUnavailable, EntryPointsFailWithAClearMessage) {
  const auto why = gpu_unavailable();
  if (!why) GTEST_SKIP() << "a CUDA device is present: nothing to check here";
  EXPECT_TRUE(names_missing_gpu(*why)) << *why;
  EXPECT_EQ(gpu_device_count(), 0);
  try {
    (void)GpuContext::open(0, {});
    ADD_FAILURE() << "GpuContext::open succeeded without a device";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(names_missing_gpu(e.what())) << e.what();
  }
  // Selecting NCCL on a peer without a device: an exception with the reason, not a crash.
  Peer peer(WorkerConfig{.cluster = ClusterSpec::local(1), .rank = 0});
  try {
    GpuPeer gpu(peer, {.strategy = {.path = DevicePath::nccl}});
    ADD_FAILURE() << "GpuPeer with NCCL succeeded without a device";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(names_missing_gpu(e.what())) << e.what();
  }
}

// kfbench --device cuda: without a GPU a non-zero exit and the reason; with one, a table.
TEST(GpuUnavailable, KfbenchDeviceCuda) {
  const std::string out = ::testing::TempDir() + "/kfbench_device_cuda.txt";
  const std::string cmd = std::string(
                              "env -u KUNGFU_SELF_SPEC -u KUNGFU_INIT_PEERS -u RANK "
                              "-u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID ") +
                          tool(KFBENCH, "apps/kfbench") +
                          " allreduce --device cuda -b 1K -e 64K -n 3 -w 1 > " + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::string text;
  if (FILE* f = std::fopen(out.c_str(), "r")) {
    char buf[4096];
    for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;)
      text.append(buf, got);
    std::fclose(f);
  }
  if (gpu_unavailable()) {
    EXPECT_NE(status, 0) << text;
    EXPECT_TRUE(names_missing_gpu(text)) << text;
    EXPECT_NE(text.find("kfbench: --device cuda:"), std::string::npos) << text;
  } else {
    EXPECT_EQ(status, 0) << text;
    EXPECT_NE(text.find("Avg bus bandwidth"), std::string::npos) << text;
  }
}

// kftrain -gpu without a GPU: a non-zero exit naming why, before any peer is waited for.
TEST(GpuUnavailable, KftrainGpu) {
  if (!gpu_unavailable()) GTEST_SKIP() << "a CUDA device is present: nothing to check here";
  const std::string out = ::testing::TempDir() + "/kftrain_gpu.txt";
  const std::string cmd = std::string(
                              "env -u KUNGFU_SELF_SPEC -u KUNGFU_INIT_PEERS -u RANK "
                              "-u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID ") +
                          tool(KFTRAIN, "apps/kftrain") + " -gpu -gpu-strategy NCCL -steps 1 > " +
                          out + " 2>&1";
  const int status = std::system(cmd.c_str());
  std::string text;
  if (FILE* f = std::fopen(out.c_str(), "r")) {
    char buf[4096];
    for (std::size_t got; (got = std::fread(buf, 1, sizeof buf, f)) > 0;)
      text.append(buf, got);
    std::fclose(f);
  }
  EXPECT_NE(status, 0) << text;
  EXPECT_NE(text.find("kftrain: -gpu: "), std::string::npos) << text;
  EXPECT_TRUE(names_missing_gpu(text)) << text;
}

#ifdef KF_WITH_CUDA

// ---- with a GPU: kernels ------------------------------------------------------------------------

// Random finite values (floats) or random bits (integers).
std::vector<std::byte> random_elements(std::size_t count, DType t, std::mt19937_64& rng) {
  std::vector<std::byte> out(count * dtype_size(t));
  if (!is_floating(t)) {
    for (auto& b : out)
      b = static_cast<std::byte>(rng());
    return out;
  }
  Buffer b(count, t);
  std::uniform_real_distribution<double> dist(-100.0, 100.0);
  for (std::size_t i = 0; i < count; ++i)
    testing::store(b.view(), i, dist(rng));
  if (!out.empty()) std::memcpy(out.data(), b.view().data(), out.size());
  return out;
}

class GpuKernels : public ::testing::TestWithParam<std::tuple<DType, ReduceOp>> {};

TEST_P(GpuKernels, MatchTheCpuKernelsBitForBit) {
  KF_NEED_GPU();
  const auto [dtype, op] = GetParam();
  if (!reduce_op_supports(op, dtype)) GTEST_SKIP() << "avg needs a floating dtype";
  std::mt19937_64 rng(42 + static_cast<int>(dtype) * 7 + static_cast<int>(op));
  const std::size_t elem = dtype_size(dtype);
  // Sizes around the vector width and a large odd one; offsets misalign the element loop path.
  for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{33},
                            std::size_t{4096}, std::size_t{1000003}}) {
    for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
      const auto a = random_elements(count + offset, dtype, rng);
      const auto b = random_elements(count + offset, dtype, rng);
      auto want = a;
      reduce_into(want.data() + offset * elem, b.data() + offset * elem, count, dtype, op);
      if (op == ReduceOp::avg) divide(want.data() + offset * elem, count, dtype, 3);
      void *da = nullptr, *db = nullptr;
      ASSERT_EQ(cudaMalloc(&da, a.size() + 1), cudaSuccess);
      ASSERT_EQ(cudaMalloc(&db, b.size() + 1), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
      auto* pa = static_cast<std::byte*>(da) + offset * elem;
      auto* pb = static_cast<std::byte*>(db) + offset * elem;
      ASSERT_EQ(gpu::launch_reduce(pa, pb, count, dtype, op, nullptr, 0), cudaSuccess);
      if (op == ReduceOp::avg) {
        ASSERT_EQ(gpu::launch_divide(pa, count, dtype, 3, nullptr, 0), cudaSuccess);
      }
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<std::byte> got(a.size());
      ASSERT_EQ(cudaMemcpy(got.data(), da, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      cudaFree(da);
      cudaFree(db);
      for (std::size_t i = 0; i < count + offset; ++i) {
        ASSERT_EQ(std::memcmp(got.data() + i * elem, want.data() + i * elem, elem), 0)
            << dtype_name(dtype) << " " << reduce_op_name(op) << " count " << count << " offset "
            << offset << ": element " << i << " differs";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllDTypesAndOps, GpuKernels,
                         ::testing::Combine(::testing::ValuesIn(kAllDTypes),
                                            ::testing::ValuesIn(kAllReduceOps)),
                         [](const auto& p) {
                           return std::string(dtype_name(std::get<0>(p.param))) + "_" +
                                  std::string(reduce_op_name(std::get<1>(p.param)));
                         });

// Infinities, NaNs (with payloads), signed zeros, subnormals and the largest finite values, in
// every pairing, on the vector path (aligned) and the element path (misaligned). A finite result
// must equal the CPU's bit for bit; where the CPU makes a NaN the GPU must too (NaN payloads made
// by arithmetic differ between x86 and the GPU, which returns its canonical NaN).
class GpuKernelSpecials : public ::testing::TestWithParam<std::tuple<DType, ReduceOp>> {};

std::vector<double> special_values(DType t) {
  const double inf = std::numeric_limits<double>::infinity();
  // The largest finite value and the smallest subnormal of each format.
  const double big = t == DType::f16    ? 65504.0
                     : t == DType::bf16 ? 3.3895313892515355e38
                     : t == DType::f32  ? 3.4028234663852886e38
                                        : 1.7976931348623157e308;
  const double tiny = t == DType::f16    ? 5.960464477539063e-08
                      : t == DType::bf16 ? 9.183549615799121e-41
                      : t == DType::f32  ? 1.401298464324817e-45
                                         : 4.9406564584124654e-324;
  return {0.0, -0.0, 1.0, -1.5, inf, -inf, big, -big, tiny, -tiny, 3.0e4, 0.5};
}

TEST_P(GpuKernelSpecials, AgreeWithTheCpuKernels) {
  KF_NEED_GPU();
  const auto [dtype, op] = GetParam();
  const std::size_t elem = dtype_size(dtype);
  const auto values = special_values(dtype);
  // Every (a, b) pairing of the values plus NaNs with payloads, repeated to fill whole vectors.
  std::vector<double> as, bs;
  for (double x : values)
    for (double y : values) {
      as.push_back(x);
      bs.push_back(y);
    }
  const std::size_t pairs = as.size();
  const std::size_t count = 4 * pairs + 8;  // room for NaN rows
  std::vector<std::byte> a(count * elem), b(count * elem);
  {
    Buffer ta(count, dtype), tb(count, dtype);
    for (std::size_t i = 0; i < count; ++i) {
      testing::store(ta.view(), i, as[i % pairs]);
      testing::store(tb.view(), i, bs[(i / pairs + i) % pairs]);
    }
    std::memcpy(a.data(), ta.view().data(), a.size());
    std::memcpy(b.data(), tb.view().data(), b.size());
  }
  // NaNs with payloads, in a and in b, beside ordinary values in the same vector.
  auto put_nan = [&](std::vector<std::byte>& v, std::size_t i, std::uint64_t payload) {
    switch (dtype) {
      case DType::f16: {
        const std::uint16_t h = static_cast<std::uint16_t>(0x7c00u | (payload & 0x3ffu) | 1u);
        std::memcpy(v.data() + i * elem, &h, elem);
        break;
      }
      case DType::bf16: {
        const std::uint16_t h = static_cast<std::uint16_t>(0x7f80u | (payload & 0x7fu) | 1u);
        std::memcpy(v.data() + i * elem, &h, elem);
        break;
      }
      case DType::f32: {
        const std::uint32_t f =
            0x7f800000u | (static_cast<std::uint32_t>(payload) & 0x7fffffu) | 1u;
        std::memcpy(v.data() + i * elem, &f, elem);
        break;
      }
      default: {
        const std::uint64_t d = 0x7ff0000000000000ull | (payload & 0xfffffffffffffull) | 1u;
        std::memcpy(v.data() + i * elem, &d, elem);
        break;
      }
    }
  };
  for (std::size_t k = 0; k < 8; ++k) {
    put_nan(a, count - 8 + k, 0x155 + k);
    put_nan(b, 3 + 5 * k, 0x2aa + k);
  }
  auto is_nan = [&](const std::byte* p) {
    ConstBufferView v(p, 1, dtype);
    const double x = testing::load(v, 0);
    return x != x;
  };
  for (std::size_t offset : {std::size_t{0}, std::size_t{1}}) {
    const std::size_t n = count - offset;
    auto want = a;
    reduce_into(want.data() + offset * elem, b.data() + offset * elem, n, dtype, op);
    void *da = nullptr, *db = nullptr;
    ASSERT_EQ(cudaMalloc(&da, a.size()), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&db, b.size()), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(
        gpu::launch_reduce(static_cast<std::byte*>(da) + offset * elem,
                           static_cast<std::byte*>(db) + offset * elem, n, dtype, op, nullptr, 0),
        cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<std::byte> got(a.size());
    ASSERT_EQ(cudaMemcpy(got.data(), da, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(da);
    cudaFree(db);
    for (std::size_t i = 0; i < count; ++i) {
      const std::byte* g = got.data() + i * elem;
      const std::byte* w = want.data() + i * elem;
      if (is_nan(w)) {
        EXPECT_TRUE(is_nan(g)) << dtype_name(dtype) << " " << reduce_op_name(op) << " offset "
                               << offset << ": element " << i << " should be NaN";
      } else {
        ASSERT_EQ(std::memcmp(g, w, elem), 0)
            << dtype_name(dtype) << " " << reduce_op_name(op) << " offset " << offset
            << ": element " << i << " differs (" << testing::load(ConstBufferView(g, 1, dtype), 0)
            << " vs " << testing::load(ConstBufferView(w, 1, dtype), 0) << ")";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(FloatingDTypes, GpuKernelSpecials,
                         ::testing::Combine(::testing::Values(DType::f16, DType::bf16, DType::f32,
                                                              DType::f64),
                                            ::testing::Values(ReduceOp::sum, ReduceOp::min,
                                                              ReduceOp::max, ReduceOp::prod)),
                         [](const auto& p) {
                           return std::string(dtype_name(std::get<0>(p.param))) + "_" +
                                  std::string(reduce_op_name(std::get<1>(p.param)));
                         });

TEST(GpuDevice, CopiesAndNotifies) {
  KF_NEED_GPU();
  std::unique_ptr<gpu::CudaDevice> device;
  ASSERT_TRUE(gpu::CudaDevice::open(0, &device).ok());
  EXPECT_GT(device->info().memory_bandwidth_gbs, 0) << device->info().name;
  std::unique_ptr<DeviceStream> stream;
  ASSERT_TRUE(device->create_stream(&stream).ok());
  void *d = nullptr, *pinned = nullptr;
  ASSERT_TRUE(device->allocate(1 << 20, &d).ok());
  ASSERT_TRUE(device->allocate_pinned(1 << 20, &pinned).ok());
  std::memset(pinned, 7, 1 << 20);
  ASSERT_TRUE(device->copy(d, pinned, 1 << 20, CopyKind::host_to_device, *stream).ok());
  ASSERT_TRUE(device->fill_zero(pinned, 0, *stream).ok());
  std::vector<std::byte> back(1 << 20);
  ASSERT_TRUE(device->copy(back.data(), d, back.size(), CopyKind::device_to_host, *stream).ok());
  EventLoop loop;
  std::promise<Status> notified;
  ASSERT_TRUE(device->notify(*stream, loop, [&](Status s) { notified.set_value(s); }).ok());
  auto f = notified.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_TRUE(f.get().ok());
  EXPECT_EQ(back[12345], std::byte{7});
  // An error names the call and the device.
  void* huge = nullptr;
  const Status s = device->allocate(std::size_t{1} << 62, &huge);
  EXPECT_EQ(s.code(), ErrorCode::device);
  EXPECT_NE(s.message().find("cudaMalloc"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cuda:0"), std::string::npos) << s.message();
  device->release(d);
  device->release_pinned(pinned);
}

// ---- with a GPU: the allreduce paths ------------------------------------------------------------

void check_single_rank_path(const char* strategy, DType dtype, ReduceOp op) {
  Peer peer(WorkerConfig{.cluster = ClusterSpec::local(1), .rank = 0});
  GpuPeer gpu(peer, {.strategy = *parse_device_strategy(strategy), .piece_bytes = 1 << 16});
  ASSERT_TRUE(gpu.prepare().ok());
  constexpr std::size_t kCount = 100000;
  Buffer in = testing::make_input(0, kCount, dtype, op);
  void *din = nullptr, *dout = nullptr;
  ASSERT_TRUE(gpu.device().allocate(in.size_bytes(), &din).ok());
  ASSERT_TRUE(gpu.device().allocate(in.size_bytes(), &dout).ok());
  ASSERT_EQ(cudaMemcpy(din, in.view().data(), in.size_bytes(), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // pageable copies may return before landing
  const Status s = gpu.allreduce(din, dout, kCount, dtype, op);
  ASSERT_TRUE(s.ok()) << strategy << ": " << s.to_string();
  Buffer out(kCount, dtype);
  ASSERT_EQ(cudaMemcpy(out.view().data(), dout, out.size_bytes(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(std::memcmp(out.view().data(), in.view().data(), in.size_bytes()), 0)
      << strategy << " " << dtype_name(dtype) << ": one rank's allreduce must be its input";
  gpu.device().release(din);
  gpu.device().release(dout);
}

TEST(GpuPaths, SingleRankEveryPath) {
  KF_NEED_GPU();
  for (const char* s : {"NCCL", "NCCL_HIERARCHICAL", "STAGED", "STAGED:RING_RS_AG"}) {
    check_single_rank_path(s, DType::f32, ReduceOp::sum);
    check_single_rank_path(s, DType::bf16, ReduceOp::avg);
    check_single_rank_path(s, DType::u16, ReduceOp::max);  // NCCL lacks u16: the fallbacks
  }
}

// n in-process ranks, each with its own GpuContext on GPU `ordinal(r)`.
struct GpuRanks {
  InprocWorld world;
  std::vector<std::unique_ptr<GpuContext>> contexts;
  GpuRanks(ClusterSpec cluster, const char* strategy, const std::function<int(int)>& ordinal)
      : world(std::move(cluster), {.timeout = std::chrono::seconds(60)}) {
    for (int r = 0; r < world.size(); ++r) {
      contexts.push_back(GpuContext::open(
          ordinal(r), {.strategy = *parse_device_strategy(strategy), .piece_bytes = 1 << 16}));
    }
  }
  ~GpuRanks() {
    run_on_all(world, [&](Engine& e, DoneCallback done) {
      contexts[static_cast<std::size_t>(e.rank())]->shutdown();
      e.reject(std::move(done), Status{});
    });
  }

  // Allreduce of testing::make_input on every rank; checks every element against the reference.
  void allreduce_and_check(DType dtype, ReduceOp op, std::size_t count) {
    const int n = world.size();
    std::vector<void*> bufs(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) {
      Buffer in = testing::make_input(r, count, dtype, op);
      Device& d = contexts[static_cast<std::size_t>(r)]->device();
      ASSERT_TRUE(d.allocate(in.size_bytes(), &bufs[static_cast<std::size_t>(r)]).ok());
      ASSERT_EQ(cudaSetDevice(d.info().ordinal), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(bufs[static_cast<std::size_t>(r)], in.view().data(), in.size_bytes(),
                           cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    const auto statuses = run_on_all(world, [&](Engine& e, DoneCallback done) {
      void* b = bufs[static_cast<std::size_t>(e.rank())];
      contexts[static_cast<std::size_t>(e.rank())]->allreduce(
          e, {.name = "g", .input = b, .output = b, .count = count, .dtype = dtype, .op = op},
          std::move(done));
    });
    expect_all_ok(statuses);
    const auto ranks = testing::all_ranks(n);
    for (int r = 0; r < n; ++r) {
      Buffer out(count, dtype);
      Device& d = contexts[static_cast<std::size_t>(r)]->device();
      ASSERT_EQ(cudaSetDevice(d.info().ordinal), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(out.view().data(), bufs[static_cast<std::size_t>(r)], out.size_bytes(),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      d.release(bufs[static_cast<std::size_t>(r)]);
      for (std::size_t i = 0; i < count; ++i) {
        const double want = testing::reference(ranks, i, op, dtype);
        ASSERT_NEAR(testing::load(out.view(), i), want,
                    testing::tolerance(dtype, op) * std::max(1.0, std::abs(want)))
            << "rank " << r << " element " << i;
      }
    }
  }
};

ClusterSpec hosts_of(const std::vector<int>& workers_per_host) {
  std::vector<PeerID> workers;
  for (std::size_t h = 0; h < workers_per_host.size(); ++h)
    for (int j = 0; j < workers_per_host[h]; ++j)
      workers.push_back(
          {"127.0.0." + std::to_string(h + 1), static_cast<std::uint16_t>(10000 + j)});
  return ClusterSpec(1, {}, workers);
}

TEST(GpuPaths, TwoHostsOfOneWorkerOnOneGpu) {
  KF_NEED_GPU();
  // Per-host NCCL communicators of one rank each, so every rank may share GPU 0: the host masters'
  // TCP allreduce over staged pinned copies is what is tested.
  for (const char* strategy : {"NCCL_HIERARCHICAL", "STAGED", "STAGED:BINARY_TREE_STAR"}) {
    GpuRanks ranks(hosts_of({1, 1, 1}), strategy, [](int) { return 0; });
    ranks.allreduce_and_check(DType::f32, ReduceOp::sum, 300000);
    ranks.allreduce_and_check(DType::f16, ReduceOp::avg, 70001);
    ranks.allreduce_and_check(DType::i64, ReduceOp::min, 1000);
  }
}

TEST(GpuPaths, NcclAcrossGpus) {
  KF_NEED_GPU();
  const int gpus = gpu_device_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs (NCCL takes one rank per GPU); found " << gpus;
  for (const char* strategy : {"NCCL", "NCCL_HIERARCHICAL"}) {
    // Two hosts of two workers when there are 4 GPUs, else one host of all of them.
    GpuRanks ranks(gpus >= 4 ? hosts_of({2, 2}) : hosts_of({gpus}), strategy,
                   [](int r) { return r; });
    ranks.allreduce_and_check(DType::f32, ReduceOp::sum, 1 << 20);
    ranks.allreduce_and_check(DType::bf16, ReduceOp::avg, 12345);
    ranks.allreduce_and_check(DType::i16, ReduceOp::max, 777);  // allgather + fold / staged
  }
}

TEST(GpuPaths, ForestCommunicators) {
  KF_NEED_GPU();
  const int gpus = gpu_device_count();
  if (gpus < 3) GTEST_SKIP() << "needs 3 GPUs; found " << gpus;
  GpuRanks ranks(hosts_of({3}), "NCCL", [](int r) { return r; });
  const std::vector<int> forest{0, 0, 2};  // {0, 1} and {2}
  std::vector<float*> bufs(3);
  for (int r = 0; r < 3; ++r) {
    std::vector<float> v(1000, static_cast<float>(r + 1));
    void* p = nullptr;
    ASSERT_TRUE(ranks.contexts[static_cast<std::size_t>(r)]->device().allocate(4000, &p).ok());
    bufs[static_cast<std::size_t>(r)] = static_cast<float*>(p);
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(p, v.data(), 4000, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  expect_all_ok(run_on_all(ranks.world, [&](Engine& e, DoneCallback done) {
    float* b = bufs[static_cast<std::size_t>(e.rank())];
    ranks.contexts[static_cast<std::size_t>(e.rank())]->subset_allreduce(
        e, {.name = "f", .input = b, .output = b, .count = 1000}, forest, std::move(done));
  }));
  const float want[3] = {3, 3, 3};
  for (int r = 0; r < 3; ++r) {
    std::vector<float> v(1000);
    ASSERT_EQ(cudaSetDevice(r), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(v.data(), bufs[static_cast<std::size_t>(r)], 4000, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(v[999], want[r]) << "rank " << r;
    ranks.contexts[static_cast<std::size_t>(r)]->device().release(
        bufs[static_cast<std::size_t>(r)]);
  }
}

// The overlap on a real GPU: cuBLAS products on the compute stream, the watch stream's events
// launching each bucket's device allreduce while later layers' products run. Every element of
// every bucket is checked (verify) in every mode, on one rank over NCCL and on two ranks sharing
// GPU 0 over STAGED.
TEST(GpuStepProgramOverlap, OnTheDeviceEveryModeSumsRight) {
  KF_NEED_GPU();
  const ModelProfile model = layered_model();
  const std::pair<const char*, BucketingOptions> modes[] = {
      {"none", {.mode = Bucketing::none}},
      {"ddp", {.mode = Bucketing::ddp, .bucket_cap = 8000, .first_bucket = 4000}},
      {"kungfu", {.mode = Bucketing::kungfu}}};
  for (const auto& [n, strategy] : {std::pair{1, "NCCL"}, std::pair{2, "STAGED"}}) {
    for (const auto& [mode, bucketing] : modes) {
      const std::string where = fmt::format("{} ranks, {}, bucketing {}", n, strategy, mode);
      InprocWorld world(n);
      std::vector<std::unique_ptr<StepProgram>> programs;
      for (int r = 0; r < n; ++r) {
        programs.push_back(make_gpu_gradient_program(
            {.model = &model,
             .verify = true,
             .gpu = {.device = 0, .strategy = *parse_device_strategy(strategy)},
             .gemm_dim = 256,
             .bucketing = bucketing},
            r, n));
      }
      for (int step = 0; step < 3; ++step) {
        const auto statuses = run_trainer_step(world, programs, step, 16);
        for (const Status& s : statuses)
          ASSERT_TRUE(s.ok()) << where << ": " << s.to_string();
      }
      for (auto& p : programs) {
        std::map<std::string, double> v;
        p->values(v);
        EXPECT_GT(v["gpu_compute_ms"], 0) << where;
        if (bucketing.mode == Bucketing::none) continue;
        EXPECT_GT(v["gpu_comm_ms"], 0) << where;
        EXPECT_GE(v["gpu_exposed_comm_ms"], 0) << where;
        EXPECT_LE(v["gpu_exposed_comm_ms"], v["gpu_comm_ms"]) << where;
      }
      programs.clear();
    }
  }
}

#endif  // KF_WITH_CUDA

}  // namespace
}  // namespace kf
