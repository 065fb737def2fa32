// FlowWorld: every worker a node of the topology, every runtime message carried by a fluid flow.
//
// The parallel of Ns3World one level up: instead of packets through ns-3 TCP, each ordered
// worker pair has one connection (as TCP gives the real world), a flow over the topology's route
// that is active while it has messages queued; its rate is its weighted max-min share of every
// channel on the way (FlowNetwork), recomputed only when some flow starts or ends, a window
// changes, or a link changes. A message leaves at the connection's rate, in order, and is handed to
// the receiver when its last byte has crossed the path. One simulated clock (EventQueue) is every
// worker's Executor; Compute advances it by the profiled duration times the straggler factor, with
// the same jitter draws as the ns-3 world, so the two worlds differ only in their networks.
//
// TCP, with physical constants only (no fitted factors):
//   - capacity: a link carries payload at bandwidth x segment / (segment + 54): every segment of
//     (smallest MTU - 52) payload bytes has IPv4 (20), TCP (20), timestamp option (12) and PPP
//     (2) headers around it, as in the ns-3 world;
//   - delay: a message's last byte arrives the path's propagation latency after it left, plus one
//     store-and-forward of its last packet at every hop after the first;
//   - a connection's first message waits for the handshake (one round trip);
//   - sharing (FlowOptions::tcp_windows, the default; FlowTcp): each connection has a CUBIC
//     congestion window (slow start, HyStart, losses where the windows overflow a switch port's
//     drop-tail queue, retransmission timeouts where no duplicate ACKs would come), and flows
//     meeting at a link share it in proportion to what they have in flight, except at a host's
//     lossless queue, which serves its flows in turn. Without tcp_windows every flow gets its
//     max-min fair share at once (no slow start, no losses).
// Payloads are never copied or looked at, so phantom buffers cost nothing.
//
// Background flows (contention) are flows with no end, each capped at its rate if given.
// C++20 or C++17, no ns-3 inside; any number of FlowWorlds may exist at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "sim/sim_world.h"
#include "topology/physical.h"

namespace kf {

struct FlowOptions {
  std::uint64_t seed = 1;
  // Compute times are scaled by a factor uniform in [1 - j, 1 + j], drawn as the ns-3 world does.
  double compute_jitter = 0;
  // Flows meeting at a channel share it in proportion to their TCP congestion windows
  // (CubicWindow, updated every round trip, losses where the windows overflow a channel's
  // queue) instead of equally.
  bool tcp_windows = true;
  // Hosts queue without loss (the ns-3 world's host_qdisc: tsq): only switch ports drop.
  bool lossless_hosts = true;
  // Every TCP sender's window every this often (0: never; with tcp_windows): tcp_samples().
  std::chrono::nanoseconds tcp_sample_every{0};
  // A message that starts a flow alone on its route, nothing queued behind it, is scheduled to
  // arrive at once, skipping the event of its last byte leaving (half a ring's events). The
  // same arrival times either way: false keeps every event, as a reference.
  bool express_messages = true;
};

struct FlowStats {
  std::uint64_t rate_solves = 0;   // components re-solved
  std::uint64_t solved_flows = 0;  // flows in them, summed
  std::uint64_t connections = 0;   // worker pairs that exchanged messages
  std::uint64_t tcp_rounds = 0;    // window updates (FlowOptions::tcp_windows)
  std::uint64_t tcp_losses = 0;    // window backoffs where windows overflowed a queue
  std::uint64_t tcp_timeouts = 0;  // of them, retransmission timeouts
};

class FlowWorld final : public SimWorld {
 public:
  FlowWorld(const PhysicalTopology& topology, FlowOptions options = {});
  ~FlowWorld() override;
  FlowWorld(const FlowWorld&) = delete;
  FlowWorld& operator=(const FlowWorld&) = delete;

  int workers() const override;
  Executor& executor() override;
  Transport& transport(int rank) override;
  Compute& compute(int rank) override;

  void run() override;
  void stop() override;
  TimePoint now() const override;
  WorldStats stats() const override;
  FlowStats flow_stats() const;
  std::vector<std::pair<std::string, std::uint64_t>> model_counters() const override;
  // A connection's in_flight_bytes is what its flow weighs (its window, or less when it has less
  // to send); its acked_bytes, what it has sent (acknowledged at once, in the fluid).
  const std::vector<TcpSample>& tcp_samples() const override;

  void set_straggler(int rank, double factor) override;
  int start_background(const std::string& from, const std::string& to,
                       std::optional<double> rate_bps, int flows) override;
  void stop_background(int id) override;
  void set_link(const std::string& link, std::optional<double> bandwidth_bps,
                std::optional<std::chrono::nanoseconds> latency) override;
  void fail(int rank) override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kf
