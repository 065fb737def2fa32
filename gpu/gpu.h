// The GPU world's public face, in plain C++ (no CUDA types), so programs build the same with or
// without CUDA (KF_WITH_CUDA=OFF links a stub whose entry points fail with a clear message).
//
//   kf::Peer peer = kf::Peer::from_env();
//   kf::GpuPeer gpu(peer, {.strategy = *kf::parse_device_strategy("NCCL_HIERARCHICAL")});
//   float* grad = ...;  // device memory, e.g. gpu.device().allocate(...)
//   kf::Status s = gpu.allreduce(grad, grad, n, kf::DType::f32, kf::ReduceOp::avg);
//
// Device strategies (NCCL, NCCL_HIERARCHICAL, STAGED[:S]) are described in
// runtime/device_collectives.h. NCCL communicators are built through the runtime on first use:
// the unique id of the global communicator is sent by a runtime broadcast from rank 0, those of
// the per-host and per-tree (forest) communicators by a runtime allgather from each group's first
// rank. When the engine's cluster changes (an elastic resize: another version, size or rank) the
// old communicators are aborted and new ones built on the next use.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/device_collectives.h"
#include "runtime/engine.h"

namespace kf {

class Peer;

// Was this build made with CUDA (KF_WITH_CUDA)?
bool gpu_built_with_cuda();
// nullopt when this process can use a CUDA device; else why not, e.g.
// "no CUDA device: cudaGetDeviceCount: no CUDA-capable device is detected (cudaErrorNoDevice)" or
// "built without CUDA (KF_WITH_CUDA=OFF)". Every message about a missing GPU starts with
// "no CUDA device" or "built without CUDA".
std::optional<std::string> gpu_unavailable();
int gpu_device_count();  // 0 when unavailable
// The device a worker uses by default: its local rank modulo the device count.
int gpu_default_device(int local_rank);
// Waits until the work queued on a CUDA stream of `device` is done (`stream` as a
// cudaStream_t's bits; 0 is the legacy default stream): what device collectives on memory another
// library (torch, CuPy) wrote on its own stream must do first.
Status gpu_stream_synchronize(int device, std::uintptr_t stream);

struct GpuOptions {
  int device = -1;  // -1: gpu_default_device(local rank)
  DeviceStrategy strategy;
  std::size_t piece_bytes = std::size_t{4} << 20;  // staging pipeline piece
  Duration timeout{0};                             // NCCL waits and host collectives (0: engine's)
};

// One peer's GPU state: the device, its streams, the pinned staging, the NCCL communicators.
// Everything but open() and shutdown() runs on the engine's executor.
class GpuContext {
 public:
  // Opens the device; throws std::runtime_error("no CUDA device: ...") when there is none, or
  // "built without CUDA ..." in a build without CUDA.
  static std::unique_ptr<GpuContext> open(int device, GpuOptions options);
  virtual ~GpuContext() = default;

  virtual Device& device() = 0;
  virtual const GpuOptions& options() const = 0;
  virtual void set_strategy(DeviceStrategy strategy) = 0;
  // An allreduce of device memory by the current strategy. Every peer must call the device
  // collectives in the same order (NCCL's rule).
  virtual void allreduce(Engine& engine, DeviceAllreduceOptions options, DoneCallback done) = 0;
  // Allreduce within each tree of `forest` (forest[i] = parent of i), each tree through its own
  // NCCL communicator (built on first use of this forest).
  virtual void subset_allreduce(Engine& engine, DeviceAllreduceOptions options,
                                std::vector<int> forest, DoneCallback done) = 0;
  // Builds the communicators `path` needs now (also done on first use).
  virtual void prepare(Engine& engine, DevicePath path, DoneCallback done) = 0;
  // Communicators built so far (for tests and logs): "global(2 ranks)", "local(1 ranks)", ...
  virtual std::vector<std::string> communicators() const = 0;
  // Waits for every queued device operation and destroys the communicators. Call on the engine's
  // executor thread with nothing pending, before that executor stops.
  virtual void shutdown() = 0;
};

// Blocking device collectives over a kf::Peer (call from the program's thread, not the loop).
class GpuPeer {
 public:
  // Throws std::runtime_error with a clear message when no device can be used.
  GpuPeer(Peer& peer, GpuOptions options = {});
  ~GpuPeer();
  GpuPeer(const GpuPeer&) = delete;
  GpuPeer& operator=(const GpuPeer&) = delete;

  Device& device();
  int device_ordinal() const;
  const DeviceStrategy& strategy() const;
  Status prepare();  // builds the strategy's communicators (a collective)
  Status allreduce(const void* input, void* output, std::size_t count, DType dtype,
                   ReduceOp op = ReduceOp::sum, std::string name = {});
  std::vector<std::string> communicators();

 private:
  Peer& peer_;
  std::unique_ptr<GpuContext> context_;
  int ordinal_ = 0;
  std::uint64_t serial_ = 0;
};

}  // namespace kf
