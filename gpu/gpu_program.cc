#include "gpu/gpu_program.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "gpu/cuda_device.h"
#include "gpu/reduce_kernels.h"

namespace kf {

namespace {

Status cublas_status(cublasStatus_t s, std::string_view call, std::string_view where) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status{};
  return Status(ErrorCode::device, fmt::format("{} on {}: {} ({})", call, where,
                                               cublasGetStatusString(s), static_cast<int>(s)));
}

void must(const Status& s) {
  if (!s.ok()) throw std::runtime_error(s.to_string());
}

class GpuGradientProgram final : public StepProgram {
 public:
  GpuGradientProgram(const GpuProgramOptions& o, int rank, int size)
      : options_(o), rank_(rank), size_(size) {
    if (o.model == nullptr) throw std::invalid_argument("GPU program: no model");
    if (auto why = gpu_unavailable()) throw std::runtime_error(*why);
    const int ordinal = o.gpu.device >= 0 ? o.gpu.device : 0;
    context_ = GpuContext::open(ordinal, o.gpu);
    device_ = static_cast<gpu::CudaDevice*>(&context_->device());
    must(device_->create_stream(&compute_stream_));
    for (const auto& bucket : fuse_gradients(*o.model, o.fusion_bytes)) {
      std::size_t count = 0;
      for (int t : bucket)
        count += o.model->tensors[static_cast<std::size_t>(t)].count;
      void* p = nullptr;
      must(device_->allocate(count * sizeof(float), &p));
      buckets_.push_back({static_cast<float*>(p), count});
      names_.push_back(
          fmt::format("grad/{}", o.model->tensors[static_cast<std::size_t>(bucket.front())].name));
    }
    must(device_->bind());
    must(cublas_status(cublasCreate(&blas_), "cublasCreate", device_->where()));
    must(cublas_status(cublasSetStream(blas_, gpu::native(*compute_stream_)), "cublasSetStream",
                       device_->where()));
    must(cublas_status(
        cublasSetMathMode(blas_, o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode", device_->where()));
    const std::size_t k = std::max<std::size_t>(options_.gemm_dim, 64);
    for (float** m : {&a_, &b_, &c_}) {
      void* p = nullptr;
      must(device_->allocate(k * k * sizeof(float), &p));
      *m = static_cast<float*>(p);
    }
    // Inputs of modest size so products stay finite; the values do not matter.
    must(gpu::cuda_status(gpu::launch_fill_f32(a_, k * k, 1.0f / 64, gpu::native(*compute_stream_),
                                               device_->info().multiprocessors),
                          "fill kernel", device_->where()));
    must(gpu::cuda_status(gpu::launch_fill_f32(b_, k * k, 1.0f / 64, gpu::native(*compute_stream_),
                                               device_->info().multiprocessors),
                          "fill kernel", device_->where()));
    must(device_->synchronize(*compute_stream_));
  }

  ~GpuGradientProgram() override {
    if (compute_stream_) (void)device_->synchronize(*compute_stream_);
    context_->shutdown();
    if (blas_ != nullptr) {
      (void)device_->bind();
      (void)cublasDestroy(blas_);
    }
    for (auto& b : buckets_)
      device_->release(b.data);
    for (float* m : {a_, b_, c_})
      device_->release(m);
    compute_stream_.reset();
  }

  std::function<void()> compute(std::int64_t step, int batch_per_worker) override {
    return [this, step, batch_per_worker] {
      std::lock_guard<std::mutex> lock(mu_);
      const auto t0 = std::chrono::steady_clock::now();
      Status s = run_compute(step, batch_per_worker);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
      context_->allreduce(
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
    if (Status s = device_->bind(); !s.ok()) return s;
    cudaStream_t stream = gpu::native(*compute_stream_);
    // Forward + backward: about 3 x the forward FLOPs per sample.
    const double want =
        3.0 * options_.model->forward_gflops * 1e9 * std::max(batch, 0) * options_.flops_scale;
    const std::size_t k = std::max<std::size_t>(options_.gemm_dim, 64);
    const double per_full =
        2.0 * static_cast<double>(k) * static_cast<double>(k) * static_cast<double>(k);
    const auto gemms = static_cast<std::size_t>(std::ceil(want / per_full));
    flops_done_ = 0;
    const float alpha = 1.0f, beta = 0.0f;
    for (std::size_t g = 0; g < gemms; ++g) {
      // Rows so that the GEMMs together come to `want`; a multiple of 8 rows, at least 8.
      const double rows = want / static_cast<double>(gemms) / (2.0 * static_cast<double>(k * k));
      const int m = static_cast<int>(
          std::clamp<std::size_t>((static_cast<std::size_t>(rows) + 7) / 8 * 8, 8, k));
      const int ki = static_cast<int>(k);
      // Column-major C (k x m) = B (k x k) x A (k x m).
      if (Status s =
              cublas_status(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, ki, m, ki, &alpha, b_, ki,
                                        a_, ki, &beta, c_, ki),
                            fmt::format("cublasSgemm({} x {} x {})", ki, m, ki), device_->where());
          !s.ok())
        return s;
      flops_done_ += 2.0 * static_cast<double>(k) * static_cast<double>(k) * m;
    }
    const float value = static_cast<float>(rank_ + 1 + step % 5);
    for (const auto& b : buckets_) {
      if (Status s = gpu::cuda_status(
              gpu::launch_fill_f32(b.data, b.count, value, stream, device_->info().multiprocessors),
              "gradient fill kernel", device_->where());
          !s.ok())
        return s;
    }
    return device_->synchronize(*compute_stream_);
  }

  Status check(std::size_t bucket, int rank, int size, std::int64_t step) const {
    const auto n = static_cast<std::int64_t>(size);
    const auto expected = static_cast<float>(n * (n + 1) / 2 + n * (step % 5));
    std::vector<float> host(buckets_[bucket].count);
    if (Status s = device_->bind(); !s.ok()) return s;
    if (Status s = gpu::cuda_status(cudaMemcpy(host.data(), buckets_[bucket].data,
                                               host.size() * sizeof(float), cudaMemcpyDeviceToHost),
                                    "cudaMemcpy(d2h, verify)", device_->where());
        !s.ok())
      return s;
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

  GpuProgramOptions options_;
  int rank_, size_;
  std::unique_ptr<GpuContext> context_;
  gpu::CudaDevice* device_ = nullptr;
  std::unique_ptr<DeviceStream> compute_stream_;
  cublasHandle_t blas_ = nullptr;
  float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
  std::vector<Bucket> buckets_;
  std::vector<std::string> names_;
  mutable std::mutex mu_;  // compute (worker thread) vs the loop
  Status compute_error_;
  double flops_done_ = 0, compute_ms_ = 0, tflops_ = 0;
};

}  // namespace

std::unique_ptr<StepProgram> make_gpu_gradient_program(const GpuProgramOptions& options, int rank,
                                                       int size) {
  return std::make_unique<GpuGradientProgram>(options, rank, size);
}

}  // namespace kf
