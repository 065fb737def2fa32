// In-process allreduce throughput, reported the nccl-tests way: algbw = bytes / time and
// busbw = algbw x 2(n-1)/n (GB = 1e9), beside memcpy bandwidth measured in the same run
// (memcpy counted as bytes copied, the convention nccl-tests' busbw compares against).
//
// The in-process world runs one event-loop thread per peer and moves each message by copying it
// into a payload, so on a 2-core machine this measures the engine plus memory traffic, not a
// network.
#include <benchmark/benchmark.h>

#include <cstring>
#include <future>
#include <memory>
#include <vector>

#include "real/inproc_world.h"
#include "runtime/collectives.h"
#include "topology/strategy.h"

namespace kf {
namespace {

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["GBps"] = benchmark::Counter(static_cast<double>(state.iterations() * bytes) / 1e9,
                                              benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Memcpy)->Arg(64 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Allreduce(benchmark::State& state) {
  const auto strategy = static_cast<StrategyName>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const auto bytes = static_cast<std::size_t>(state.range(2));
  const std::size_t count = bytes / 4;
  InprocWorld world(n, {.strategy = strategy});
  std::vector<Buffer> in, out;
  for (int r = 0; r < n; ++r) {
    in.emplace_back(count, DType::f32);
    out.emplace_back(count, DType::f32);
    for (auto& x : in.back().as<float>())
      x = 1.0f + static_cast<float>(r);
    std::memset(out.back().as<float>().data(), 0, bytes);
  }
  for (auto _ : state) {
    std::vector<std::shared_ptr<std::promise<Status>>> done;
    for (int r = 0; r < n; ++r) {
      done.push_back(std::make_shared<std::promise<Status>>());
      world.post(r, [&, r, p = done.back()](Engine& e) {
        allreduce(e, {.name = "bench", .input = in[r].view(), .output = out[r].view()},
                  [p](Status s) { p->set_value(std::move(s)); });
      });
    }
    for (auto& p : done) {
      const Status s = p->get_future().get();
      if (!s.ok()) state.SkipWithError(s.to_string().c_str());
    }
  }
  const double total = static_cast<double>(state.iterations() * bytes);
  state.counters["algbw_GBps"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
  state.counters["busbw_GBps"] =
      benchmark::Counter(total / 1e9 * 2.0 * (n - 1) / n, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(strategy_name(strategy)) + " n=" + std::to_string(n));
}
BENCHMARK(BM_Allreduce)
    ->Args({static_cast<int>(StrategyName::ring_rs_ag), 4, 64 << 20})
    ->Args({static_cast<int>(StrategyName::halving_doubling), 4, 64 << 20})
    ->Args({static_cast<int>(StrategyName::binary_tree_star), 4, 64 << 20})
    ->Args({static_cast<int>(StrategyName::star), 4, 64 << 20})
    ->Args({static_cast<int>(StrategyName::ring_rs_ag), 2, 64 << 20})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0);

}  // namespace
}  // namespace kf

BENCHMARK_MAIN();
