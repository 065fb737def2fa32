// SimWorld: what a kfsim run needs from a simulated world, whichever it is: the packet-level ns-3
// world (ns3_world.h) or the flow-level world (flow_world.h). Each worker slot gets the runtime's
// three interfaces (one shared Executor on the simulated clock, a Transport and a Compute per
// slot); the simulation drives the clock and injects the scenario's events through the rest.
//
// C++17 and free of ns-3: the ns-3 glue implements it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/compute.h"
#include "runtime/executor.h"
#include "runtime/transport.h"

namespace kf {

// What queues a simulated host's packets before its NIC (switch ports are always drop-tail
// queues of the link's size):
enum class HostQdisc : std::uint8_t {
  none,      // the link's drop-tail queue only
  fq_codel,  // Linux's default qdisc: per-flow fair queueing, short queues
  tsq,       // what TCP small queues make of any host queue: lossless, flows served in turn
};

// How a packet world's TCP senders find losses.
enum class LossRecovery : std::uint8_t {
  rack,     // as Linux by default (net.ipv4.tcp_recovery=1): RACK and the tail loss probe
  rfc6675,  // ns-3 3.37's own: three duplicate ACKs, else the retransmission timer
};

// How the flow world shares a channel between the flows that meet there.
enum class FlowSharing : std::uint8_t {
  cubic,  // by the flows' CUBIC congestion windows, with slow start, HyStart and losses
  fair,   // equal shares: plain max-min, no windows
};

struct WorldStats {
  std::uint64_t simulator_events = 0;  // events executed by the world's event loop so far
  std::uint64_t messages = 0;          // runtime messages delivered
  std::uint64_t message_bytes = 0;     // their wire bytes
  std::uint64_t background_bytes = 0;  // bytes received by background sinks
  // Packets a queue dropped (ns-3: device queues and host qdiscs; the flow world loses nothing).
  // TCP recovers each with a retransmission, and the time that costs is the usual reason the
  // packet world is slower than the fluid one.
  std::uint64_t dropped_packets = 0;
  // Times a runtime connection's retransmission timer fired (ns-3; a timer firing again, backed
  // off, before the connection recovered counts once): each stalls that connection for at least
  // the minimum RTO, and a collective waits for its slowest connection.
  std::uint64_t retransmission_timeouts = 0;
  // Lost retransmissions a TCP sender found and resent without waiting for the timer (ns-3 with
  // tcp_recovery: rack): each a timeout Linux avoids and stock ns-3 would have taken.
  std::uint64_t lost_retransmissions = 0;
  // Segments a TCP sender found lost by RACK with fewer than three duplicate ACKs (the tail of a
  // message): recovery entered at once, where stock ns-3 waits for the timer at a tail.
  std::uint64_t early_losses = 0;
};

// One TCP sender's state at a moment (the scenario's tcp_samples): what `ss -tin` shows of a
// Linux socket, so that a simulated run and a real one, or the two simulated worlds, can be
// compared connection by connection.
struct TcpSample {
  double time_s = 0;
  std::string kind;  // "job": a runtime connection; "background": a contention flow
  std::string src;   // node names (PhysicalTopology)
  std::string dst;
  int flow = 0;  // a background event's flow number; 0 for a job connection
  std::uint32_t cwnd_bytes = 0;
  std::uint32_t ssthresh_bytes = 0;  // 0 until the first loss or HyStart exit
  double srtt_s = 0;                 // 0 before the first RTT sample
  std::uint32_t in_flight_bytes = 0;
  std::uint64_t acked_bytes = 0;  // since the connection opened
};

class SimWorld {
 public:
  virtual ~SimWorld() = default;

  virtual int workers() const = 0;
  virtual Executor& executor() = 0;
  virtual Transport& transport(int rank) = 0;
  virtual Compute& compute(int rank) = 0;

  // Runs the simulation until stop() or until nothing is left to do.
  virtual void run() = 0;
  virtual void stop() = 0;
  virtual TimePoint now() const = 0;
  virtual WorldStats stats() const = 0;
  // Counters of the world's own model beside WorldStats (the flow world's rate solves and TCP
  // rounds, ...), by name; summary.json's world_stats holds them too. None by default.
  virtual std::vector<std::pair<std::string, std::uint64_t>> model_counters() const { return {}; }
  // What the world sampled of its TCP senders, in time order (empty unless asked to sample).
  virtual const std::vector<TcpSample>& tcp_samples() const = 0;

  // ---- event injection ----
  virtual void set_straggler(int rank, double factor) = 0;
  // Background traffic between two nodes (by PhysicalTopology node name): `flows` parallel flows,
  // each paced to `rate_bps` if given, else as fast as the network lets it. Returns an id for
  // stop_background. Throws std::invalid_argument for an unknown node.
  virtual int start_background(const std::string& from, const std::string& to,
                               std::optional<double> rate_bps, int flows) = 0;
  virtual void stop_background(int id) = 0;
  // Changes a link's bandwidth and/or latency from now on (link named as in PhysicalTopology).
  virtual void set_link(const std::string& link, std::optional<double> bandwidth_bps,
                        std::optional<std::chrono::nanoseconds> latency) = 0;
  // The worker's process dies: its connections close, its peers are told as TCP would tell them.
  virtual void fail(int rank) = 0;
};

}  // namespace kf
