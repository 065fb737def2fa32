#include "gpu/gpu_step_backend.h"

#include <cublas_v2.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "gpu/cuda_device.h"
#include "gpu/reduce_kernels.h"
#include "workloads/gpu_step_program.h"

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

// The step program's GPU: a GpuContext (device and collectives), a cuBLAS handle and three
// k x k scratch matrices for the products.
class CublasStepBackend final : public GpuStepBackend {
 public:
  explicit CublasStepBackend(const GpuProgramOptions& o)
      : k_(std::max<std::size_t>(o.gemm_dim, 64)) {
    const int ordinal = o.gpu.device >= 0 ? o.gpu.device : 0;
    context_ = GpuContext::open(ordinal, o.gpu);
    device_ = static_cast<gpu::CudaDevice*>(&context_->device());
    must(device_->create_stream(&setup_stream_));
    must(device_->bind());
    must(cublas_status(cublasCreate(&blas_), "cublasCreate", device_->where()));
    must(cublas_status(
        cublasSetMathMode(blas_, o.tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode", device_->where()));
    for (float** m : {&a_, &b_, &c_}) {
      void* p = nullptr;
      must(device_->allocate(k_ * k_ * sizeof(float), &p));
      *m = static_cast<float*>(p);
    }
    // Inputs of modest size so products stay finite; the values do not matter.
    must(fill(a_, k_ * k_, 1.0f / 64, *setup_stream_));
    must(fill(b_, k_ * k_, 1.0f / 64, *setup_stream_));
    must(device_->synchronize(*setup_stream_));
  }

  ~CublasStepBackend() override {
    if (blas_ != nullptr) {
      (void)device_->bind();
      (void)cublasDestroy(blas_);
    }
    for (float* m : {a_, b_, c_})
      device_->release(m);
    setup_stream_.reset();
  }

  Device& device() override { return *device_; }
  std::size_t gemm_dim() const override { return k_; }

  Status gemm(std::size_t m, DeviceStream& stream) override {
    if (Status s = device_->bind(); !s.ok()) return s;
    const int ki = static_cast<int>(k_), mi = static_cast<int>(m);
    if (Status s = cublas_status(cublasSetStream(blas_, gpu::native(stream)), "cublasSetStream",
                                 device_->where());
        !s.ok())
      return s;
    const float alpha = 1.0f, beta = 0.0f;
    // Column-major C (k x m) = B (k x k) x A (k x m).
    return cublas_status(cublasSgemm(blas_, CUBLAS_OP_N, CUBLAS_OP_N, ki, mi, ki, &alpha, b_, ki,
                                     a_, ki, &beta, c_, ki),
                         fmt::format("cublasSgemm({} x {} x {})", ki, mi, ki), device_->where());
  }

  Status fill(float* data, std::size_t count, float value, DeviceStream& stream) override {
    if (Status s = device_->bind(); !s.ok()) return s;
    return gpu::cuda_status(gpu::launch_fill_f32(data, count, value, gpu::native(stream),
                                                 device_->info().multiprocessors),
                            "fill kernel", device_->where());
  }

  void allreduce(Engine& engine, DeviceAllreduceOptions options, DoneCallback done) override {
    context_->allreduce(engine, std::move(options), std::move(done));
  }

  TimePoint now() const override {
    return TimePoint(
        std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now().time_since_epoch()));
  }

  void shutdown() override { context_->shutdown(); }

 private:
  std::size_t k_;
  std::unique_ptr<GpuContext> context_;
  gpu::CudaDevice* device_ = nullptr;
  std::unique_ptr<DeviceStream> setup_stream_;
  cublasHandle_t blas_ = nullptr;
  float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr;
};

}  // namespace

std::unique_ptr<StepProgram> make_gpu_gradient_program(const GpuProgramOptions& options, int rank,
                                                       int size) {
  if (options.model == nullptr) throw std::invalid_argument("GPU program: no model");
  if (auto why = gpu_unavailable()) throw std::runtime_error(*why);
  return make_gpu_step_program(std::make_unique<CublasStepBackend>(options),
                               {.model = options.model,
                                .fusion_bytes = options.fusion_bytes,
                                .verify = options.verify,
                                .flops_scale = options.flops_scale,
                                .bucketing = options.bucketing,
                                .device = options.device},
                               rank, size);
}

}  // namespace kf
