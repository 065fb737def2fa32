#include "gpu/cuda_device.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "gpu/reduce_kernels.h"

namespace kf::gpu {

Status cuda_status(cudaError_t e, std::string_view call, std::string_view where) {
  if (e == cudaSuccess) return Status{};
  return Status(ErrorCode::device, fmt::format("{}{}{}: {} ({})", call, where.empty() ? "" : " on ",
                                               where, cudaGetErrorString(e), cudaGetErrorName(e)));
}

namespace {

const char* kind_name(CopyKind k) {
  switch (k) {
    case CopyKind::host_to_device:
      return "h2d";
    case CopyKind::device_to_host:
      return "d2h";
    case CopyKind::device_to_device:
      return "d2d";
  }
  return "?";
}

cudaMemcpyKind native_kind(CopyKind k) {
  switch (k) {
    case CopyKind::host_to_device:
      return cudaMemcpyHostToDevice;
    case CopyKind::device_to_host:
      return cudaMemcpyDeviceToHost;
    case CopyKind::device_to_device:
      return cudaMemcpyDeviceToDevice;
  }
  return cudaMemcpyDefault;
}

// Polls an event recorded on a stream from the executor: a few immediate re-posts (small
// operations finish within microseconds), then timers backing off to 200 us. Polling, rather than
// a host callback in the stream, cannot hang on a device in an error state: the query returns the
// error.
struct EventPoll : std::enable_shared_from_this<EventPoll> {
  cudaEvent_t event = nullptr;
  int ordinal = 0;
  Executor* executor = nullptr;
  std::function<void(Status)> done;
  std::string where;
  int polls = 0;
  Duration delay{0};

  void run() {
    (void)cudaSetDevice(ordinal);
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaErrorNotReady) {
      auto self = shared_from_this();
      if (++polls < 64) {
        executor->post([self] { self->run(); });
      } else {
        delay = std::min<Duration>(std::max<Duration>(delay * 2, std::chrono::microseconds(5)),
                                   std::chrono::microseconds(200));
        executor->post_after(delay, [self] { self->run(); });
      }
      return;
    }
    (void)cudaEventDestroy(event);
    event = nullptr;
    auto d = std::move(done);
    d(cuda_status(e, "cudaEventQuery (waiting for a stream)", where));
  }
};

}  // namespace

CudaStream::~CudaStream() {
  (void)cudaSetDevice(ordinal_);
  (void)cudaStreamDestroy(stream_);
}

CudaEvent::~CudaEvent() {
  (void)cudaSetDevice(ordinal_);
  (void)cudaEventDestroy(event_);
}

Status CudaDevice::count(int* out) {
  *out = 0;
  const cudaError_t e = cudaGetDeviceCount(out);
  if (e != cudaSuccess) {
    *out = 0;
    (void)cudaGetLastError();  // not sticky: clear it
    return Status(ErrorCode::device, fmt::format("no CUDA device: cudaGetDeviceCount: {} ({})",
                                                 cudaGetErrorString(e), cudaGetErrorName(e)));
  }
  if (*out == 0)
    return Status(ErrorCode::device, "no CUDA device: cudaGetDeviceCount found 0 devices");
  return Status{};
}

Status CudaDevice::open(int ordinal, std::unique_ptr<CudaDevice>* out) {
  int n = 0;
  if (Status s = count(&n); !s.ok()) return s;
  if (ordinal < 0 || ordinal >= n) {
    return Status(ErrorCode::invalid_argument,
                  fmt::format("no CUDA device {}: this process sees {} device(s) (0..{})", ordinal,
                              n, n - 1));
  }
  const std::string where = fmt::format("cuda:{}", ordinal);
  if (Status s = cuda_status(cudaSetDevice(ordinal), "cudaSetDevice", where); !s.ok()) return s;
  cudaDeviceProp prop{};
  if (Status s =
          cuda_status(cudaGetDeviceProperties(&prop, ordinal), "cudaGetDeviceProperties", where);
      !s.ok())
    return s;
  int clock_khz = 0, bus_bits = 0;
  // cudaDeviceProp lost memoryClockRate in CUDA 13; the attribute remains.
  if (Status s =
          cuda_status(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, ordinal),
                      "cudaDeviceGetAttribute(MemoryClockRate)", where);
      !s.ok())
    return s;
  if (Status s =
          cuda_status(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, ordinal),
                      "cudaDeviceGetAttribute(GlobalMemoryBusWidth)", where);
      !s.ok())
    return s;
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = fmt::format("{} ({})", where, prop.name);
  info.memory_bytes = prop.totalGlobalMem;
  // DDR: two transfers per clock.
  info.memory_bandwidth_gbs =
      2.0 * static_cast<double>(clock_khz) * 1e3 * static_cast<double>(bus_bits) / 8.0 / 1e9;
  info.multiprocessors = prop.multiProcessorCount;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  out->reset(new CudaDevice(std::move(info)));
  return Status{};
}

std::string CudaDevice::where() const {
  return fmt::format("cuda:{}", info_.ordinal);
}

Status CudaDevice::bind() const {
  return cuda_status(cudaSetDevice(info_.ordinal), "cudaSetDevice", where());
}

Status CudaDevice::allocate(std::size_t bytes, void** out) {
  *out = nullptr;
  if (Status s = bind(); !s.ok()) return s;
  return cuda_status(cudaMalloc(out, std::max<std::size_t>(bytes, 1)),
                     fmt::format("cudaMalloc({} bytes)", bytes), where());
}

void CudaDevice::release(void* p) noexcept {
  if (p == nullptr) return;
  (void)cudaSetDevice(info_.ordinal);
  (void)cudaFree(p);
}

Status CudaDevice::allocate_pinned(std::size_t bytes, void** out) {
  *out = nullptr;
  if (Status s = bind(); !s.ok()) return s;
  return cuda_status(cudaHostAlloc(out, std::max<std::size_t>(bytes, 1), cudaHostAllocPortable),
                     fmt::format("cudaHostAlloc({} bytes)", bytes), where());
}

void CudaDevice::release_pinned(void* p) noexcept {
  if (p == nullptr) return;
  (void)cudaFreeHost(p);
}

Status CudaDevice::create_stream(std::unique_ptr<DeviceStream>* out) {
  if (Status s = bind(); !s.ok()) return s;
  cudaStream_t stream = nullptr;
  if (Status s = cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags", where());
      !s.ok())
    return s;
  *out = std::make_unique<CudaStream>(stream, info_.ordinal);
  return Status{};
}

Status CudaDevice::create_event(std::unique_ptr<DeviceEvent>* out) {
  if (Status s = bind(); !s.ok()) return s;
  cudaEvent_t event = nullptr;
  if (Status s = cuda_status(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                             "cudaEventCreateWithFlags", where());
      !s.ok())
    return s;
  *out = std::make_unique<CudaEvent>(event, info_.ordinal);
  return Status{};
}

Status CudaDevice::copy(void* dst, const void* src, std::size_t bytes, CopyKind kind,
                        DeviceStream& stream) {
  if (bytes == 0) return Status{};
  if (Status s = bind(); !s.ok()) return s;
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, native_kind(kind), native(stream)),
                     fmt::format("cudaMemcpyAsync({}, {} bytes)", kind_name(kind), bytes), where());
}

Status CudaDevice::fill_zero(void* dst, std::size_t bytes, DeviceStream& stream) {
  if (bytes == 0) return Status{};
  if (Status s = bind(); !s.ok()) return s;
  return cuda_status(cudaMemsetAsync(dst, 0, bytes, native(stream)),
                     fmt::format("cudaMemsetAsync({} bytes)", bytes), where());
}

Status CudaDevice::reduce(void* dst, const void* src, std::size_t count, DType dtype, ReduceOp op,
                          DeviceStream& stream) {
  if (Status s = bind(); !s.ok()) return s;
  return cuda_status(
      launch_reduce(dst, src, count, dtype, op, native(stream), info_.multiprocessors),
      fmt::format("reduce kernel ({} {} x {})", reduce_op_name(op), dtype_name(dtype), count),
      where());
}

Status CudaDevice::divide(void* data, std::size_t count, DType dtype, std::size_t divisor,
                          DeviceStream& stream) {
  if (Status s = bind(); !s.ok()) return s;
  return cuda_status(
      launch_divide(data, count, dtype, divisor, native(stream), info_.multiprocessors),
      fmt::format("divide kernel ({} x {} / {})", dtype_name(dtype), count, divisor), where());
}

Status CudaDevice::record(DeviceEvent& event, DeviceStream& stream) {
  if (Status s = bind(); !s.ok()) return s;
  return cuda_status(cudaEventRecord(static_cast<CudaEvent&>(event).get(), native(stream)),
                     "cudaEventRecord", where());
}

Status CudaDevice::wait(DeviceStream& stream, DeviceEvent& event) {
  if (Status s = bind(); !s.ok()) return s;
  return cuda_status(cudaStreamWaitEvent(native(stream), static_cast<CudaEvent&>(event).get(), 0),
                     "cudaStreamWaitEvent", where());
}

Status CudaDevice::synchronize(DeviceStream& stream) {
  if (Status s = bind(); !s.ok()) return s;
  return cuda_status(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize", where());
}

Status CudaDevice::notify(DeviceStream& stream, Executor& executor,
                          std::function<void(Status)> done) {
  if (Status s = bind(); !s.ok()) return s;
  auto poll = std::make_shared<EventPoll>();
  if (Status s = cuda_status(cudaEventCreateWithFlags(&poll->event, cudaEventDisableTiming),
                             "cudaEventCreateWithFlags", where());
      !s.ok())
    return s;
  if (Status s =
          cuda_status(cudaEventRecord(poll->event, native(stream)), "cudaEventRecord", where());
      !s.ok()) {
    (void)cudaEventDestroy(poll->event);
    return s;
  }
  poll->ordinal = info_.ordinal;
  poll->executor = &executor;
  poll->done = std::move(done);
  poll->where = where();
  executor.post([poll] { poll->run(); });
  return Status{};
}

}  // namespace kf::gpu
