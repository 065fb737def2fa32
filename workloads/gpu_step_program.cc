#include "workloads/gpu_step_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kf {

namespace {

void must(const Status& s) {
  if (!s.ok()) throw std::runtime_error(s.to_string());
}

// The products of a step as the `none` program runs them: `count` products of `rows` rows each
// (a multiple of 8, at least 8, at most k), together about `want` FLOPs.
struct GemmWork {
  std::size_t count = 0, rows = 0;
};

GemmWork gemm_work(double want, std::size_t k) {
  const double kk = static_cast<double>(k) * static_cast<double>(k);
  const auto count =
      static_cast<std::size_t>(std::ceil(want / (2.0 * kk * static_cast<double>(k))));
  if (count == 0) return {};
  const double rows = want / static_cast<double>(count) / (2.0 * kk);
  return {count, std::clamp<std::size_t>((static_cast<std::size_t>(rows) + 7) / 8 * 8, 8, k)};
}

class GpuStepProgram final : public StepProgram {
 public:
  GpuStepProgram(std::unique_ptr<GpuStepBackend> backend, const GpuStepOptions& o, int rank,
                 int size)
      : options_(o), rank_(rank), size_(size), backend_(std::move(backend)) {
    if (o.model == nullptr) throw std::invalid_argument("GPU step program: no model");
    Device& device = backend_->device();
    must(device.create_stream(&compute_stream_));
    must(device.create_stream(&verify_stream_));
    try {
      if (overlapped()) {
        make_overlap_plan();
      } else {
        for (const auto& bucket : fuse_gradients(*o.model, o.fusion_bytes))
          add_bucket(bucket);
      }
    } catch (...) {
      // No destructor runs for a constructor that throws: give back the buckets made so far.
      for (auto& b : buckets_)
        device.release(b.data);
      throw;
    }
  }

  ~GpuStepProgram() override {
    Device& device = backend_->device();
    if (compute_stream_) (void)device.synchronize(*compute_stream_);
    if (watch_stream_) (void)device.synchronize(*watch_stream_);
    round_.reset();  // late notifications find no round and do nothing
    backend_->shutdown();
    for (auto& b : buckets_)
      device.release(b.data);
  }

  void begin(const StepContext& ctx) override {
    if (!overlapped()) return;
    round_ = std::make_shared<Overlap>(ctx, buckets_.size());
  }

  std::function<void()> compute(std::int64_t step, int batch_per_worker) override {
    if (overlapped()) return overlapped_compute(step, batch_per_worker);
    return [this, step, batch_per_worker] {
      std::lock_guard<std::mutex> lock(mu_);
      const TimePoint t0 = backend_->now();
      Status s = run_compute(step, batch_per_worker);
      const double seconds = to_seconds(backend_->now() - t0);
      compute_ms_ = seconds * 1e3;
      tflops_ = seconds > 0 ? flops_done_ / seconds / 1e12 : 0;
      if (!s.ok() && compute_error_.ok()) compute_error_ = s;
    };
  }

  std::shared_ptr<const StepTimeline> timeline() const override {
    return overlapped() ? timeline_ : nullptr;
  }

  void communicate(const StepContext& ctx, DoneCallback done) override {
    if (overlapped()) {
      overlapped_communicate(ctx, std::move(done));
      return;
    }
    Engine& engine = ctx.engine;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!compute_error_.ok()) {
        engine.reject(std::move(done), compute_error_);
        return;
      }
    }
    if (buckets_.empty()) {
      engine.reject(std::move(done), Status{});
      return;
    }
    struct Round {
      std::size_t pending;
      Status error;
    };
    auto round = std::make_shared<Round>(Round{buckets_.size(), Status{}});
    for (std::size_t b = 0; b < buckets_.size(); ++b) {
      const TimePoint begin = engine.executor().now();
      backend_->allreduce(
          engine, bucket_allreduce(b),
          [this, b, begin, round, done, &engine, step = ctx.step, report = ctx.report](Status s) {
            if (s.ok() && options_.verify) s = check(b, engine.rank(), engine.size(), step);
            if (!s.ok() && round->error.ok()) round->error = s;
            if (report)
              report(names_[b], buckets_[b].count * sizeof(float), begin, engine.executor().now());
            if (--round->pending == 0) done(round->error);
          });
    }
  }

  std::vector<BufferView> state() override { return {}; }  // gradients are made afresh each step
  void resized(int rank, int size) override {
    rank_ = rank;
    size_ = size;
  }
  void values(std::map<std::string, double>& out) const override {
    std::lock_guard<std::mutex> lock(mu_);
    out["gpu_compute_ms"] = compute_ms_;
    out["gpu_tflops"] = tflops_;
    if (overlapped()) overlap_values(out);
  }

 private:
  struct Bucket {
    float* data;
    std::size_t count;
  };
  // Where a tensor's gradient lives: its bucket and its offset in it (elements); a run of
  // elements there when `count` is set.
  struct Slot {
    std::size_t bucket = 0, offset = 0, count = 0;
  };
  // A point in the backward pass where buckets become complete: after layer `layer` (backward
  // order), buckets up to `buckets_end` (plan order) may go.
  struct ReadyPoint {
    std::size_t layer = 0, buckets_end = 0;
  };
  // One overlapped step, on the engine's executor (the compute's thread reads only the executor
  // and the step): which ready points the compute has queued, which the device has passed, which
  // buckets have been launched and are still running, and who waits for them.
  struct Overlap {
    Overlap(const StepContext& c, std::size_t buckets)
        : context(c), executor(&c.engine.executor()), pending(buckets) {}
    StepContext context;
    Executor* executor;
    std::size_t queued = 0;      // ready points whose event the compute has recorded
    std::size_t next_point = 0;  // the first ready point the device has not yet passed
    bool waiting = false;        // a notification for next_point is out
    std::size_t launched = 0;    // buckets launched (or given up), in plan order
    std::size_t pending;         // buckets whose allreduce has not ended
    Status error;
    DoneCallback done;  // set by communicate()
    std::optional<TimePoint> comm_begin;
    TimePoint comm_end;
  };

  bool overlapped() const { return options_.bucketing.mode != Bucketing::none; }

  // Bucket b's in-place f32 sum, as every step allreduces it.
  DeviceAllreduceOptions bucket_allreduce(std::size_t b) const {
    return {.name = names_[b],
            .input = buckets_[b].data,
            .output = buckets_[b].data,
            .count = buckets_[b].count,
            .dtype = DType::f32,
            .op = ReduceOp::sum};
  }

  void add_bucket(const std::vector<int>& tensors) {
    std::size_t count = 0;
    for (int t : tensors)
      count += options_.model->tensors[static_cast<std::size_t>(t)].count;
    void* p = nullptr;
    must(backend_->device().allocate(count * sizeof(float), &p));
    buckets_.push_back({static_cast<float*>(p), count});
    names_.push_back(fmt::format(
        "grad/{}", options_.model->tensors[static_cast<std::size_t>(tensors.front())].name));
  }

  // The buckets of the mode (workloads/bucketing.h, as the CPU path and kfsim plan them), each
  // tensor's place in them, each layer's tensors, and the points where buckets complete. Which
  // tensors go together does not depend on the compute's length for kungfu and ddp, so this is
  // made once; the products' split (plan_gemms) follows the batch.
  void make_overlap_plan() {
    const ModelProfile& model = *options_.model;
    if (options_.bucketing.mode == Bucketing::horovod) {
      throw std::invalid_argument(
          "--bucketing horovod: not with -gpu (Horovod fuses what is ready at each cycle of real "
          "time, which on a GPU differs from rank to rank, while every rank must allreduce the "
          "same buffers in the same order); use kungfu or ddp");
    }
    if (options_.fusion_bytes != 0)
      throw std::invalid_argument("GPU step program: fusion_bytes only with bucketing none");
    const StepTimeline nominal = step_timeline(model, options_.device, std::chrono::seconds(1));
    const std::vector<GradientBucket> plan = plan_buckets(model, nominal, options_.bucketing);
    slots_.assign(model.tensors.size(), {});
    for (std::size_t b = 0; b < plan.size(); ++b) {
      std::size_t offset = 0;
      for (int t : plan[b].tensors) {
        slots_[static_cast<std::size_t>(t)] = {b, offset};
        offset += model.tensors[static_cast<std::size_t>(t)].count;
      }
      add_bucket(plan[b].tensors);
    }
    // Each tensor's layer in backward order; a tensor no layer covers is made by the last.
    const std::size_t layers = nominal.backward.size();
    std::vector<std::size_t> layer_of(model.tensors.size(), layers > 0 ? layers - 1 : 0);
    layer_tensors_.assign(layers, {});
    for (std::size_t j = 0; j < layers; ++j) {
      const LayerSpan& l = nominal.backward[j];
      for (std::size_t t = l.first_tensor; t < l.first_tensor + l.tensor_count; ++t)
        layer_of[t] = j;
    }
    for (std::size_t t = 0; t < model.tensors.size(); ++t)
      layer_tensors_[layer_of[t]].push_back(t);
    // A bucket is complete after the layer of its last-made tensor; buckets go in plan order.
    for (std::size_t b = 0; b < plan.size(); ++b) {
      std::size_t done_at = 0;
      for (int t : plan[b].tensors)
        done_at = std::max(done_at, layer_of[static_cast<std::size_t>(t)]);
      if (!points_.empty() && done_at < points_.back().layer) done_at = points_.back().layer;
      if (points_.empty() || points_.back().layer != done_at) points_.push_back({done_at, b});
      points_.back().buckets_end = b + 1;
    }
    point_at_layer_.assign(layers, points_.size());
    Device& device = backend_->device();
    for (std::size_t p = 0; p < points_.size(); ++p) {
      point_at_layer_[points_[p].layer] = p;
      events_.emplace_back();
      must(device.create_event(&events_.back()));
    }
    must(device.create_stream(&watch_stream_));
  }

  // The `none` step's products, in the same order and of the same shapes (so the same FLOPs at
  // the same rate), shared out by the step's timeline: a timeline whose compute is one
  // nanosecond per 8-row block gives each phase (the forward, then each layer's backward) its
  // floor share, and the shares add up exactly. A phase ends with the product that holds its last
  // row: splitting products at layer boundaries instead would make them small, and a small
  // product leaves most of a large GPU idle, which a real layer's kernels do not (docs/gpus.md
  // has the measurement). A layer's gradients are therefore late by less than one product.
  void plan_gemms(int batch) {
    if (batch == planned_batch_) return;
    planned_batch_ = batch;
    work_ = gemm_work(want_flops(batch), backend_->gemm_dim());
    const std::size_t blocks = work_.count * work_.rows / 8;
    auto tl = std::make_shared<StepTimeline>(step_timeline(
        *options_.model, options_.device, Duration(static_cast<std::int64_t>(blocks))));
    phase_end_rows_.clear();
    std::size_t rows = 8 * static_cast<std::size_t>(tl->forward_end.count());
    phase_end_rows_.push_back(rows);
    for (const LayerSpan& l : tl->backward) {
      rows += 8 * static_cast<std::size_t>((l.end - l.begin).count());
      phase_end_rows_.push_back(rows);
    }
    timeline_ = std::move(tl);
  }

  double want_flops(int batch) const {
    // Forward + backward: about 3 x the forward FLOPs per sample.
    return 3.0 * options_.model->forward_gflops * 1e9 * std::max(batch, 0) * options_.flops_scale;
  }

  Status run_compute(std::int64_t step, int batch) {
    const std::size_t k = backend_->gemm_dim();
    const double kk = static_cast<double>(k) * static_cast<double>(k);
    const GemmWork work = gemm_work(want_flops(batch), k);
    flops_done_ = 0;
    for (std::size_t g = 0; g < work.count; ++g) {
      if (Status s = backend_->gemm(work.rows, *compute_stream_); !s.ok()) return s;
      flops_done_ += 2.0 * kk * static_cast<double>(work.rows);
    }
    const float value = static_cast<float>(rank_ + 1 + step % 5);
    for (const auto& b : buckets_) {
      if (Status s = backend_->fill(b.data, b.count, value, *compute_stream_); !s.ok()) return s;
    }
    return backend_->device().synchronize(*compute_stream_);
  }

  // ---- overlap ----------------------------------------------------------------------------------

  std::function<void()> overlapped_compute(std::int64_t step, int batch) {
    if (!round_ || round_->context.step != step)
      throw std::logic_error("GPU step program: begin() must come before compute() (overlap)");
    plan_gemms(batch);
    return [this, step, round = round_] {
      const TimePoint t0 = backend_->now();
      double flops = 0;
      Status s = queue_step(step, round, flops);
      const TimePoint t1 = backend_->now();
      if (!s.ok()) {
        // No more ready points will come: the executor gives up the buckets not yet launched.
        round->executor->post([this, weak = std::weak_ptr<Overlap>(round), s] {
          if (auto r = weak.lock()) give_up(r, s);
        });
      }
      std::lock_guard<std::mutex> lock(mu_);
      const double seconds = to_seconds(t1 - t0);
      flops_done_ = flops;
      compute_ms_ = seconds * 1e3;
      tflops_ = seconds > 0 ? flops / seconds / 1e12 : 0;
      compute_end_ = t1;
      if (!s.ok() && compute_error_.ok()) compute_error_ = s;
    };
  }

  // On the compute's thread: the step's device work in timeline order, each ready point's event
  // recorded and handed to the executor, then a wait for the compute stream (the compute time).
  Status queue_step(std::int64_t step, const std::shared_ptr<Overlap>& round, double& flops) {
    const float value = static_cast<float>(rank_ + 1 + step % 5);
    Device& device = backend_->device();
    std::vector<Slot> made;  // gradients made since the last fill (Slot::count: their elements)
    auto fill = [&]() -> Status {
      Status s = fill_coalesced(made, value);
      made.clear();
      return s;
    };
    std::size_t queued_rows = 0;
    if (Status s = queue_gemms_to(phase_end_rows_[0], queued_rows, flops, fill); !s.ok()) return s;
    for (std::size_t j = 0; j < layer_tensors_.size(); ++j) {
      if (Status s = queue_gemms_to(phase_end_rows_[1 + j], queued_rows, flops, fill); !s.ok())
        return s;
      for (const std::size_t t : layer_tensors_[j])
        made.push_back({slots_[t].bucket, slots_[t].offset, options_.model->tensors[t].count});
      const std::size_t p = point_at_layer_[j];
      if (p == points_.size()) continue;
      if (Status s = fill(); !s.ok()) return s;
      if (Status s = device.record(*events_[p], *compute_stream_); !s.ok()) return s;
      round->executor->post([this, weak = std::weak_ptr<Overlap>(round), p] {
        if (auto r = weak.lock()) queued(r, p);
      });
    }
    if (Status s = fill(); !s.ok()) return s;
    if (Status s = queue_gemms_to(work_.count * work_.rows, queued_rows, flops, fill); !s.ok())
      return s;
    return device.synchronize(*compute_stream_);
  }

  // The gradients in `made`, one fill per run of adjacent tensors: a layer's tensors (and those
  // of the layers that end within one product) lie side by side in their bucket, and a fill per
  // tensor would cost a kernel launch per bias and norm parameter, which none's per-bucket fills
  // do not.
  Status fill_coalesced(std::vector<Slot>& made, float value) {
    std::sort(made.begin(), made.end(), [](const Slot& a, const Slot& b) {
      return std::pair(a.bucket, a.offset) < std::pair(b.bucket, b.offset);
    });
    for (std::size_t i = 0; i < made.size();) {
      Slot run = made[i++];
      while (i < made.size() && made[i].bucket == run.bucket &&
             made[i].offset == run.offset + run.count)
        run.count += made[i++].count;
      if (Status s = backend_->fill(buckets_[run.bucket].data + run.offset, run.count, value,
                                    *compute_stream_);
          !s.ok())
        return s;
    }
    return Status{};
  }

  // The step's products (work_.rows rows each) until `rows` rows or more are queued, the
  // gradients made so far filled (`fill`) before each.
  template <class Fill>
  Status queue_gemms_to(std::size_t rows, std::size_t& queued_rows, double& flops, Fill& fill) {
    const std::size_t k = backend_->gemm_dim();
    const double kk = static_cast<double>(k) * static_cast<double>(k);
    while (queued_rows < rows) {
      if (Status s = fill(); !s.ok()) return s;
      if (Status s = backend_->gemm(work_.rows, *compute_stream_); !s.ok()) return s;
      flops += 2.0 * kk * static_cast<double>(work_.rows);
      queued_rows += work_.rows;
    }
    return Status{};
  }

  // On the executor from here on. The compute has recorded ready point p's event.
  void queued(const std::shared_ptr<Overlap>& r, std::size_t p) {
    r->queued = std::max(r->queued, p + 1);
    watch(r);
  }

  // One notification out at a time, for the next ready point: the watch stream waits for its
  // event, and the device tells the executor when it has passed it. Waiting on a stream of its
  // own keeps the compute stream from ever waiting on the host, and one notification at a time
  // keeps the executor from polling one event per bucket.
  void watch(const std::shared_ptr<Overlap>& r) {
    if (r->waiting || r->next_point >= r->queued) return;
    Device& device = backend_->device();
    Status s = device.wait(*watch_stream_, *events_[r->next_point]);
    if (s.ok()) {
      s = device.notify(*watch_stream_, *r->executor,
                        [this, weak = std::weak_ptr<Overlap>(r)](Status status) {
                          if (auto round = weak.lock()) passed(round, status);
                        });
    }
    if (!s.ok()) {
      give_up(r, s);
      return;
    }
    r->waiting = true;
  }

  // The device has passed the next ready point: its buckets (and any before them) go, in plan
  // order, so every rank starts the same allreduces in the same order.
  void passed(const std::shared_ptr<Overlap>& r, const Status& status) {
    r->waiting = false;
    if (!status.ok()) {
      give_up(r, status);
      return;
    }
    if (r->next_point >= points_.size()) return;  // given up meanwhile
    const std::size_t end = points_[r->next_point++].buckets_end;
    while (r->launched < end)
      launch(r, r->launched++);
    watch(r);
  }

  void launch(const std::shared_ptr<Overlap>& r, std::size_t b) {
    Engine& engine = r->context.engine;
    const TimePoint begin = engine.executor().now();
    if (!r->comm_begin) r->comm_begin = backend_->now();
    backend_->allreduce(engine, bucket_allreduce(b),
                        [this, b, begin, weak = std::weak_ptr<Overlap>(r)](Status s) {
                          auto round = weak.lock();
                          if (!round) return;
                          Engine& e = round->context.engine;
                          if (s.ok() && options_.verify)
                            s = check(b, e.rank(), e.size(), round->context.step);
                          if (!s.ok() && round->error.ok()) round->error = s;
                          round->comm_end = backend_->now();
                          if (round->context.report) {
                            round->context.report(names_[b], buckets_[b].count * sizeof(float),
                                                  begin, e.executor().now());
                          }
                          --round->pending;
                          finish(round);
                        });
  }

  // The step cannot go on: the buckets not yet launched never will be.
  void give_up(const std::shared_ptr<Overlap>& r, const Status& s) {
    if (r->error.ok()) r->error = s;
    r->pending -= buckets_.size() - r->launched;
    r->launched = buckets_.size();
    r->next_point = points_.size();
    finish(r);
  }

  void finish(const std::shared_ptr<Overlap>& r) {
    if (r->pending == 0 && r->done) std::exchange(r->done, nullptr)(r->error);
  }

  void overlapped_communicate(const StepContext& ctx, DoneCallback done) {
    if (!round_) {
      ctx.engine.reject(std::move(done),
                        Status(ErrorCode::invalid_argument,
                               "GPU step program: communicate() without begin() (overlap)"));
      return;
    }
    if (round_->pending == 0) {
      ctx.engine.reject(std::move(done), round_->error);
      return;
    }
    round_->done = std::move(done);
  }

  // Communication runs from the first allreduce (or the compute's end, if later) to the last
  // allreduce's end; the exposed part is what comes after the compute's end (as steps.csv's
  // comm_s and exposed_comm_s).
  void overlap_values(std::map<std::string, double>& out) const {
    double comm = 0, exposed = 0;
    if (round_ && round_->comm_begin) {
      const TimePoint from = std::min(*round_->comm_begin, compute_end_);
      comm = to_seconds(round_->comm_end - from);
      exposed = std::max(0.0, to_seconds(round_->comm_end - compute_end_));
    }
    out["gpu_comm_ms"] = comm * 1e3;
    out["gpu_exposed_comm_ms"] = exposed * 1e3;
  }

  Status check(std::size_t bucket, int rank, int size, std::int64_t step) const {
    const auto n = static_cast<std::int64_t>(size);
    const auto expected = static_cast<float>(n * (n + 1) / 2 + n * (step % 5));
    std::vector<float> host(buckets_[bucket].count);
    Device& device = backend_->device();
    if (Status s = device.copy(host.data(), buckets_[bucket].data, host.size() * sizeof(float),
                               CopyKind::device_to_host, *verify_stream_);
        !s.ok())
      return s;
    if (Status s = device.synchronize(*verify_stream_); !s.ok()) return s;
    for (std::size_t i = 0; i < host.size(); ++i) {
      if (host[i] != expected) {
        return Status(ErrorCode::protocol,
                      fmt::format("verify: device allreduce of {} at step {} on rank {} of {}: "
                                  "element {} is {}, expected {}",
                                  names_[bucket], step, rank, n, i, host[i], expected));
      }
    }
    return Status{};
  }

  GpuStepOptions options_;
  int rank_, size_;
  std::unique_ptr<GpuStepBackend> backend_;
  std::unique_ptr<DeviceStream> compute_stream_;
  std::unique_ptr<DeviceStream> verify_stream_;  // the engine's thread checks results on it
  std::vector<Bucket> buckets_;
  std::vector<std::string> names_;
  mutable std::mutex mu_;  // compute (worker thread) vs the loop
  Status compute_error_;
  double flops_done_ = 0, compute_ms_ = 0, tflops_ = 0;
  // Overlap (bucketing other than none): the plan, made once ...
  std::vector<Slot> slots_;                              // per tensor
  std::vector<std::vector<std::size_t>> layer_tensors_;  // per layer, backward order
  std::vector<ReadyPoint> points_;                       // in backward order
  std::vector<std::size_t> point_at_layer_;  // per layer: its ready point, or points_.size()
  std::vector<std::unique_ptr<DeviceEvent>> events_;  // per ready point
  std::unique_ptr<DeviceStream> watch_stream_;        // waits for the events, for notify()
  // ... the products' split for the batch ...
  int planned_batch_ = -1;
  GemmWork work_;                            // the step's products (as the none program's)
  std::vector<std::size_t> phase_end_rows_;  // rows done at the end of [0] the forward, [1 + j]
                                             // layer j's backward
  std::shared_ptr<const StepTimeline> timeline_;
  // ... and the step.
  std::shared_ptr<Overlap> round_;
  TimePoint compute_end_;  // the compute's end on the host's clock (under mu_)
};

}  // namespace

std::unique_ptr<StepProgram> make_gpu_step_program(std::unique_ptr<GpuStepBackend> backend,
                                                   const GpuStepOptions& options, int rank,
                                                   int size) {
  return std::make_unique<GpuStepProgram>(std::move(backend), options, rank, size);
}

}  // namespace kf
