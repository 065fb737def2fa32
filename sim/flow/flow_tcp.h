// CubicWindow: one connection's congestion window in the flow world, moved as ns-3 3.37's
// TcpCubic moves it, but by fluid quantities (bytes acknowledged over a spell, the round trip
// time with the queues on the way, the rate) instead of per-ACK events:
//   - slow start grows the window by what is acknowledged (ns-3 counts bytes in slow start);
//   - HyStart leaves slow start once the window is at least 16 segments and either an ACK
//     train lasts longer than the smallest RTT seen (window / rate > min RTT) or the RTT exceeds
//     the smallest by clamp(min RTT, 4 ms, 1 s);
//   - congestion avoidance follows the cubic target origin +- C |t - K|^3 (segments, seconds,
//     C = 0.4) with one segment per `cnt` acknowledged, cnt = window / (target - window), at
//     least 2, and at most 20 until the first loss; no TCP-friendly region (ns-3 3.37 has none);
//   - a loss sets ssthresh to beta = 0.7 of the window (fast recovery leaves the window there),
//     with fast convergence for the cubic's origin.
// Plain arithmetic, no simulator: FlowTcp (below) feeds it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "sim/flow/event_queue.h"
#include "sim/flow/flow_network.h"

namespace kf {

class CubicWindow {
 public:
  explicit CubicWindow(double segment_bytes);

  double cwnd() const { return cwnd_; }
  double ssthresh() const { return ssthresh_; }  // infinite until the first loss or HyStart exit
  bool slow_start() const { return cwnd_ < ssthresh_; }
  double min_rtt() const { return min_rtt_; }

  // `bytes` were acknowledged up to `now` (s), the round trip now taking `rtt` (s) at `rate`
  // (bytes/s).
  void acked(double now, double bytes, double rtt, double rate);
  // A packet of the window was dropped (fast retransmit and recovery).
  void lost();
  // A drop that no duplicate ACKs reported: the retransmission timer fired. Slow start again
  // from one segment, the cubic and HyStart's minimum forgotten (ns-3's CA_LOSS).
  void timed_out();

 private:
  double segment_;
  double cwnd_;
  double ssthresh_ = std::numeric_limits<double>::infinity();
  double min_rtt_ = std::numeric_limits<double>::infinity();
  double last_max_ = 0;  // segments
  double origin_ = 0;    // segments
  double k_ = 0;         // s
  double epoch_start_ = -1;
};

// FlowTcp: the TCP senders of a flow world, each with a CubicWindow, over its FlowNetwork.
//
// A sender's flow weighs what it has in flight (its window, or less when it has less to send),
// so flows meeting at a switch port share it in proportion to that: what a FIFO port gives
// flows of one round trip. A host's queue is lossless and serves its flows in turn (the ns-3
// world's host_qdisc: tsq), so the flows that fill a host's link take equal weights (their
// mean). While a sender's flow shares a channel with another its window is brought up to date
// every round trip (the path's propagation both ways plus what the windows on each full channel
// queue beyond its bandwidth-delay product); a flow alone changes nothing by its weight, so what
// it sends alone is fed to its window in one spell when it next meets another flow. Where the
// windows on a channel hold more than its bandwidth-delay product and drop-tail queue (a queue
// of packets: the ACKs of what crosses the link the other way, one per two segments, hold their
// share of its slots), the
// excess, and what the windows grow in the round trip before their senders hear of it, is
// dropped, spread over the flows by their rates (a seeded draw: the same seed, the same losses),
// and a flow that loses backs off; a flow alone backs off until its window fits. A loss with
// fewer than three segments behind it (a window that small, or the tail of what the sender had
// to send) brings no duplicate ACKs: the sender waits out its retransmission timeout (`pause`)
// and starts over from one segment.
//
// A sender keeps its window between flows (a connection's flow ends whenever its queue of
// messages empties): ns-3's TCP keeps cwnd over idle spells too.
class FlowTcp {
 public:
  struct Stats {
    std::uint64_t rounds = 0;    // window updates
    std::uint64_t losses = 0;    // backoffs
    std::uint64_t timeouts = 0;  // of them, retransmission timeouts
  };

  struct Hooks {
    // Settles and reschedules the flows whose rates the network last changed
    // (FlowNetwork::changes()).
    std::function<void()> apply;
    // Bytes a flow's sender has to send (unbounded for a bulk flow).
    std::function<double(FlowNetwork::FlowId)> backlog;
    // Stops a flow's sender for this long (its retransmission timeout): the flow ends now
    // (stopping() is called) and starts again afterwards.
    std::function<void(FlowNetwork::FlowId, std::int64_t ns)> pause;
  };
  static constexpr double kMinRto = 0.2;  // s: Linux's floor, as the ns-3 world sets it

  FlowTcp(FlowNetwork& network, EventQueue& clock, std::vector<double> queue_bytes_by_channel,
          double segment_bytes, std::uint64_t seed, Hooks hooks);

  int add_sender();
  // The weight of a sender's flow with `backlog` bytes to send: what it has in flight.
  double weight(int sender, double backlog) const;
  // After network.add_flow(.., weight(sender)) and settling the changes it made.
  void started(int sender, FlowNetwork::FlowId flow, std::int64_t one_way_latency_ns);
  // After network.reserve_alone(route) gave the sender's lone flow `rate` (`route` must stay
  // valid until stopping()); `in_flight` is weight(sender, backlog). A lone flow changes nothing by
  // its window: what it sends is fed to the window when it next meets another flow, as for a flow
  // alone.
  void started_alone(int sender, std::span<const int> route, double rate, double in_flight,
                     std::int64_t one_way_latency_ns);
  // Its lone flow became `flow` (network.add_flow, alone), at the same rate.
  void joined(int sender, FlowNetwork::FlowId flow);
  // Before network.remove_flow(flow) or release_alone(), the flow having ended at `ended_ns`
  // (now, unless it was alone and the world removes it afterwards).
  void stopping(int sender) { stopping(sender, clock_.now_ns()); }
  void stopping(int sender, std::int64_t ended_ns);
  // Before the flows in `changes` are settled at their old rates: what they sent meanwhile.
  void rates_changing(std::span<const FlowNetwork::RateChange> changes);
  Stats stats() const { return stats_; }

  // A sender's state now, as the ns-3 world samples its sockets (tcp_samples).
  struct Sample {
    double cwnd = 0;
    double ssthresh = 0;   // infinite until the first loss or HyStart exit
    double rtt = 0;        // s: now; idle, as of its last round (0 before its first flow)
    double in_flight = 0;  // 0 while its connection is idle or waits out a timeout
    double acked = 0;      // bytes sent since it started (acknowledged at once, in the fluid)
  };
  Sample sample(int sender) const;
  // The same for a sender whose flow ended at `ended_ns` but is not removed yet.
  Sample sample(int sender, std::int64_t ended_ns) const;

 private:
  struct Sender {
    explicit Sender(double segment) : window(segment) {}
    CubicWindow window;
    FlowNetwork::FlowId flow = -1;
    double base_rtt = 0;
    double pending = 0;  // bytes sent (so acknowledged, in the fluid) not yet fed to the window
    double acked = 0;    // bytes sent, as of settled_at
    double rtt = 0;      // s, at its last update (its base RTT before one)
    double growth = 0;   // how much the window grew at its last update: about one round's
    std::int64_t settled_at = 0;
    std::uint64_t generation = 0;  // of the pending round
    bool ticking = false;
    // A lone flow (started_alone): not in the network, so its rate, route and what it has in
    // flight are kept here.
    bool lone = false;
    double lone_rate = 0;
    double lone_in_flight = 0;
    std::span<const int> lone_route;
  };

  Sender* sender_of(FlowNetwork::FlowId flow) const;
  bool shared(const Sender& s) const;
  void start_rounds(Sender& s);
  void round(int sender, std::uint64_t generation);
  // Counts what a sender's flow sent at `rate` since it was last settled.
  void settle(Sender& s, double rate) { settle(s, rate, clock_.now_ns()); }
  void settle(Sender& s, double rate, std::int64_t until_ns);
  // Feeds a sender's window what it sent since it was last settled.
  void update(Sender& s);
  // What a flow has in flight: its window, or less if it has less to send.
  double in_flight(const Sender& s) const;
  double in_flight_on(int channel) const;
  double queued(int channel, double base_rtt) const;
  double round_trip(const Sender& s) const;
  double lone_round_trip(const Sender& s) const;
  // The bytes of data a channel's queue holds (all of it at a host's lossless queue).
  double data_room(int channel) const;
  void drop_excess(std::span<const int> route, double base_rtt);
  void back_off(Sender& s);
  void time_out(Sender& s);
  // Sets a sender's flow's weight: what it has in flight, or where it shares a full lossless
  // host queue (which serves flows in turn), the mean of what that queue's flows have in
  // flight, for each of them.
  void reweigh(Sender& s);
  int shared_fair_channel(const Sender& s) const;  // -1: none

  FlowNetwork& network_;
  EventQueue& clock_;
  std::vector<double> queue_bytes_;
  double segment_;
  std::mt19937_64 draws_;
  Hooks hooks_;
  std::vector<int> route_scratch_;
  std::vector<Sender> senders_;
  std::vector<int> sender_by_flow_;  // -1: none
  Stats stats_;
};

}  // namespace kf
