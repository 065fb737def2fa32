// The runtime's cost over raw ns-3: the same bytes between the same worker pairs, moved once by
// the collective engine (RING_RS_AG allreduces of phantom buffers) and once by plain ns-3
// BulkSend flows started together. Reports wall time, simulated time and simulator events of
// both, and the ratio the simulated-world issue aims to keep at 1.5x or less.
//
//   sim_overhead [workers=4] [MiB per allreduce=64] [allreduces=4]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

#include "runtime/collectives.h"
#include "sim/ns3/ns3_world.h"

namespace kf {
namespace {

struct Measured {
  double wall_s = 0;
  double simulated_s = 0;
  std::uint64_t events = 0;
  std::map<std::pair<int, int>, std::uint64_t> pairs;
};

PhysicalTopology network(int n) {
  const LinkSpec link{.bandwidth_bps = 1e9,
                      .latency = std::chrono::microseconds(20),
                      .mtu = 9000,
                      .queue_packets = 1000};
  return star_topology(n, 1, link, link);
}

Measured through_engine(int n, std::size_t bytes, int rounds) {
  const auto begin = std::chrono::steady_clock::now();
  Ns3World world(network(n), {.seed = 1});
  std::vector<std::unique_ptr<Engine>> engines;
  const ClusterSpec cluster = ClusterSpec::local(n);
  for (int r = 0; r < n; ++r) {
    engines.push_back(
        std::make_unique<Engine>(cluster, r, world.executor(), world.transport(r),
                                 EngineOptions{.timeout = std::chrono::seconds(3600),
                                               .strategy = StrategyName::ring_rs_ag}));
  }
  const auto buffer = BufferView::phantom(bytes / 4, DType::f32);
  int remaining = n * rounds;
  for (int r = 0; r < n; ++r) {
    for (int k = 0; k < rounds; ++k) {
      world.executor().post([&, r, k] {
        allreduce(*engines[static_cast<std::size_t>(r)],
                  {.name = fmt::format("t{}", k), .input = buffer, .output = buffer},
                  [&](Status s) {
                    if (!s.ok()) fmt::print(stderr, "allreduce failed: {}\n", s.to_string());
                    if (--remaining == 0) world.stop();
                  });
      });
    }
  }
  world.run();
  Measured m{.simulated_s = to_seconds(world.now().time_since_epoch()),
             .events = world.stats().simulator_events,
             .pairs = world.pair_bytes()};
  engines.clear();
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return m;
}

Measured through_bulk_send(int n, const std::map<std::pair<int, int>, std::uint64_t>& pairs) {
  const auto begin = std::chrono::steady_clock::now();
  Ns3World world(network(n), {.seed = 1});
  std::size_t remaining = pairs.size();
  world.executor().post([&] {
    for (const auto& [pair, bytes] : pairs) {
      world.send_bulk(fmt::format("w{}", pair.first), fmt::format("w{}", pair.second), bytes, [&] {
        if (--remaining == 0) world.stop();
      });
    }
  });
  world.run();
  Measured m{.simulated_s = to_seconds(world.now().time_since_epoch()),
             .events = world.stats().simulator_events};
  m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return m;
}

}  // namespace
}  // namespace kf

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 4;
  const std::size_t mib = argc > 2 ? static_cast<std::size_t>(std::atoi(argv[2])) : 64;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 4;
  const auto engine = kf::through_engine(n, mib << 20, rounds);
  std::uint64_t total = 0;
  for (const auto& [pair, bytes] : engine.pairs)
    total += bytes;
  const auto raw = kf::through_bulk_send(n, engine.pairs);
  fmt::print(
      "# {} workers, 1 Gbps star, MTU 9000; {} x {} MiB RING_RS_AG allreduces = {:.1f} MB "
      "between {} pairs\n",
      n, rounds, mib, static_cast<double>(total) / 1e6, engine.pairs.size());
  fmt::print("{:<24} {:>10} {:>14} {:>16}\n", "", "wall (s)", "simulated (s)", "ns-3 events");
  fmt::print("{:<24} {:>10.2f} {:>14.3f} {:>16}\n", "plain ns-3 BulkSend", raw.wall_s,
             raw.simulated_s, raw.events);
  fmt::print("{:<24} {:>10.2f} {:>14.3f} {:>16}\n", "through the engine", engine.wall_s,
             engine.simulated_s, engine.events);
  fmt::print("overhead (wall, engine / BulkSend): {:.2f}x\n", engine.wall_s / raw.wall_s);
  return 0;
}
