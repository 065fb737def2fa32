// kfbench --device cuda: the nccl-tests table for device buffers. Each rank uses GPU
// LOCAL_RANK % device count; the allreduce goes by the device strategy (-strategy NCCL,
// NCCL_HIERARCHICAL, STAGED or STAGED:<runtime strategy>). An iteration is timed from the call to
// the result being back in device memory, and lasts as long as its slowest rank.
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "bench/kfbench_run.h"
#include "bench/nccl_table.h"
#include "gpu/gpu.h"

namespace kf::bench {

namespace {

using Clock = std::chrono::steady_clock;

void ok(const Status& s) {
  if (!s.ok()) throw std::runtime_error(s.to_string());
}

// Device memory for one row, released on every path.
class DeviceBuffer {
 public:
  DeviceBuffer(Device& d, std::size_t bytes) : device_(d) { ok(d.allocate(bytes, &data_)); }
  ~DeviceBuffer() { device_.release(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }

 private:
  Device& device_;
  void* data_ = nullptr;
};

}  // namespace

int run_device_collective_bench(Peer& peer, const CollectiveBench& b, std::ostream& out) {
  if (b.device != "cuda")
    throw std::invalid_argument("--device " + b.device + ": unknown (host or cuda)");
  if (b.collective != "allreduce")
    throw std::invalid_argument("--device cuda: only allreduce is offered on device buffers");
  const auto strategy = parse_device_strategy(b.device_strategy);
  if (!strategy) {
    throw std::invalid_argument("-strategy " + b.device_strategy +
                                ": unknown device strategy; known: " + device_strategy_names());
  }
  if (!reduce_op_supports(b.op, b.dtype)) {
    throw std::invalid_argument(fmt::format("-o {} needs a floating dtype, not {}",
                                            reduce_op_name(b.op), dtype_name(b.dtype)));
  }
  GpuPeer gpu(peer, {.strategy = *strategy});  // throws "no CUDA device: ..." without one
  Device& device = gpu.device();
  std::unique_ptr<DeviceStream> stream;
  ok(device.create_stream(&stream));
  ok(gpu.prepare());
  const int n = peer.size();
  const bool report = peer.rank() == 0;
  const std::string label =
      fmt::format("{} on {}", device_strategy_name(*strategy), device.info().name);
  if (report && !b.json) {
    out << table_header(b.collective, n, label) << std::flush;
    out << fmt::format("# rank 0 device {}: {:.0f} GB/s peak memory bandwidth, {} SMs\n",
                       device.info().name, device.info().memory_bandwidth_gbs,
                       device.info().multiprocessors)
        << std::flush;
  }
  std::vector<Row> rows;
  const std::size_t elem = dtype_size(b.dtype);
  for (std::size_t bytes = b.min_bytes; bytes <= b.max_bytes;) {
    const std::size_t count = std::max<std::size_t>(bytes / elem, 1);
    DeviceBuffer in(device, count * elem), result(device, count * elem);
    std::vector<std::byte> host(count * elem);
    fill_bench_input(host.data(), count, b.dtype, peer.rank(), b.op);
    ok(device.copy(in.get(), host.data(), host.size(), CopyKind::host_to_device, *stream));
    ok(device.synchronize(*stream));
    Row row;
    row.bytes = count * elem;
    row.count = count;
    row.type = bench_dtype_name(b.dtype);
    row.redop = std::string(reduce_op_name(b.op));
    ok(peer.barrier());
    for (int i = 0; i < b.warmup; ++i)
      ok(gpu.allreduce(in.get(), result.get(), count, b.dtype, b.op));
    std::vector<double> seconds(static_cast<std::size_t>(b.iters));
    for (auto& s : seconds) {
      const auto t0 = Clock::now();
      ok(gpu.allreduce(in.get(), result.get(), count, b.dtype, b.op));
      s = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    ok(peer.allreduce(std::span<double>(seconds), ReduceOp::max));
    fill_timing(row, seconds, busbw_factor(b.collective, n));
    if (b.check) {
      // Out of place above; in place here, from a fresh copy of the input.
      ok(device.copy(result.get(), host.data(), host.size(), CopyKind::host_to_device, *stream));
      ok(device.synchronize(*stream));
      std::vector<std::uint64_t> wrong{0};
      const Status s = gpu.allreduce(result.get(), result.get(), count, b.dtype, b.op);
      if (s.ok()) {
        std::vector<std::byte> got(count * elem);
        ok(device.copy(got.data(), result.get(), got.size(), CopyKind::device_to_host, *stream));
        ok(device.synchronize(*stream));
        wrong[0] = count_wrong_allreduce(got.data(), count, b.dtype, b.op, n);
      } else {
        wrong[0] = count;
      }
      ok(peer.allreduce(std::span<std::uint64_t>(wrong), ReduceOp::sum));
      row.wrong = wrong[0];
    }
    rows.push_back(row);
    if (report && !b.json) out << table_row(row) << std::flush;
    const std::size_t next = b.step > 0
                                 ? bytes + b.step
                                 : static_cast<std::size_t>(static_cast<double>(bytes) * b.factor);
    if (next <= bytes) break;
    bytes = next;
  }
  if (report) {
    if (b.json) {
      out << to_json(b.collective, n, label, rows) << "\n";
    } else {
      out << table_footer(rows);
      std::string comms;
      for (const auto& c : gpu.communicators())
        comms += (comms.empty() ? "" : ", ") + c;
      out << "# NCCL communicators: " << (comms.empty() ? "none" : comms) << "\n";
    }
  }
  stream.reset();
  for (const auto& r : rows)
    if (r.wrong != 0) return 1;
  return 0;
}

}  // namespace kf::bench
