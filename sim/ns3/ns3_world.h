// Ns3World: every worker an ns-3 node, every runtime message carried over ns-3 TCP between them.
//
// The engine's messages become the right number of bytes on a real ns-3 TCP connection (one per
// ordered worker pair, opened on first use); the Message itself travels out of band and is handed
// to the receiving engine when its last byte arrives, so queueing, congestion control and
// contention shape every collective. One simulated clock is every worker's Executor; Compute
// advances it by the profiled duration times the worker's straggler factor.
//
// This header is ns-3 free and C++17, so C++20 code (kfsim, tests) can use it; only the sources
// in sim/ns3 see ns-3 (ns3_network_builder.h builds the network this world runs on). ns-3 is a
// process-wide singleton: one Ns3World at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/compute.h"
#include "runtime/executor.h"
#include "runtime/transport.h"
#include "sim/sim_world.h"
#include "topology/physical.h"

namespace kf {

struct Ns3Options {
  std::uint64_t seed = 1;
  std::uint32_t socket_buffer_bytes = 8u << 20;  // TCP send and receive buffers
  std::chrono::nanoseconds min_rto = std::chrono::milliseconds(200);     // Linux's floor
  std::chrono::nanoseconds delayed_ack = std::chrono::milliseconds(40);  // Linux's ceiling
  std::uint16_t port = 10000;                                            // workers listen here
  // Compute times are scaled by a factor uniform in [1 - j, 1 + j], from a generator seeded by
  // (seed, rank).
  double compute_jitter = 0;
  // Every host's NIC queue; switch ports stay drop-tail queues of the link's size either way.
  //   fq_codel: Linux's default qdisc (per-flow fair queueing, short queues), as on a real host.
  //   tsq: a Linux host's egress as TCP small queues shape it, whatever its qdisc: each socket
  //     keeps at most a packet or two in the queue and the rest waits in its socket buffer, so
  //     the host never drops its own segments and a plain FIFO serves its sockets in turn.
  //     Modelled as a per-flow fair queue that never drops over a device ring of two packets.
  //     ns-3's TCP has no TSQ: without this its windows fill a host's drop-tail queue, and a
  //     host with a bulk flow delays (and drops) its other connections' segments behind it.
  HostQdisc host_qdisc = HostQdisc::none;
  // rack: Linux's loss detection (RACK and the tail loss probe, ns3_rack_socket.h) in every TCP
  // sender; rfc6675: a lost retransmission or a lost tail waits for the retransmission timer, as
  // in stock ns-3.
  LossRecovery loss_recovery = LossRecovery::rack;
  // Every runtime and background TCP sender's state every this often (0: never): tcp_samples().
  std::chrono::nanoseconds tcp_sample_every{0};
};

using Ns3Stats = WorldStats;  // simulator_events: executed by ns-3 so far

class Ns3World final : public SimWorld {
 public:
  Ns3World(const PhysicalTopology& topology, Ns3Options options = {});
  ~Ns3World() override;
  Ns3World(const Ns3World&) = delete;
  Ns3World& operator=(const Ns3World&) = delete;

  int workers() const override;
  Executor& executor() override;
  Transport& transport(int rank) override;
  Compute& compute(int rank) override;

  // Runs the simulation until stop() or until nothing is left to do.
  void run() override;
  void stop() override;
  TimePoint now() const override;
  Ns3Stats stats() const override;

  // ---- event injection ----
  void set_straggler(int rank, double factor) override;
  // Background TCP traffic between two nodes (by PhysicalTopology node name). `rate_bps` paces
  // each flow; without it each flow sends as fast as TCP lets it. Returns an id for stop.
  int start_background(const std::string& from, const std::string& to,
                       std::optional<double> rate_bps, int flows) override;
  void stop_background(int id) override;
  // A plain ns-3 BulkSend flow of `bytes` between two nodes, starting now; `done` runs when the
  // receiver has all of them (a contention burst of a given size, or raw ns-3 traffic to compare
  // the runtime against).
  void send_bulk(const std::string& from, const std::string& to, std::uint64_t bytes,
                 std::function<void()> done);
  // The samples so far, in time order, senders in the order they opened (empty unless
  // Ns3Options::tcp_sample_every is set).
  const std::vector<TcpSample>& tcp_samples() const override;
  // Wire bytes of runtime messages delivered so far, per ordered worker pair.
  std::map<std::pair<int, int>, std::uint64_t> pair_bytes() const;
  // Changes a link's bandwidth and/or latency from now on (link named as in PhysicalTopology).
  void set_link(const std::string& link, std::optional<double> bandwidth_bps,
                std::optional<std::chrono::nanoseconds> latency) override;
  // The worker's process dies: its connections close, its peers are told as TCP would tell them.
  void fail(int rank) override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kf
