// Reduction kernel throughput against memcpy, measured in the same run.
//
// Bandwidth is "bytes touched per second", so the bytes_per_second columns compare directly:
//   memcpy of N bytes        touches 2N (read N + write N);
//   reduce_into of N bytes   touches 3N (read dst N + read src N + write dst N).
// Each benchmark's label repeats its definition. The reduction target is the f32 sum at 64 MiB
// running at >= 70% of memcpy's bytes_per_second.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/half.h"
#include "runtime/reduce.h"

namespace {

constexpr std::int64_t kMiB = 1 << 20;

// A buffer whose pages are all faulted in and filled before timing starts.
std::vector<std::uint8_t> touched(std::size_t bytes, std::uint8_t seed) {
  std::vector<std::uint8_t> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i)
    v[i] = static_cast<std::uint8_t>(seed + i * 7);
  return v;
}

// Fill with small finite values of the given dtype (no NaN/inf/denormal slow paths).
template <class T>
void fill_values(std::vector<std::uint8_t>& buf, float scale) {
  const std::size_t n = buf.size() / sizeof(T);
  for (std::size_t i = 0; i < n; ++i) {
    const float f = scale * static_cast<float>(i % 1000 + 1) / 1000.0f;
    T v;
    if constexpr (std::is_same_v<T, kf::bf16>) {
      v.bits = kf::float_to_bf16(f);
    } else {
      v = static_cast<T>(f);
    }
    std::memcpy(buf.data() + i * sizeof(T), &v, sizeof(T));
  }
}

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  auto src = touched(bytes, 1);
  auto dst = touched(bytes, 2);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * state.range(0));
  state.SetLabel("bytes touched = 2N (read N + write N)");
}

// dst = op(dst, src) over `bytes` bytes of dtype T. dst is not reset between iterations: for sum
// it keeps growing, which costs nothing extra for finite values far from overflow.
template <class T>
void run_reduce(benchmark::State& state, kf::DType t, kf::ReduceOp op) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t count = bytes / sizeof(T);
  auto dst = touched(bytes, 0);
  auto src = touched(bytes, 0);
  fill_values<T>(dst, 1.0f);
  // Tiny addends keep f32/f64 sums finite for any iteration count; bf16 simply saturates.
  fill_values<T>(src, t == kf::DType::bf16 ? 1.0f : 1e-30f);
  for (auto _ : state) {
    kf::reduce_into(dst.data(), src.data(), count, t, op);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 3 * state.range(0));
  state.SetLabel("bytes touched = 3N (read dst + read src + write dst)");
}

void BM_ReduceSumF32(benchmark::State& state) {
  run_reduce<float>(state, kf::DType::f32, kf::ReduceOp::sum);
}
void BM_ReduceSumF64(benchmark::State& state) {
  run_reduce<double>(state, kf::DType::f64, kf::ReduceOp::sum);
}
void BM_ReduceMaxF32(benchmark::State& state) {
  run_reduce<float>(state, kf::DType::f32, kf::ReduceOp::max);
}
void BM_ReduceSumBF16(benchmark::State& state) {
  run_reduce<kf::bf16>(state, kf::DType::bf16, kf::ReduceOp::sum);
}

BENCHMARK(BM_Memcpy)->Arg(1 * kMiB)->Arg(16 * kMiB)->Arg(64 * kMiB);
BENCHMARK(BM_ReduceSumF32)->Arg(1 * kMiB)->Arg(16 * kMiB)->Arg(64 * kMiB);
BENCHMARK(BM_ReduceSumF64)->Arg(64 * kMiB);
BENCHMARK(BM_ReduceMaxF32)->Arg(64 * kMiB);
BENCHMARK(BM_ReduceSumBF16)->Arg(64 * kMiB);

}  // namespace

BENCHMARK_MAIN();
