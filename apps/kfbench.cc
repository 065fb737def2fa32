// kfbench: collective benchmarks in nccl-tests' shape, run on every worker under kfrun.
//   kfrun -np 4 kfbench allreduce -b 1K -e 256M -f 2 -n 20 -w 5 -c 1 -d float -o sum
//   kfrun -np 2 kfbench tcp          (the raw single-stream TCP ceiling)
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "bench/kfbench_run.h"
#include "gpu/gpu.h"
#include "launch/flags.h"
#include "launch/peer.h"

int main(int argc, char** argv) {
  CLI::App app{"kfbench: KungFu collective benchmarks (nccl-tests flags); run it under kfrun"};
  std::string what;
  std::string min_text = "8", max_text = "64M", step_text, dtype_text = "float", op_text = "sum";
  std::string strategy;
  double factor = 2;
  int iters = 20, warmup = 5, check = 1, root = 0;
  std::string chunk_text;
  bool json = false;
  app.add_option("collective", what, "allreduce | broadcast | allgather | reduce | tcp")
      ->required()
      ->check(CLI::IsMember({"allreduce", "broadcast", "allgather", "reduce", "tcp"}));
  app.add_option("--b", min_text, "smallest size in bytes (1K, 8M, ...)");
  app.add_option("--e", max_text, "largest size in bytes");
  app.add_option("--f", factor, "size factor between rows");
  app.add_option("--i", step_text, "size increment between rows (instead of -f)");
  app.add_option("--n", iters, "timed iterations per size");
  app.add_option("--w", warmup, "warm-up iterations per size");
  app.add_option("--c", check, "check results (0/1)");
  app.add_option("--d", dtype_text, "float, half, bfloat16, double, int8, uint8, int32, ...");
  app.add_option("--o", op_text, "sum, prod, min, max, avg");
  app.add_option("--r", root, "root of broadcast / reduce");
  app.add_option("--strategy", strategy,
                 "allreduce strategy (overrides KUNGFU_ALLREDUCE_STRATEGY)");
  app.add_flag("--json", json, "one JSON object instead of the table");
  app.add_option("--chunk", chunk_text, "engine chunk size (default 1M)");
  int huge_pages = 1;
  app.add_option("--hugepages", huge_pages,
                 "buffers of 2 MiB or more on transparent huge pages (0/1)");
  std::string device = "host";
  app.add_option("--device", device,
                 "host or cuda: buffers in device memory (GPU = LOCAL_RANK % devices); with "
                 "cuda, -strategy is NCCL (default), NCCL_HIERARCHICAL, STAGED or STAGED:<S>")
      ->check(CLI::IsMember({"host", "cuda"}));
  auto args = kf::go_style_args(argc, argv, {"json"}, false);
  try {
    app.parse(static_cast<int>(args.argv.size()), args.argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    kf::PeerOptions options;
    options.engine.timeout = std::chrono::seconds(120);
    if (!chunk_text.empty())
      options.engine.chunk_bytes = kf::parse_size(chunk_text, kf::UnitStyle::flag);
    if (device == "cuda") {
      // Fail before waiting for peers: no GPU, or no CUDA in this build.
      if (const auto why = kf::gpu_unavailable())
        throw std::runtime_error("--device cuda: " + *why);
      if (!strategy.empty() && !kf::parse_device_strategy(strategy)) {
        throw std::invalid_argument("-strategy " + strategy + ": unknown device strategy; known: " +
                                    kf::device_strategy_names());
      }
    } else if (!strategy.empty()) {
      const auto s = kf::parse_strategy_name(strategy);
      if (!s) throw std::invalid_argument("-strategy " + strategy + ": unknown");
      setenv("KUNGFU_ALLREDUCE_STRATEGY", strategy.c_str(), 1);  // from_env reads it
    }
    kf::Peer peer = kf::Peer::from_env(options);
    if (what == "tcp") {
      const std::size_t bytes =
          max_text == "64M" ? std::size_t{1} << 30 : kf::parse_size(max_text, kf::UnitStyle::flag);
      return kf::bench::run_tcp_bench(peer, bytes, std::max(iters / 4, 3), json, std::cout);
    }
    kf::bench::CollectiveBench b;
    b.collective = what;
    b.min_bytes = kf::parse_size(min_text, kf::UnitStyle::flag);
    b.max_bytes = kf::parse_size(max_text, kf::UnitStyle::flag);
    b.step = step_text.empty() ? 0 : kf::parse_size(step_text, kf::UnitStyle::flag);
    b.factor = factor;
    b.iters = iters;
    b.warmup = warmup;
    b.check = check != 0;
    b.root = root;
    b.json = json;
    b.huge_pages = huge_pages != 0;
    b.device = device;
    if (device == "cuda") b.device_strategy = strategy.empty() ? "NCCL" : strategy;
    const auto dtype = kf::bench::parse_bench_dtype(dtype_text);
    if (!dtype) throw std::invalid_argument("-d " + dtype_text + ": unknown dtype");
    b.dtype = *dtype;
    const auto op = kf::parse_reduce_op(op_text);
    if (!op) throw std::invalid_argument("-o " + op_text + ": unknown op");
    b.op = *op;
    const char* env_strategy = std::getenv("KUNGFU_ALLREDUCE_STRATEGY");
    b.strategy_label = env_strategy != nullptr && *env_strategy != 0 ? env_strategy : "AUTO";
    return kf::bench::run_collective_bench(peer, b, std::cout);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfbench: %s\n", e.what());
    return 2;
  }
}
