// The GPU step program (kftrain -gpu): a profiled model (workloads/model.h) turned into real GPU
// work. Each step runs matrix products whose FLOPs match the model's forward + backward cost for
// the local batch (3 x forward FLOPs per sample x batch, the usual estimate), writes gradient
// buckets of the model's real tensor sizes in device memory (each element rank + 1 + step % 5,
// so `verify` can check the sums), then allreduces every bucket on the device. The per-step GPU
// compute time and its TFLOP/s are reported as step values (gpu_compute_ms, gpu_tflops).
//
// The program is plain C++ over two interfaces: runtime/device.h (memory, streams, copies) and
// GpuStepBackend below (the products, a fill kernel, the device allreduce), which gpu/ implements
// on cuBLAS and NCCL (gpu/gpu_step_backend.h) and a test can implement on host memory.
#pragma once

#include <cstddef>
#include <memory>

#include "runtime/device.h"
#include "runtime/device_collectives.h"
#include "runtime/engine.h"
#include "runtime/status.h"
#include "runtime/time.h"
#include "workloads/model.h"
#include "workloads/step_program.h"

namespace kf {

// What the GPU step program needs of a GPU beyond its Device. Calls that queue work return at
// once; their errors come back as a Status naming the call and the device.
class GpuStepBackend {
 public:
  virtual ~GpuStepBackend() = default;
  virtual Device& device() = 0;
  // C (k x m) = B (k x k) x A (k x m) on the backend's own k x k scratch matrices (contents of no
  // interest), queued on `stream`. 1 <= m <= k = gemm_dim().
  virtual Status gemm(std::size_t m, DeviceStream& stream) = 0;
  virtual std::size_t gemm_dim() const = 0;
  // data[i] = value for i < count (f32 device memory), queued on `stream`.
  virtual Status fill(float* data, std::size_t count, float value, DeviceStream& stream) = 0;
  // An allreduce of device memory by the backend's device strategy, on the engine's executor.
  virtual void allreduce(Engine& engine, DeviceAllreduceOptions options, DoneCallback done) = 0;
  // The host's clock, for the compute time a step reports (the GPU world is a real one).
  virtual TimePoint now() const = 0;
  // Waits for queued device work and releases the collective state (communicators). Called once,
  // before the backend is destroyed.
  virtual void shutdown() = 0;
};

struct GpuStepOptions {
  const ModelProfile* model = nullptr;
  std::size_t fusion_bytes = 0;  // 0: one allreduce per tensor
  bool verify = false;           // check every element of every allreduced bucket (slow)
  double flops_scale = 1.0;      // scale the GEMM work (calibration against a measured step time)
};

// Throws std::invalid_argument without a model, std::runtime_error when device memory cannot be
// had (the Status's message).
std::unique_ptr<StepProgram> make_gpu_step_program(std::unique_ptr<GpuStepBackend> backend,
                                                   const GpuStepOptions& options, int rank,
                                                   int size);

}  // namespace kf
