// Device: a compute device (a GPU) as the runtime sees it, a plain interface with no CUDA in it
// (the seam: runtime/ never includes a CUDA header). The real world implements it on CUDA
// (gpu/cuda_device.h); a test can implement it on host memory.
//
// Memory is device memory unless named pinned (page-locked host memory the device copies to and
// from at full speed, asynchronously). Work is queued on streams: work on one stream runs in
// order, work on different streams may overlap (copies in both directions and kernels run at
// the same time on a GPU). Events order streams against each other. Every call that queues work
// returns at once; its errors (and those of earlier work) come back as a Status naming the
// device call and what it was asked to do, e.g.
//   "cudaMemcpyAsync(d2h, 4194304 bytes) on cuda:0: an illegal memory access was encountered".
// C++17: included by world glue.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/executor.h"
#include "runtime/reduce.h"
#include "runtime/status.h"

namespace kf {

struct DeviceInfo {
  std::string name;  // "cuda:0 (NVIDIA H100 80GB HBM3)"
  int ordinal = 0;   // the device index in its process
  std::size_t memory_bytes = 0;
  // Peak memory bandwidth from the device's own figures (2 x memory clock x bus width for DDR
  // memories), GB/s with GB = 1e9; 0 when unknown.
  double memory_bandwidth_gbs = 0;
  int multiprocessors = 0;
  int compute_major = 0, compute_minor = 0;
};

// An ordered queue of device work. Opaque: made and understood by its Device.
class DeviceStream {
 public:
  virtual ~DeviceStream() = default;
};

// A point in a stream's work that other streams (or the host) can wait for.
class DeviceEvent {
 public:
  virtual ~DeviceEvent() = default;
};

enum class CopyKind { host_to_device, device_to_host, device_to_device };

class Device {
 public:
  virtual ~Device() = default;

  virtual const DeviceInfo& info() const = 0;

  // Device memory and pinned host memory. `*out` is null after an error.
  virtual Status allocate(std::size_t bytes, void** out) = 0;
  virtual void release(void* p) noexcept = 0;
  virtual Status allocate_pinned(std::size_t bytes, void** out) = 0;
  virtual void release_pinned(void* p) noexcept = 0;

  virtual Status create_stream(std::unique_ptr<DeviceStream>* out) = 0;
  virtual Status create_event(std::unique_ptr<DeviceEvent>* out) = 0;

  // Queued on `stream`; host memory taking part must be pinned for the copy to be asynchronous.
  virtual Status copy(void* dst, const void* src, std::size_t bytes, CopyKind kind,
                      DeviceStream& stream) = 0;
  virtual Status fill_zero(void* dst, std::size_t bytes, DeviceStream& stream) = 0;
  // dst[i] = op(dst[i], src[i]) in device memory, with the semantics of kf::reduce_into
  // (runtime/reduce.h): integers wrap, min/max keep the first operand on NaN, avg is a sum
  // (finish it with divide), f16/bf16 are reduced in f32 and rounded back once.
  virtual Status reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                        DeviceStream& stream) = 0;
  // data[i] /= divisor for the floating dtypes (avg's last step); a no-op otherwise.
  virtual Status divide(void* data, std::size_t count, DType dtype, std::size_t divisor,
                        DeviceStream& stream) = 0;

  virtual Status record(DeviceEvent& event, DeviceStream& stream) = 0;
  // Work queued on `stream` after this call waits until `event` has happened.
  virtual Status wait(DeviceStream& stream, DeviceEvent& event) = 0;
  // Blocks the calling thread until everything queued on `stream` has finished.
  virtual Status synchronize(DeviceStream& stream) = 0;
  // Posts `done` on `executor` once everything queued on `stream` so far has finished, with the
  // device's error status at that point. Never calls `done` from inside notify(). The executor
  // must outlive the notification (or the callback must guard itself).
  virtual Status notify(DeviceStream& stream, Executor& executor,
                        std::function<void(Status)> done) = 0;
};

// Pinned host memory held in a Device-backed pool, so staging buffers are not allocated per
// operation (pinning is slow: about a millisecond per megabyte). Not thread-safe: use it on one
// executor.
class PinnedPool {
 public:
  explicit PinnedPool(Device& device) : device_(device) {}
  ~PinnedPool();
  PinnedPool(const PinnedPool&) = delete;
  PinnedPool& operator=(const PinnedPool&) = delete;

  // At least `bytes` of pinned memory (sizes are rounded up to a power of two, at least 64 KiB).
  Status acquire(std::size_t bytes, void** out);
  void give_back(void* p);  // p from acquire()
  std::size_t held_bytes() const;

 private:
  struct Block {
    void* data;
    std::size_t bytes;
    bool in_use;
  };
  Device& device_;
  std::vector<Block> blocks_;
};

}  // namespace kf
