// ns-3 TCP with Linux's loss detection: RACK and the tail loss probe (C++17: ns-3 glue only).
//
// ns-3 3.37 recovers by RFC 6675 alone: a segment is retransmitted once per recovery, so when
// that retransmission is lost too, the sender waits for the retransmission timer (>= 200 ms)
// while the receiver keeps acknowledging the data sent after it. Linux (net.ipv4.tcp_recovery=1,
// the default since 4.18) marks such a retransmission lost by RACK (RFC 8985): once a segment
// sent after it has been delivered, it was lost, and it is sent again at once. On the real
// namespace cluster behind a 512 KiB switch port the gathers lost up to 150 retransmissions per
// run and took no timeout (artifact/fidelity.sh --switch-queue, losses table).
//
// This socket adds RACK's rule for the oldest unacknowledged segment, the one that holds back
// the cumulative ACK, once a segment sent after it (later, or in the same instant with a higher
// sequence number) has been delivered:
//   - in recovery, if the oldest was retransmitted, the retransmission was lost: send it again
//     (stock ns-3 would wait for the timer);
//   - out of recovery, the oldest was lost once the reordering window (a quarter of the minimum
//     RTT) has passed: enter recovery and retransmit it, as Linux does even when fewer than
//     three later segments were delivered (stock ns-3 waits for three duplicate ACKs).
// A lost retransmission further on becomes the oldest once the holes before it are filled.
// And Linux's tail loss probe (RFC 8985): when nothing is acknowledged for two
// smoothed RTTs out of recovery, the last segment is sent again, so that its ACK shows what was
// lost before it (the tail of a message, which no later segment would reveal).
//
// A segment sent twice is dated by its first copy when it counts as delivered (the ACK may be
// for either copy, and the first is the earliest it can say was sent), unless the scoreboard had
// marked that copy lost before the next was sent.
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include "ns3/node.h"
#include "ns3/socket.h"
#include "ns3/tcp-socket-base.h"

namespace kf {

class RackTcpSocket : public ns3::TcpSocketBase {
 public:
  static ns3::TypeId GetTypeId();
  RackTcpSocket() = default;
  RackTcpSocket(const RackTcpSocket& other);  // what Fork copies: the settings, not the state
  ~RackTcpSocket() override;

  // Called each time the oldest segment is found lost and sent again: `retransmission` when it
  // was a retransmission (a timeout avoided), else an original found lost with fewer than three
  // duplicate ACKs.
  std::function<void(bool retransmission)> on_lost;

 protected:
  ns3::Ptr<ns3::TcpSocketBase> Fork() override;
  uint32_t SendDataPacket(ns3::SequenceNumber32 seq, uint32_t max_size, bool with_ack) override;
  void ReceivedAck(ns3::Ptr<ns3::Packet> packet, const ns3::TcpHeader& header) override;

 private:
  struct Sent {
    ns3::Time first;  // its first transmission
    ns3::Time last;   // its latest
  };
  // Segments in transmission order: by time, then sequence (a burst leaves in one instant).
  static bool sent_before(ns3::Time t1, ns3::SequenceNumber32 s1, ns3::Time t2,
                          ns3::SequenceNumber32 s2) {
    return t1 < t2 || (t1 == t2 && s1 < s2);
  }
  void note_delivered(ns3::SequenceNumber32 from, ns3::SequenceNumber32 to);
  void detect_head_loss();
  void arm_probe();
  void send_probe();

  // Each segment in flight by its first sequence number; a segment leaves once delivered
  // (acknowledged or SACKed), and comes back if it is sent again.
  std::map<ns3::SequenceNumber32, Sent> sent_at_;
  // RACK.xmit_ts and its sequence: the last-sent segment known delivered; and RACK.rtt, the
  // round trip its delivery took.
  ns3::Time newest_time_{0};
  ns3::SequenceNumber32 newest_seq_{0};
  ns3::Time newest_rtt_{0};
  ns3::EventId reorder_timer_;
  ns3::EventId probe_timer_;
};

// A TCP socket on `node` as TcpSocketFactory makes one (the node's TcpL4Protocol congestion
// control, recovery and RTT estimator), a RackTcpSocket when `rack`.
ns3::Ptr<ns3::Socket> create_tcp_socket(ns3::Ptr<ns3::Node> node, bool rack);

}  // namespace kf
