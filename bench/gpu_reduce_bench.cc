// gpu_reduce_bench: GB/s of the GPU reduction kernels (dst = op(dst, src)) for every dtype and
// op, against the card's peak memory bandwidth (from its memory clock and bus width) and a
// device-to-device cudaMemcpy (the practical ceiling). GB/s counts the bytes moved: 2 reads + 1
// write per element, over the kernel time measured with CUDA events (median of -n launches).
// The inputs are random values (gradient-like floats in [-1, 1), random integers), never zeros.
// It also measures pinned host <-> device copies, one way and both ways at once: the ceiling of
// the STAGED paths, which move every byte down to the host and back up.
//   gpu_reduce_bench                    # 256 MiB buffers, every dtype x op
//   gpu_reduce_bench -bytes 1G -n 50 -d f32,bf16 -o sum --json
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/cuda_device.h"
#include "gpu/gpu.h"
#include "gpu/reduce_kernels.h"
#include "launch/flags.h"
#include "runtime/half.h"

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    throw std::runtime_error(
        fmt::format("{}: {} ({})", what, cudaGetErrorString(e), cudaGetErrorName(e)));
  }
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// Median milliseconds of `iters` runs of `launch` on `stream`, timed by events.
template <class F>
double median_ms(cudaStream_t stream, int iters, F launch) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 3; ++i)
    launch();  // warm-up
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    check(cudaEventRecord(a, stream), "cudaEventRecord");
    launch();
    check(cudaEventRecord(b, stream), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, a, b), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  check(cudaEventDestroy(a), "cudaEventDestroy");
  check(cudaEventDestroy(b), "cudaEventDestroy");
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Fills `bytes` of device memory at `dst` with random elements of `t` (floats uniform in
// [-1, 1), so no NaN or infinity; integers uniform over their range), through `host`.
void fill_random(void* dst, std::size_t bytes, kf::DType t, std::uint64_t seed,
                 std::vector<std::byte>& host) {
  host.resize(bytes);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&x] {  // xorshift64*
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1Dull;
  };
  auto unit = [&] { return static_cast<float>(static_cast<double>(next() >> 11) * 0x1p-52 - 1.0); };
  auto put = [&host](std::size_t i, const auto& v) {
    std::memcpy(host.data() + i * sizeof v, &v, sizeof v);
  };
  const std::size_t n = bytes / kf::dtype_size(t);
  switch (t) {
    case kf::DType::f16:
      for (std::size_t i = 0; i < n; ++i)
        put(i, kf::float_to_f16(unit()));
      break;
    case kf::DType::bf16:
      for (std::size_t i = 0; i < n; ++i)
        put(i, kf::float_to_bf16(unit()));
      break;
    case kf::DType::f32:
      for (std::size_t i = 0; i < n; ++i)
        put(i, unit());
      break;
    case kf::DType::f64:
      for (std::size_t i = 0; i < n; ++i)
        put(i, static_cast<double>(unit()));
      break;
    default:
      for (std::size_t i = 0; i + 8 <= bytes; i += 8)
        put(i / 8, next());
      break;
  }
  check(cudaMemcpy(dst, host.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy(h2d, inputs)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gpu_reduce_bench: GB/s of the GPU reduction kernels vs memory bandwidth"};
  std::string bytes_text = "256M", dtypes = "all", ops = "all";
  int iters = 20, device_index = 0;
  bool json = false;
  app.add_option("--bytes", bytes_text, "bytes per buffer (dst and src each)");
  app.add_option("--n", iters, "timed launches per kernel (median reported)");
  app.add_option("--d", dtypes, "dtypes, comma-separated (u8, ..., f16, bf16, f32, f64) or all");
  app.add_option("--o", ops, "ops, comma-separated (sum, min, max, prod) or all");
  app.add_option("--device", device_index, "CUDA device index");
  app.add_flag("--json", json, "one JSON object per line instead of the table");
  auto args = kf::go_style_args(argc, argv, {"json"}, false);
  try {
    app.parse(static_cast<int>(args.argv.size()), args.argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (const auto why = kf::gpu_unavailable()) {
      std::fprintf(stderr, "gpu_reduce_bench: %s\n", why->c_str());
      return 2;
    }
    std::unique_ptr<kf::gpu::CudaDevice> device;
    if (kf::Status s = kf::gpu::CudaDevice::open(device_index, &device); !s.ok())
      throw std::runtime_error(s.to_string());
    const std::size_t bytes = kf::parse_size(bytes_text, kf::UnitStyle::flag);
    std::vector<kf::DType> types;
    if (dtypes == "all") {
      types.assign(std::begin(kf::kAllDTypes), std::end(kf::kAllDTypes));
    } else {
      for (const auto& t : split(dtypes)) {
        const auto d = kf::parse_dtype(t);
        if (!d) throw std::invalid_argument("-d " + t + ": unknown dtype");
        types.push_back(*d);
      }
    }
    std::vector<kf::ReduceOp> op_list;
    for (const auto& o : split(ops == "all" ? "sum,min,max,prod" : ops)) {
      const auto op = kf::parse_reduce_op(o);
      if (!op) throw std::invalid_argument("-o " + o + ": unknown op");
      op_list.push_back(*op);
    }
    check(cudaSetDevice(device_index), "cudaSetDevice");
    void *dst = nullptr, *src = nullptr;
    check(cudaMalloc(&dst, bytes), "cudaMalloc");
    check(cudaMalloc(&src, bytes), "cudaMalloc");
    std::vector<std::byte> host;
    fill_random(dst, bytes, kf::DType::u8, 1, host);
    fill_random(src, bytes, kf::DType::u8, 2, host);
    cudaStream_t stream, other;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "cudaStreamCreate");
    void* pinned = nullptr;
    check(cudaHostAlloc(&pinned, bytes, cudaHostAllocPortable), "cudaHostAlloc");
    std::memcpy(pinned, host.data(), bytes);
    const auto& info = device->info();
    const double peak = info.memory_bandwidth_gbs;
    const double copy_ms = median_ms(stream, iters, [&] {
      check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
    });
    const double copy_gbs = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e9;
    const double gb = static_cast<double>(bytes) / 1e9;
    const double h2d_gbs =
        gb / (1e-3 * median_ms(stream, iters, [&] {
                check(cudaMemcpyAsync(src, pinned, bytes, cudaMemcpyHostToDevice, stream),
                      "cudaMemcpyAsync(h2d)");
              }));
    const double d2h_gbs =
        gb / (1e-3 * median_ms(stream, iters, [&] {
                check(cudaMemcpyAsync(pinned, dst, bytes, cudaMemcpyDeviceToHost, stream),
                      "cudaMemcpyAsync(d2h)");
              }));
    // Both directions at once (two streams, two copy engines): half the buffer each way, timed
    // from the first stream's start to the end of both.
    void* pinned_up = nullptr;
    check(cudaHostAlloc(&pinned_up, bytes / 2, cudaHostAllocPortable), "cudaHostAlloc");
    cudaEvent_t joined;
    check(cudaEventCreateWithFlags(&joined, cudaEventDisableTiming), "cudaEventCreate");
    const double duplex_ms = median_ms(stream, iters, [&] {
      check(cudaEventRecord(joined, stream), "cudaEventRecord");
      check(cudaStreamWaitEvent(other, joined, 0), "cudaStreamWaitEvent");
      check(cudaMemcpyAsync(src, pinned, bytes / 2, cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync(h2d)");
      check(cudaMemcpyAsync(pinned_up, dst, bytes / 2, cudaMemcpyDeviceToHost, other),
            "cudaMemcpyAsync(d2h)");
      check(cudaEventRecord(joined, other), "cudaEventRecord");
      check(cudaStreamWaitEvent(stream, joined, 0), "cudaStreamWaitEvent");
    });
    const double duplex_gbs = gb / 2 / (duplex_ms * 1e-3);  // each way
    check(cudaEventDestroy(joined), "cudaEventDestroy");
    check(cudaFreeHost(pinned_up), "cudaFreeHost");
    if (json) {
      std::cout << fmt::format(
          "{{\"device\":\"{}\",\"peak_gbs\":{:.1f},\"memcpy_d2d_gbs\":{:.1f},\"h2d_gbs\":{:.1f},"
          "\"d2h_gbs\":{:.1f},\"duplex_gbs_each_way\":{:.1f},\"bytes\":{}}}\n",
          info.name, peak, copy_gbs, h2d_gbs, d2h_gbs, duplex_gbs, bytes);
    } else {
      std::cout << fmt::format(
          "# {}: peak memory bandwidth {:.0f} GB/s (memory clock x bus width "
          "x 2), {} SMs, compute {}.{}\n",
          info.name, peak, info.multiprocessors, info.compute_major, info.compute_minor);
      std::cout << fmt::format(
          "# buffers: {} bytes each; GB/s = 3 x bytes / kernel time (2 reads "
          "+ 1 write), median of {}\n",
          bytes, iters);
      std::cout << fmt::format(
          "# cudaMemcpy d2d: {:.1f} GB/s (2 x bytes / time) = {:.0f}% of "
          "peak\n",
          copy_gbs, 100 * copy_gbs / peak);
      std::cout << fmt::format(
          "# pinned host <-> device: h2d {:.1f} GB/s, d2h {:.1f} GB/s, both at once {:.1f} GB/s "
          "each way (the STAGED paths' ceiling)\n",
          h2d_gbs, d2h_gbs, duplex_gbs);
      std::cout << fmt::format("{:>6} {:>6} {:>12} {:>10} {:>8} {:>10}\n", "dtype", "op",
                               "elements", "time(us)", "GB/s", "% of peak");
    }
    double sum_gbs = 0;
    int rows = 0;
    for (kf::DType t : types) {
      const std::size_t count = bytes / kf::dtype_size(t);
      fill_random(src, bytes, t, 3, host);
      for (kf::ReduceOp op : op_list) {
        // dst = op(dst, src) in place, so each op starts from fresh values (a run of prod or
        // sum would otherwise drift towards zero or infinity).
        fill_random(dst, bytes, t, 4, host);
        const double ms = median_ms(stream, iters, [&] {
          check(kf::gpu::launch_reduce(dst, src, count, t, op, stream, info.multiprocessors),
                "launch_reduce");
        });
        const double moved = 3.0 * static_cast<double>(count * kf::dtype_size(t));
        const double gbs = moved / (ms * 1e-3) / 1e9;
        sum_gbs += gbs;
        ++rows;
        if (json) {
          std::cout << fmt::format(
              "{{\"dtype\":\"{}\",\"op\":\"{}\",\"count\":{},\"time_us\":{:.2f},\"gbs\":{:.1f},"
              "\"fraction_of_peak\":{:.3f}}}\n",
              kf::dtype_name(t), kf::reduce_op_name(op), count, ms * 1e3, gbs, gbs / peak);
        } else {
          std::cout << fmt::format("{:>6} {:>6} {:>12} {:>10.1f} {:>8.1f} {:>9.1f}%\n",
                                   kf::dtype_name(t), kf::reduce_op_name(op), count, ms * 1e3, gbs,
                                   100 * gbs / peak);
        }
      }
    }
    if (!json && rows > 0) {
      std::cout << fmt::format(
          "# Avg reduce kernel bandwidth: {:.1f} GB/s ({:.0f}% of peak, "
          "{:.0f}% of cudaMemcpy d2d)\n",
          sum_gbs / rows, 100 * sum_gbs / rows / peak, 100 * sum_gbs / rows / copy_gbs);
    }
    check(cudaStreamDestroy(stream), "cudaStreamDestroy");
    check(cudaStreamDestroy(other), "cudaStreamDestroy");
    check(cudaFreeHost(pinned), "cudaFreeHost");
    check(cudaFree(dst), "cudaFree");
    check(cudaFree(src), "cudaFree");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_reduce_bench: %s\n", e.what());
    return 1;
  }
}
