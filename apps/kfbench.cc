// kfbench: collective benchmarks in nccl-tests' shape, run on every worker under kfrun.
//   kfrun -np 4 kfbench allreduce -b 1K -e 256M -f 2 -n 20 -w 5 -c 1 -d float -o sum
//   kfrun -np 2 kfbench tcp          (the raw single-stream TCP ceiling)
//   kfrun -np 4 kfbench soak -duration 20m -b 4 -e 4M -f 8   (every collective, mixed, checked)
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <iostream>

#include "bench/kfbench_run.h"
#include "bench/kfbench_soak.h"
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
  std::string chunk_text, auto_ring_part_text, auto_local_ring_part_text, auto_doubling_text,
      auto_pair_doubling_text, auto_halving_doubling_text, timeout_text = "120s";
  bool json = false;
  app.add_option("collective", what, "allreduce | broadcast | allgather | reduce | tcp | soak")
      ->required()
      ->check(CLI::IsMember({"allreduce", "broadcast", "allgather", "reduce", "tcp", "soak"}));
  std::string duration_text = "1m";
  app.add_option("--duration", duration_text,
                 "soak: how long to run (30s, 20m); the sizes are -b..-e by -f or -i");
  app.add_option("--b", min_text, "smallest size in bytes (1K, 8M, ...)");
  app.add_option("--e", max_text, "largest size in bytes");
  app.add_option("--f", factor, "size factor between rows (above 1)");
  app.add_option("--i", step_text, "size increment between rows (instead of -f)");
  app.add_option("--n", iters, "timed iterations per size")->check(CLI::Range(1, 1000000000));
  app.add_option("--w", warmup, "warm-up iterations per size")->check(CLI::Range(0, 1000000000));
  app.add_option("--c", check, "check results (0/1)")->check(CLI::IsMember({0, 1}));
  app.add_option("--timeout", timeout_text,
                 "each collective's deadline (120s): a stopped or lost peer fails the run after "
                 "this long, naming the peer");
  app.add_option("--d", dtype_text, "float, half, bfloat16, double, int8, uint8, int32, ...");
  app.add_option("--o", op_text, "sum, prod, min, max, avg");
  app.add_option("--r", root, "root of broadcast / reduce");
  app.add_option("--strategy", strategy,
                 "allreduce strategy (overrides KUNGFU_ALLREDUCE_STRATEGY)");
  app.add_flag("--json", json, "one JSON object instead of the table");
  app.add_option("--chunk", chunk_text, "engine chunk size (default 1M)");
  app.add_option("--auto-ring-part", auto_ring_part_text,
                 "AUTO across hosts: a ring once buffer / ranks is this big (default 128K)");
  app.add_option("--auto-local-ring-part", auto_local_ring_part_text,
                 "AUTO on one host: a ring once buffer / ranks is this big (default 32K)");
  app.add_option(
      "--auto-doubling", auto_doubling_text,
      "AUTO: recursive doubling up to this many bytes (default: 4K with KUNGFU_BUSY_POLL=1, "
      "else KUNGFU_AUTO_DOUBLING or 0: never)");
  app.add_option("--auto-pair-doubling", auto_pair_doubling_text,
                 "AUTO between 2 ranks: recursive doubling up to this many bytes (default 64K)");
  app.add_option("--auto-halving-doubling", auto_halving_doubling_text,
                 "AUTO, 4, 8, 16... ranks a host each: halving-doubling instead of the ring up to "
                 "this many bytes (default 4M; 0: never)");
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
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; a bad flag is 2, as every input error
  }
  try {
    // Every flag is checked here, before waiting for the peers, and named when it is wrong.
    const auto size_flag = [](const char* flag, const std::string& text) {
      try {
        return kf::parse_size(text, kf::UnitStyle::flag);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string(flag) + " " + text + ": " + e.what());
      }
    };
    kf::PeerOptions options;
    try {
      options.engine.timeout = kf::parse_flag_duration(timeout_text);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("-timeout " + timeout_text + ": " + e.what());
    }
    if (options.engine.timeout <= kf::Duration::zero())
      throw std::invalid_argument("-timeout " + timeout_text + ": must be positive");
    if (!chunk_text.empty()) options.engine.chunk_bytes = size_flag("-chunk", chunk_text);
    if (!auto_ring_part_text.empty()) {
      options.engine.auto_ring_part_bytes = size_flag("-auto-ring-part", auto_ring_part_text);
    }
    if (!auto_local_ring_part_text.empty()) {
      options.engine.auto_local_ring_part_bytes =
          size_flag("-auto-local-ring-part", auto_local_ring_part_text);
    }
    if (!auto_doubling_text.empty()) {
      options.auto_doubling_bytes = size_flag("-auto-doubling", auto_doubling_text);
    }
    if (!auto_pair_doubling_text.empty()) {
      options.engine.auto_pair_doubling_bytes =
          size_flag("-auto-pair-doubling", auto_pair_doubling_text);
    }
    if (!auto_halving_doubling_text.empty()) {
      options.engine.auto_halving_doubling_bytes =
          size_flag("-auto-halving-doubling", auto_halving_doubling_text);
    }
    const std::size_t min_bytes = size_flag("-b", min_text);
    const std::size_t max_bytes = size_flag("-e", max_text);
    const std::size_t step_bytes = step_text.empty() ? 0 : size_flag("-i", step_text);
    if (what != "tcp") {
      if (min_bytes > max_bytes)
        throw std::invalid_argument("-b " + min_text + " is larger than -e " + max_text);
      if (step_bytes == 0 && min_bytes < max_bytes && !(factor > 1 && std::isfinite(factor))) {
        throw std::invalid_argument(fmt::format(
            "-f {}: the factor between sizes must be a number above 1 (or give -i)", factor));
      }
    }
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
    const auto dtype = kf::bench::parse_bench_dtype(dtype_text);
    if (!dtype) throw std::invalid_argument("-d " + dtype_text + ": unknown dtype");
    const auto op = kf::parse_reduce_op(op_text);
    if (!op) throw std::invalid_argument("-o " + op_text + ": unknown op");
    // soak: its duration, checked before waiting for the peers as every other flag is.
    kf::bench::SoakBench soak{.min_bytes = min_bytes,
                              .max_bytes = max_bytes,
                              .factor = factor,
                              .step = step_bytes,
                              .json = json};
    if (what == "soak") {
      try {
        soak.duration = kf::parse_flag_duration(duration_text);
      } catch (const std::invalid_argument& e) {
        throw std::invalid_argument("-duration " + duration_text + ": " + e.what());
      }
    }
    kf::Peer peer = kf::Peer::from_env(options);
    // A failure is reported at once, not after the peer's close below (a second more when a
    // peer has stopped), so that the launcher's log shows when it was found.
    try {
      if (root < 0 || root >= peer.size()) {
        throw std::invalid_argument(
            fmt::format("-r {}: the root must be a rank, 0 to {}", root, peer.size() - 1));
      }
      if (what == "soak") return kf::bench::run_soak(peer, soak, std::cout);
      if (what == "tcp") {
        const std::size_t bytes = max_text == "64M" ? std::size_t{1} << 30 : max_bytes;
        return kf::bench::run_tcp_bench(peer, bytes, std::max(iters / 4, 3), json, std::cout);
      }
      kf::bench::CollectiveBench b;
      b.collective = what;
      b.min_bytes = min_bytes;
      b.max_bytes = max_bytes;
      b.step = step_bytes;
      b.factor = factor;
      b.iters = iters;
      b.warmup = warmup;
      b.check = check != 0;
      b.root = root;
      b.json = json;
      b.huge_pages = huge_pages != 0;
      b.device = device;
      if (device == "cuda") b.device_strategy = strategy.empty() ? "NCCL" : strategy;
      b.dtype = *dtype;
      b.op = *op;
      const char* env_strategy = std::getenv("KUNGFU_ALLREDUCE_STRATEGY");
      b.strategy_label = env_strategy != nullptr && *env_strategy != 0 ? env_strategy : "AUTO";
      return kf::bench::run_collective_bench(peer, b, std::cout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kfbench: %s\n", e.what());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfbench: %s\n", e.what());
    return 2;
  }
}
