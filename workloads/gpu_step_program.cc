#include "workloads/gpu_step_program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace kf {

namespace {

void must(const Status& s) {
  if (!s.ok()) throw std::runtime_error(s.to_string());
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
    for (const auto& bucket : fuse_gradients(*o.model, o.fusion_bytes)) {
      std::size_t count = 0;
      for (int t : bucket)
        count += o.model->tensors[static_cast<std::size_t>(t)].count;
      void* p = nullptr;
      must(device.allocate(count * sizeof(float), &p));
      buckets_.push_back({static_cast<float*>(p), count});
      names_.push_back(
          fmt::format("grad/{}", o.model->tensors[static_cast<std::size_t>(bucket.front())].name));
    }
  }

  ~GpuStepProgram() override {
    Device& device = backend_->device();
    if (compute_stream_) (void)device.synchronize(*compute_stream_);
    backend_->shutdown();
    for (auto& b : buckets_)
      device.release(b.data);
  }

  std::function<void()> compute(std::int64_t step, int batch_per_worker) override {
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

  void communicate(const StepContext& ctx, DoneCallback done) override {
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
          engine,
          {.name = names_[b],
           .input = buckets_[b].data,
           .output = buckets_[b].data,
           .count = buckets_[b].count,
           .dtype = DType::f32,
           .op = ReduceOp::sum},
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
  }

 private:
  struct Bucket {
    float* data;
    std::size_t count;
  };

  Status run_compute(std::int64_t step, int batch) {
    // Forward + backward: about 3 x the forward FLOPs per sample.
    const double want =
        3.0 * options_.model->forward_gflops * 1e9 * std::max(batch, 0) * options_.flops_scale;
    const std::size_t k = backend_->gemm_dim();
    const double kk = static_cast<double>(k) * static_cast<double>(k);
    const auto gemms =
        static_cast<std::size_t>(std::ceil(want / (2.0 * kk * static_cast<double>(k))));
    flops_done_ = 0;
    for (std::size_t g = 0; g < gemms; ++g) {
      // Rows so that the products together come to `want`; a multiple of 8 rows, at least 8.
      const double rows = want / static_cast<double>(gemms) / (2.0 * kk);
      const std::size_t m =
          std::clamp<std::size_t>((static_cast<std::size_t>(rows) + 7) / 8 * 8, 8, k);
      if (Status s = backend_->gemm(m, *compute_stream_); !s.ok()) return s;
      flops_done_ += 2.0 * kk * static_cast<double>(m);
    }
    const float value = static_cast<float>(rank_ + 1 + step % 5);
    for (const auto& b : buckets_) {
      if (Status s = backend_->fill(b.data, b.count, value, *compute_stream_); !s.ok()) return s;
    }
    return backend_->device().synchronize(*compute_stream_);
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
};

}  // namespace

std::unique_ptr<StepProgram> make_gpu_step_program(std::unique_ptr<GpuStepBackend> backend,
                                                   const GpuStepOptions& options, int rank,
                                                   int size) {
  return std::make_unique<GpuStepProgram>(std::move(backend), options, rank, size);
}

}  // namespace kf
