// The ns-3 glue (C++17: Debian's ns-3 3.37 headers do not compile as C++20).
#include "sim/ns3/ns3_rack_socket.h"

#include <algorithm>

#include "ns3/object-factory.h"
#include "ns3/rtt-estimator.h"
#include "ns3/tcp-congestion-ops.h"
#include "ns3/tcp-l4-protocol.h"
#include "ns3/tcp-option-sack.h"
#include "ns3/tcp-recovery-ops.h"
#include "ns3/tcp-socket-factory.h"
#include "ns3/tcp-tx-buffer.h"

namespace kf {

NS_OBJECT_ENSURE_REGISTERED(RackTcpSocket);

ns3::TypeId RackTcpSocket::GetTypeId() {
  static ns3::TypeId tid = ns3::TypeId("kf::RackTcpSocket")
                               .SetParent<ns3::TcpSocketBase>()
                               .SetGroupName("Internet")
                               .AddConstructor<RackTcpSocket>();
  return tid;
}

RackTcpSocket::RackTcpSocket(const RackTcpSocket& other)
    : ns3::TcpSocketBase(other), on_lost(other.on_lost) {}

// The timers hold a plain pointer, as TcpSocketBase's own do (an event holding a Ptr would keep
// the socket alive through its EventId: a cycle), and are cancelled with the socket.
RackTcpSocket::~RackTcpSocket() {
  reorder_timer_.Cancel();
  probe_timer_.Cancel();
}

ns3::Ptr<ns3::TcpSocketBase> RackTcpSocket::Fork() {
  return ns3::CopyObject<RackTcpSocket>(this);
}

uint32_t RackTcpSocket::SendDataPacket(ns3::SequenceNumber32 seq, uint32_t max_size,
                                       bool with_ack) {
  // A copy sent after the scoreboard marked the segment lost (three segments SACKed above it, or
  // marked by the timer or by us) is the only one that can arrive: it dates the segment anew.
  const bool earlier_copy_lost = sent_at_.count(seq) > 0 && m_txBuffer->IsLost(seq);
  const uint32_t sent = ns3::TcpSocketBase::SendDataPacket(seq, max_size, with_ack);
  if (sent > 0) {
    const ns3::Time now = ns3::Simulator::Now();
    const auto [it, first] = sent_at_.try_emplace(seq, Sent{now, now});
    it->second.last = now;
    if (earlier_copy_lost) it->second.first = now;
    arm_probe();
  }
  return sent;
}

void RackTcpSocket::note_delivered(ns3::SequenceNumber32 from, ns3::SequenceNumber32 to) {
  // The first live copy's time: a segment sent twice before either was known lost may be
  // acknowledged for either copy. (Linux takes the latest copy when the ACK came at least a
  // minimum RTT after it; here a host's lossless fair queue, host_qdisc: tsq, can hold a first
  // copy for longer than that, where Linux's TCP small queues would not have sent it yet.
  // Measured: ns-3 resent segments still queued at the sender's host, and their late first
  // copies then looked like proof that the oldest segment was lost.)
  auto it = sent_at_.lower_bound(from);
  while (it != sent_at_.end() && it->first < to) {
    if (sent_before(newest_time_, newest_seq_, it->second.first, it->first)) {
      newest_time_ = it->second.first;
      newest_seq_ = it->first;
      newest_rtt_ = ns3::Simulator::Now() - newest_time_;
    }
    it = sent_at_.erase(it);
  }
}

void RackTcpSocket::ReceivedAck(ns3::Ptr<ns3::Packet> packet, const ns3::TcpHeader& header) {
  // What this ACK says arrived: everything below its number, and its SACK blocks.
  if (!sent_at_.empty()) note_delivered(sent_at_.begin()->first, header.GetAckNumber());
  if (const auto option = header.GetOption(ns3::TcpOption::SACK)) {
    const auto sack = ns3::DynamicCast<const ns3::TcpOptionSack>(option);
    for (const auto& [begin, end] : sack->GetSackList())
      note_delivered(begin, end);
  }
  ns3::TcpSocketBase::ReceivedAck(packet, header);
  detect_head_loss();
  arm_probe();
}

void RackTcpSocket::detect_head_loss() {
  using State = ns3::TcpSocketState;
  reorder_timer_.Cancel();
  const auto head = sent_at_.find(m_txBuffer->HeadSequence());
  if (head == sent_at_.end()) return;
  if (!sent_before(head->second.last, head->first, newest_time_, newest_seq_)) return;
  const State::TcpCongState_t state = m_tcb->m_congState;
  if (state == State::CA_RECOVERY || state == State::CA_LOSS) {
    // The head's retransmission was lost (an original in recovery is ns-3's to resend).
    if (!m_txBuffer->IsHeadRetransmitted()) return;
    m_txBuffer->MarkHeadAsLost();
    DoRetransmit();
    if (on_lost) on_lost(true);
    return;
  }
  if (state != State::CA_OPEN && state != State::CA_DISORDER) return;
  // Lost once overdue: the newest delivered segment's round trip plus the reordering window
  // after it was sent.
  const ns3::Time window = m_tcb->m_minRtt == ns3::Time::Max() ? ns3::Time(0) : m_tcb->m_minRtt / 4;
  const ns3::Time wait = head->second.last + newest_rtt_ + window - ns3::Simulator::Now();
  if (wait.IsStrictlyPositive()) {
    reorder_timer_ = ns3::Simulator::Schedule(wait, &RackTcpSocket::detect_head_loss, this);
    return;
  }
  m_txBuffer->MarkHeadAsLost();
  EnterRecovery(0);  // halves the window and retransmits the head, as three duplicate ACKs would
  if (on_lost) on_lost(false);
}

void RackTcpSocket::arm_probe() {
  probe_timer_.Cancel();
  if (m_tcb->m_congState != ns3::TcpSocketState::CA_OPEN || sent_at_.empty()) return;
  const ns3::Time srtt = m_rtt->GetEstimate();
  if (!srtt.IsStrictlyPositive()) return;
  // Two smoothed RTTs; with one segment out, also the receiver's delayed-ACK timeout, since its
  // ACK may wait that long. Linux adds 2 ms (two jiffies) otherwise.
  const ns3::Time slack = sent_at_.size() == 1 ? m_delAckTimeout : ns3::MilliSeconds(2);
  const ns3::Time pto = srtt * 2 + slack;
  // The retransmission timer, if sooner, acts instead.
  if (m_retxEvent.IsRunning() && ns3::TimeStep(m_retxEvent.GetTs()) <= ns3::Simulator::Now() + pto)
    return;
  probe_timer_ = ns3::Simulator::Schedule(pto, &RackTcpSocket::send_probe, this);
}

void RackTcpSocket::send_probe() {
  if (m_tcb->m_congState != ns3::TcpSocketState::CA_OPEN || sent_at_.empty()) return;
  // The last segment sent again: new data would do as well, but a collective's message ends
  // with its last segment, and the next may not be queued yet.
  const auto last = std::prev(sent_at_.end());
  const uint32_t bytes = std::min(static_cast<uint32_t>(m_tcb->m_highTxMark.Get() - last->first),
                                  m_tcb->m_segmentSize);
  if (bytes > 0) SendDataPacket(last->first, bytes, true);
}

ns3::Ptr<ns3::Socket> create_tcp_socket(ns3::Ptr<ns3::Node> node, bool rack) {
  using namespace ns3;
  if (!rack) return Socket::CreateSocket(node, TcpSocketFactory::GetTypeId());
  // What TcpL4Protocol::CreateSocket does, with our socket class.
  const Ptr<TcpL4Protocol> tcp = node->GetObject<TcpL4Protocol>();
  TypeIdValue congestion, recovery, rtt;
  tcp->GetAttribute("SocketType", congestion);
  tcp->GetAttribute("RecoveryType", recovery);
  tcp->GetAttribute("RttEstimatorType", rtt);
  const auto make = [](TypeId type) {
    ObjectFactory factory;
    factory.SetTypeId(type);
    return factory;
  };
  Ptr<RackTcpSocket> socket = CreateObject<RackTcpSocket>();
  socket->SetNode(node);
  socket->SetTcp(tcp);
  socket->SetRtt(make(rtt.Get()).Create<RttEstimator>());
  socket->SetCongestionControlAlgorithm(make(congestion.Get()).Create<TcpCongestionOps>());
  socket->SetRecoveryAlgorithm(make(recovery.Get()).Create<TcpRecoveryOps>());
  tcp->AddSocket(socket);
  return socket;
}

}  // namespace kf
