// CudaDevice: the runtime's Device (runtime/device.h) on one CUDA GPU. Every call first makes
// the device current on the calling thread (cudaSetDevice is per thread and cheap when
// unchanged), so the event loop, the compute thread and helper threads can all use it. Every
// CUDA call is checked; errors name the call, its arguments and the device.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <string_view>

#include "runtime/device.h"

namespace kf::gpu {

// Status{} for cudaSuccess, else a device error "<call> on <where>: <text> (<name>)".
Status cuda_status(cudaError_t e, std::string_view call, std::string_view where = {});

class CudaStream final : public DeviceStream {
 public:
  explicit CudaStream(cudaStream_t s, int ordinal) : stream_(s), ordinal_(ordinal) {}
  ~CudaStream() override;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_;
  int ordinal_;
};

class CudaEvent final : public DeviceEvent {
 public:
  explicit CudaEvent(cudaEvent_t e, int ordinal) : event_(e), ordinal_(ordinal) {}
  ~CudaEvent() override;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_;
  int ordinal_;
};

inline cudaStream_t native(DeviceStream& s) {
  return static_cast<CudaStream&>(s).get();
}

class CudaDevice final : public Device {
 public:
  // The number of devices, or an error status ("no CUDA device: cudaGetDeviceCount: ...").
  static Status count(int* out);
  // Opens device `ordinal`: checks it exists and reads its properties.
  static Status open(int ordinal, std::unique_ptr<CudaDevice>* out);

  const DeviceInfo& info() const override { return info_; }
  int ordinal() const { return info_.ordinal; }
  // Makes this device current on the calling thread.
  Status bind() const;

  Status allocate(std::size_t bytes, void** out) override;
  void release(void* p) noexcept override;
  Status allocate_pinned(std::size_t bytes, void** out) override;
  void release_pinned(void* p) noexcept override;
  Status create_stream(std::unique_ptr<DeviceStream>* out) override;
  Status create_event(std::unique_ptr<DeviceEvent>* out) override;
  Status copy(void* dst, const void* src, std::size_t bytes, CopyKind kind,
              DeviceStream& stream) override;
  Status fill_zero(void* dst, std::size_t bytes, DeviceStream& stream) override;
  Status reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                DeviceStream& stream) override;
  Status divide(void* data, std::size_t count, DType dtype, std::size_t divisor,
                DeviceStream& stream) override;
  Status record(DeviceEvent& event, DeviceStream& stream) override;
  Status wait(DeviceStream& stream, DeviceEvent& event) override;
  Status synchronize(DeviceStream& stream) override;
  Status notify(DeviceStream& stream, Executor& executor,
                std::function<void(Status)> done) override;

  // "cuda:0"
  std::string where() const;

 private:
  explicit CudaDevice(DeviceInfo info) : info_(std::move(info)) {}
  DeviceInfo info_;
};

}  // namespace kf::gpu
