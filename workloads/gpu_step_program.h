// The GPU step program (kftrain -gpu): a profiled model (workloads/model.h) turned into real GPU
// work. Each step runs matrix products whose FLOPs match the model's forward + backward cost for
// the local batch (3 x forward FLOPs per sample x batch, the usual estimate), writes gradient
// buckets of the model's real tensor sizes in device memory (each element rank + 1 + step % 5,
// so `verify` can check the sums), and allreduces every bucket on the device. The per-step GPU
// compute time and its TFLOP/s are reported as step values (gpu_compute_ms, gpu_tflops).
//
// Bucketing none: all the products, then every bucket's fill, then (communicate()) every bucket's
// allreduce. Bucketing kungfu or ddp: the step is the timeline of workloads/step_timeline.h on
// the device. The same products (same count of rows, so the same FLOPs) are split into the
// forward's share, then each layer's backward share in backward order, each followed by the fill
// of that layer's gradient tensors; where a layer completes buckets (workloads/bucketing.h's plan,
// the same as the CPU path's and kfsim's), an event is recorded on the compute stream, and the
// host launches those buckets' allreduces as soon as the device has passed it, while the later
// layers' products still run. The step ends when every allreduce is done; its GPU compute,
// communication and exposed communication times are step values too (gpu_compute_ms,
// gpu_comm_ms, gpu_exposed_comm_ms, as steps.csv's compute_s, comm_s and exposed_comm_s).
// Bucketing horovod is refused: its fused groups are what is ready at each cycle of real time,
// which on a GPU differs from rank to rank, and NCCL needs the same buffers on every rank.
//
// The program is plain C++ over two interfaces: runtime/device.h (memory, streams, events) and
// GpuStepBackend below (the products, a fill kernel, the device allreduce), which gpu/ implements
// on cuBLAS and NCCL (gpu/gpu_step_backend.h) and a test can implement on host memory.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "runtime/device.h"
#include "runtime/device_collectives.h"
#include "runtime/engine.h"
#include "runtime/status.h"
#include "runtime/time.h"
#include "workloads/bucketing.h"
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
  // none: compute, then communicate (buckets of fusion_bytes); kungfu, ddp: overlapped (above).
  BucketingOptions bucketing;
  std::string device;  // picks a profile's per-layer times for the timeline (step_timeline.h)
};

// Throws std::invalid_argument without a model, with bucketing horovod, or with fusion_bytes and
// a bucketing other than none; std::runtime_error when device memory cannot be had (the Status's
// message). With overlap the program starts its allreduces from the step's compute, so begin()
// must come before each step's compute(), as the Trainer does.
std::unique_ptr<StepProgram> make_gpu_step_program(std::unique_ptr<GpuStepBackend> backend,
                                                   const GpuStepOptions& options, int rank,
                                                   int size);

}  // namespace kf
