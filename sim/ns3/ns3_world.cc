// The ns-3 glue (C++17: Debian's ns-3 3.37 headers do not compile as C++20).
#include "sim/ns3/ns3_world.h"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include "runtime/wire_size.h"
#include "sim/ns3/ns3_rack_socket.h"
#include "sim/sim_compute.h"
#include "sim/sim_port.h"

namespace kf {

namespace {

// Bytes handed to an ns-3 socket per Send. Measured: 64 KiB writes and reading all that is
// available run 35% faster than segment-sized writes and reads (ns-3's per-item bookkeeping
// costs more than its merging copies).
constexpr std::uint64_t kWritePiece = 64 << 10;

// host_qdisc: tsq (see Ns3Options::host_qdisc): a device ring of two packets (one on the wire, one
// ready) under a per-flow fair queue that never drops. What all of a host's sockets may have
// unacknowledged (socket buffer / segment, summed over its connections) stays far below
// kTsqQueuePackets, and no sojourn time reaches kNeverDrop, so CoDel never acts.
constexpr std::uint32_t kTsqRingPackets = 2;
constexpr std::uint32_t kTsqQueuePackets = 1u << 30;
constexpr const char* kNeverDrop = "1000000s";  // FqCoDel takes its times as strings

// What queues a link end's packets before its wire.
enum class EndQueue : std::uint8_t {
  drop_tail,  // the device's own drop-tail queue of the link's size: a switch port, a bare host
  fq_codel,   // host_qdisc: fq_codel
  tsq,        // host_qdisc: tsq (the lossless fair queue over a two-packet ring above)
};

ns3::Time to_ns3(std::chrono::nanoseconds d) {
  return ns3::NanoSeconds(d.count());
}

// ---- Executor: the simulator's clock and event queue ----

class SimExecutor final : public Executor {
 public:
  TimePoint now() const override {
    return TimePoint(Duration(ns3::Simulator::Now().GetNanoSeconds()));
  }
  void post(Task task) override { ns3::Simulator::ScheduleNow(std::move(task)); }
  TimerId post_after(Duration delay, Task task) override {
    const TimerId id = ++next_;
    events_[id] = ns3::Simulator::Schedule(to_ns3(delay), [this, id, task = std::move(task)] {
      events_.erase(id);
      task();
    });
    return id;
  }
  void cancel(TimerId id) override {
    const auto it = events_.find(id);
    if (it == events_.end()) return;
    ns3::Simulator::Cancel(it->second);
    events_.erase(it);
  }

 private:
  TimerId next_ = 0;
  std::unordered_map<TimerId, ns3::EventId> events_;
};

}  // namespace

// ---- the world ----

class Ns3World::Impl {
 public:
  Impl(const PhysicalTopology& topology, Ns3Options options);
  ~Impl();

  // One ordered worker pair: bytes written at src, counted at dst, messages handed over in order.
  struct Connection {
    int src = 0;
    int dst = 0;
    ns3::Ptr<ns3::Socket> tx;  // at src
    ns3::Ptr<ns3::Socket> rx;  // at dst (accepted)
    bool connected = false;
    std::deque<std::uint64_t> unwritten;  // bytes left to write, per queued message
    std::deque<std::pair<Message, std::uint64_t>> in_flight;  // what dst will read, in order
    std::uint64_t received = 0;   // bytes read at dst toward the front message
    std::uint64_t delivered = 0;  // wire bytes of messages handed to dst
  };

  // A TCP sender under Ns3Options::tcp_sample_every: its latest traced state (time_s is filled
  // when sampled).
  struct TcpWatch {
    TcpSample now;
  };

  struct Background {
    std::vector<ns3::Ptr<ns3::Socket>> senders;
    std::optional<double> rate_bps;
    ns3::EventId pacer;
    bool active = true;
  };

  void send(int src, int dst, Message message);
  Connection& connection(int src, int dst);
  void open(Connection& c);
  void pump(Connection& c);
  void on_readable(Connection& c);
  void lost(int observer, int peer, const std::string& why);
  void pace(int id);
  void watch_tcp(ns3::Ptr<ns3::Socket> socket, const std::string& kind, int src_node, int dst_node,
                 int flow);
  void sample_tcp();
  void spread_over_spines();
  void install_link_end(ns3::Ptr<ns3::NetDevice> device, const LinkSpec& spec, EndQueue queue);
  template <typename Callback>
  static void connect_drops(ns3::ObjectBase& source, Callback count, const char* trace = "Drop") {
    if (!source.TraceConnectWithoutContext(trace, count)) {
      std::string names;
      for (ns3::TypeId t = source.GetInstanceTypeId();; t = t.GetParent()) {
        for (std::size_t i = 0; i < t.GetTraceSourceN(); ++i)
          names += " " + t.GetTraceSource(i).name;
        if (t == t.GetParent()) break;
      }
      throw std::logic_error("ns-3: " + source.GetInstanceTypeId().GetName() + " has no " + trace +
                             " trace source (it has:" + names + ")");
    }
  }
  // Every TCP socket of the world (listeners, runtime senders, background flows): with RACK
  // with LossRecovery::rack, counting what it resends.
  ns3::Ptr<ns3::Socket> tcp_socket(std::uint32_t node) {
    ns3::Ptr<ns3::Socket> socket = create_tcp_socket(nodes.Get(node), options.loss_recovery == LossRecovery::rack);
    if (const auto rack = ns3::DynamicCast<RackTcpSocket>(socket))
      rack->on_lost = [this](bool retransmission) {
        ++(retransmission ? stats.lost_retransmissions : stats.early_losses);
      };
    return socket;
  }
  void count_queue_drop(ns3::Ptr<const ns3::Packet>) { ++stats.dropped_packets; }
  void count_qdisc_drop(ns3::Ptr<const ns3::QueueDiscItem>) { ++stats.dropped_packets; }
  // ns-3 enters CA_LOSS exactly when the retransmission timer fires (a traced value reports
  // changes only, so a backed-off timer firing again in CA_LOSS is not counted twice).
  void count_timeout(ns3::TcpSocketState::TcpCongState_t, ns3::TcpSocketState::TcpCongState_t to) {
    if (to == ns3::TcpSocketState::CA_LOSS) ++stats.retransmission_timeouts;
  }

  SimExecutor executor;
  std::vector<std::unique_ptr<SimPort>> links;  // per worker slot
  std::vector<std::unique_ptr<SimCompute>> computes;
  Ns3Options options;
  PhysicalTopology topo;
  ns3::NodeContainer nodes;
  std::vector<ns3::NetDeviceContainer> link_devices;
  std::vector<ns3::Ipv4Address> node_address;  // first interface of each node
  std::map<std::uint32_t, int> rank_of_address;
  std::map<std::pair<int, int>, std::unique_ptr<Connection>> connections;
  std::vector<ns3::Ptr<ns3::Socket>> listeners;
  std::vector<bool> failed;
  std::vector<std::set<int>> reported_lost;
  std::map<int, Background> backgrounds;
  std::vector<ns3::Ptr<ns3::Socket>> sinks;
  int next_background = 0;
  std::vector<std::unique_ptr<TcpWatch>> tcp_watches;
  std::vector<TcpSample> tcp_samples;
  Ns3Stats stats;
};

Ns3World::Impl::Impl(const PhysicalTopology& topology, Ns3Options opts)
    : options(opts), topo(topology) {
  using namespace ns3;
  RngSeedManager::SetSeed(static_cast<std::uint32_t>(options.seed % 0xFFFFFFFFu) + 1);
  RngSeedManager::SetRun(1);

  std::uint32_t min_mtu = 65535;
  for (const auto& l : topo.links)
    min_mtu = std::min(min_mtu, l.spec.mtu);
  // A full segment fills the smallest MTU.
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(tcp_segment_bytes(min_mtu)));
  Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(options.socket_buffer_bytes));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(options.socket_buffer_bytes));
  Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(to_ns3(options.min_rto)));
  // ns-3 delays ACKs up to 200 ms, as long as the 200 ms minimum RTO: a lone segment's ACK then
  // loses the race to the retransmission timer every time and the window collapses to one
  // segment per RTO. Linux acknowledges within 40 ms at most; so do we.
  Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(to_ns3(options.delayed_ack)));
  // A lost SYN is sent again after 1 s in Linux (TCP_TIMEOUT_INIT), after 3 s in ns-3. The
  // runtime connects on first use, often into a port that a collective is overflowing.
  Config::SetDefault("ns3::TcpSocket::ConnTimeout", TimeValue(Seconds(1)));
  // The rest is what Linux does, and what ns-3 3.37 does by default; pinned here so that another
  // ns-3 release (3.36 and older default to NewReno) cannot change the world under us: CUBIC
  // with HyStart, SACK, timestamps, window scaling, an initial window of 10 segments, Nagle off
  // (our real transport sets TCP_NODELAY), an ACK every 2 segments, proportional rate reduction.
  // Known gaps to Linux: ns-3 has no RACK / tail loss probe, so a lost retransmission or a lost
  // tail waits for the retransmission timer (>= min_rto); LossRecovery::rack adds both
  // (ns3_rack_socket.h). No TCP small queues, so a host's own drop-tail queue
  // can drop its segments (Linux keeps them in the socket buffer) and ACKs wait behind bulk data
  // (host_qdisc: tsq stands in for TSQ, see Ns3Options::host_qdisc). Note: a
  // RcvBufSize below SndBufSize makes ns-3 3.37 crash in TcpRateLinux::SkbSent once the receive
  // window limits the sender.
  Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpCubic::GetTypeId()));
  Config::SetDefault("ns3::TcpL4Protocol::RecoveryType", TypeIdValue(TcpPrrRecovery::GetTypeId()));
  Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(true));
  Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(true));
  Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));
  Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(10));
  Config::SetDefault("ns3::TcpSocket::TcpNoDelay", BooleanValue(true));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(2));

  nodes.Create(static_cast<std::uint32_t>(topo.nodes.size()));
  InternetStackHelper internet;
  internet.Install(nodes);
  Ipv4AddressHelper addresses;
  addresses.SetBase("10.0.0.0", "255.255.255.252");
  node_address.assign(topo.nodes.size(), Ipv4Address());
  std::vector<bool> has_address(topo.nodes.size(), false);
  // A switch port keeps the drop-tail queue in every case.
  const EndQueue host_queue = options.host_qdisc == HostQdisc::tsq        ? EndQueue::tsq
                              : options.host_qdisc == HostQdisc::fq_codel ? EndQueue::fq_codel
                                                                          : EndQueue::drop_tail;
  for (const auto& l : topo.links) {
    PointToPointHelper p2p;
    // A shaped link's wire runs at its line rate; the token bucket in front of it holds it to
    // its bandwidth (install_link_end).
    const double wire_bps = l.spec.shaped() ? l.spec.line_rate_bps : l.spec.bandwidth_bps;
    p2p.SetDeviceAttribute("DataRate",
                           DataRateValue(DataRate(static_cast<std::uint64_t>(wire_bps))));
    p2p.SetDeviceAttribute("Mtu", UintegerValue(l.spec.mtu));
    p2p.SetChannelAttribute("Delay", TimeValue(to_ns3(l.spec.latency)));
    p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize",
                 QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, l.spec.queue_packets)));
    NetDeviceContainer devices = p2p.Install(nodes.Get(static_cast<std::uint32_t>(l.a)),
                                             nodes.Get(static_cast<std::uint32_t>(l.b)));
    Ipv4InterfaceContainer ifs = addresses.Assign(devices);
    addresses.NewNetwork();
    // Assign() adds a default FqCoDel queue disc; a link's queue is the drop-tail queue the
    // scenario sizes, as on a switch port, so take the queue disc away.
    TrafficControlHelper().Uninstall(devices);
    for (std::uint32_t end = 0; end < 2; ++end) {
      const auto node = static_cast<std::size_t>(end == 0 ? l.a : l.b);
      const bool host = topo.nodes[node].kind != NodeKind::switch_;
      install_link_end(devices.Get(end), l.spec, host ? host_queue : EndQueue::drop_tail);
    }
    for (int end = 0; end < 2; ++end) {
      const auto node = static_cast<std::size_t>(end == 0 ? l.a : l.b);
      if (!has_address[node]) {
        node_address[node] = ifs.GetAddress(static_cast<std::uint32_t>(end));
        has_address[node] = true;
      }
    }
    link_devices.push_back(devices);
  }
  // A port whose device queue is full stops it, and traffic control then drops the packet
  // itself (the queue never sees it): that is where a switch port's drops are counted.
  for (std::uint32_t i = 0; i < nodes.GetN(); ++i) {
    connect_drops(*nodes.Get(i)->GetObject<TrafficControlLayer>(),
                  MakeCallback(&Impl::count_queue_drop, this), "TcDrop");
  }
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();
  spread_over_spines();

  const int n = static_cast<int>(topo.worker_node.size());
  failed.assign(static_cast<std::size_t>(n), false);
  reported_lost.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    links.push_back(std::make_unique<SimPort>(
        r, [this](int src, int dst, Message&& m) { send(src, dst, std::move(m)); },
        [](std::function<void()> fn) { ns3::Simulator::ScheduleNow(std::move(fn)); }));
    computes.push_back(std::make_unique<SimCompute>(
        [](std::chrono::nanoseconds delay, std::function<void()> done) {
          ns3::Simulator::Schedule(to_ns3(delay), std::move(done));
        },
        options.seed, r, options.compute_jitter));
    const auto node = static_cast<std::size_t>(topo.worker_node[static_cast<std::size_t>(r)]);
    rank_of_address[node_address[node].Get()] = r;

    Ptr<Socket> listener = tcp_socket(static_cast<std::uint32_t>(node));
    listener->Bind(InetSocketAddress(Ipv4Address::GetAny(), options.port));
    listener->Listen();
    listener->SetAcceptCallback(
        MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
        Callback<void, Ptr<Socket>, const Address&>(
            [this, r](Ptr<Socket> socket, const Address& from) {
              const auto it =
                  rank_of_address.find(InetSocketAddress::ConvertFrom(from).GetIpv4().Get());
              if (it == rank_of_address.end() || failed[static_cast<std::size_t>(r)]) {
                socket->Close();
                return;
              }
              Connection& c = connection(it->second, r);
              c.rx = socket;
              socket->SetRecvCallback(
                  Callback<void, Ptr<Socket>>([this, &c](Ptr<Socket>) { on_readable(c); }));
              socket->SetCloseCallbacks(Callback<void, Ptr<Socket>>([this, &c](Ptr<Socket>) {
                                          lost(c.dst, c.src, "connection closed by the peer");
                                        }),
                                        Callback<void, Ptr<Socket>>([this, &c](Ptr<Socket>) {
                                          lost(c.dst, c.src, "connection reset");
                                        }));
            }));
    listeners.push_back(listener);
  }
  if (options.tcp_sample_every.count() > 0) {
    Simulator::Schedule(to_ns3(options.tcp_sample_every), [this] { sample_tcp(); });
  }
}

void Ns3World::Impl::watch_tcp(ns3::Ptr<ns3::Socket> socket, const std::string& kind, int src_node,
                               int dst_node, int flow) {
  using namespace ns3;
  if (options.tcp_sample_every.count() == 0) return;
  auto w = std::make_unique<TcpWatch>();
  w->now.kind = kind;
  w->now.src = topo.nodes[static_cast<std::size_t>(src_node)].name;
  w->now.dst = topo.nodes[static_cast<std::size_t>(dst_node)].name;
  w->now.flow = flow;
  TcpWatch* t = w.get();
  const auto connect = [&](const char* trace, const CallbackBase& callback) {
    if (!socket->TraceConnectWithoutContext(trace, callback)) {
      throw std::logic_error(std::string("ns-3: TcpSocketBase has no ") + trace + " trace source");
    }
  };
  connect("CongestionWindow",
          Callback<void, uint32_t, uint32_t>([t](uint32_t, uint32_t v) { t->now.cwnd_bytes = v; }));
  // Until the first loss or slow-start exit ssthresh is "infinite" (0 in a sample).
  connect("SlowStartThreshold", Callback<void, uint32_t, uint32_t>([t](uint32_t, uint32_t v) {
            t->now.ssthresh_bytes = v >= 0x7fffffffu ? 0 : v;
          }));
  connect("RTT", Callback<void, Time, Time>([t](Time, Time v) { t->now.srtt_s = v.GetSeconds(); }));
  connect("BytesInFlight", Callback<void, uint32_t, uint32_t>(
                               [t](uint32_t, uint32_t v) { t->now.in_flight_bytes = v; }));
  connect("HighestRxAck", Callback<void, SequenceNumber32, SequenceNumber32>(
                              [t](SequenceNumber32 old, SequenceNumber32 v) {
                                if (v > old)
                                  t->now.acked_bytes += static_cast<std::uint32_t>(v - old);
                              }));
  tcp_watches.push_back(std::move(w));
}

void Ns3World::Impl::sample_tcp() {
  const double now = ns3::Simulator::Now().GetSeconds();
  for (const auto& w : tcp_watches) {
    TcpSample s = w->now;
    s.time_s = now;
    tcp_samples.push_back(std::move(s));
  }
  // Sampling alone must not keep the simulation going.
  if (!ns3::Simulator::IsFinished()) {
    ns3::Simulator::Schedule(to_ns3(options.tcp_sample_every), [this] { sample_tcp(); });
  }
}

void Ns3World::Impl::install_link_end(ns3::Ptr<ns3::NetDevice> device, const LinkSpec& spec,
                                      EndQueue queue) {
  using namespace ns3;
  const auto packets = [](std::uint32_t n) {
    return QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, n));
  };
  Ptr<Queue<Packet>> device_queue = DynamicCast<PointToPointNetDevice>(device)->GetQueue();
  connect_drops(*device_queue, MakeCallback(&Impl::count_queue_drop, this));
  if (queue == EndQueue::drop_tail && !spec.shaped()) return;  // the device queue is the queue
  // Under a shaper or TSQ's fair queue the device keeps the packet on the wire and one ready;
  // the queue disc holds the backlog. (fq_codel alone keeps the link's device queue under it.)
  if (spec.shaped() || queue == EndQueue::tsq) {
    device_queue->SetMaxSize(QueueSize(QueueSizeUnit::PACKETS, kTsqRingPackets));
  }
  TrafficControlHelper helper;
  std::optional<std::uint16_t> shaper;
  if (spec.shaped()) {
    // tc's tbf; its own queue is the link's (a FIFO of `queue` packets, or TSQ's lossless one).
    shaper = helper.SetRootQueueDisc(
        "ns3::TbfQueueDisc", "Rate",
        DataRateValue(DataRate(static_cast<std::uint64_t>(spec.bandwidth_bps))), "Burst",
        UintegerValue(static_cast<std::uint32_t>(spec.burst_bytes)), "Mtu", UintegerValue(spec.mtu),
        "MaxSize", packets(queue == EndQueue::tsq ? kTsqQueuePackets : spec.queue_packets));
  }
  // A fair queue at the root, or under the shaper.
  const auto add_fair_queue = [&](auto&&... attributes) {
    if (!shaper) {
      helper.SetRootQueueDisc("ns3::FqCoDelQueueDisc", attributes...);
      return;
    }
    const auto classes = helper.AddQueueDiscClasses(*shaper, 1, "ns3::QueueDiscClass");
    helper.AddChildQueueDisc(*shaper, classes[0], "ns3::FqCoDelQueueDisc", attributes...);
  };
  switch (queue) {
    case EndQueue::tsq:
      add_fair_queue("MaxSize", packets(kTsqQueuePackets), "Target", StringValue(kNeverDrop),
                     "Interval", StringValue(kNeverDrop));
      break;
    case EndQueue::fq_codel:
      add_fair_queue();
      break;
    case EndQueue::drop_tail:
      break;  // tbf gives itself a FIFO child of its own size
  }
  Ptr<QueueDisc> root = helper.Install(device).Get(0);
  if (shaper && queue != EndQueue::drop_tail) {
    // FqCoDel takes its quantum from its device's MTU, which a child queue disc cannot see (it
    // would loop forever with none).
    DynamicCast<FqCoDelQueueDisc>(root->GetQueueDiscClass(0)->GetQueueDisc())->SetQuantum(spec.mtu);
  }
  connect_drops(*root, MakeCallback(&Impl::count_qdisc_drop, this));
}

// Global routing sends everything between two leaves over one spine, which would make every
// other spine idle. Per-packet ECMP would reorder TCP; instead each leaf gets a host route per
// remote destination, spread over the spines by destination (deterministic, flow-consistent).
void Ns3World::Impl::spread_over_spines() {
  using namespace ns3;
  std::vector<int> spines;
  for (std::size_t i = 0; i < topo.nodes.size(); ++i) {
    if (topo.nodes[i].kind == NodeKind::switch_ && topo.nodes[i].name.rfind("spine", 0) == 0) {
      spines.push_back(static_cast<int>(i));
    }
  }
  if (spines.size() < 2) return;
  // leaf -> (spine -> the leaf's interface toward it and the spine's address on that link)
  struct Uplink {
    std::uint32_t interface;
    Ipv4Address next_hop;
  };
  std::map<int, std::map<int, Uplink>> uplinks;
  for (std::size_t li = 0; li < topo.links.size(); ++li) {
    const auto& l = topo.links[li];
    for (int end = 0; end < 2; ++end) {
      const int leaf = end == 0 ? l.a : l.b;
      const int spine = end == 0 ? l.b : l.a;
      if (topo.nodes[static_cast<std::size_t>(leaf)].name.rfind("leaf", 0) != 0) continue;
      if (std::find(spines.begin(), spines.end(), spine) == spines.end()) continue;
      Ptr<Ipv4> leaf_ip = nodes.Get(static_cast<std::uint32_t>(leaf))->GetObject<Ipv4>();
      Ptr<Ipv4> spine_ip = nodes.Get(static_cast<std::uint32_t>(spine))->GetObject<Ipv4>();
      const auto leaf_if = static_cast<std::uint32_t>(
          leaf_ip->GetInterfaceForDevice(link_devices[li].Get(static_cast<std::uint32_t>(end))));
      const auto spine_if = static_cast<std::uint32_t>(spine_ip->GetInterfaceForDevice(
          link_devices[li].Get(static_cast<std::uint32_t>(1 - end))));
      uplinks[leaf][spine] = {leaf_if, spine_ip->GetAddress(spine_if, 0).GetLocal()};
    }
  }
  // Which leaf each worker hangs under: walk up from the worker (through its host node).
  const auto leaf_of = [this](int node) {
    for (int hops = 0; hops < 3; ++hops) {
      if (topo.nodes[static_cast<std::size_t>(node)].name.rfind("leaf", 0) == 0) return node;
      for (const auto& l : topo.links) {
        const int other = l.a == node ? l.b : (l.b == node ? l.a : -1);
        if (other < 0) continue;
        const auto& k = topo.nodes[static_cast<std::size_t>(other)];
        if (k.kind != NodeKind::worker && k.name.rfind("spine", 0) != 0) {
          node = other;
          break;
        }
      }
    }
    return topo.nodes[static_cast<std::size_t>(node)].name.rfind("leaf", 0) == 0 ? node : -1;
  };
  Ipv4StaticRoutingHelper helper;
  for (std::size_t r = 0; r < topo.worker_node.size(); ++r) {
    const int node = topo.worker_node[r];
    const int home = leaf_of(node);
    const Ipv4Address dst = node_address[static_cast<std::size_t>(node)];
    for (auto& [leaf, by_spine] : uplinks) {
      if (leaf == home || by_spine.size() != spines.size()) continue;
      const Uplink& up = by_spine.at(spines[r % spines.size()]);
      helper.GetStaticRouting(nodes.Get(static_cast<std::uint32_t>(leaf))->GetObject<Ipv4>())
          ->AddHostRouteTo(dst, up.next_hop, up.interface);
    }
  }
}

Ns3World::Impl::~Impl() {
  connections.clear();
  ns3::Simulator::Destroy();
}

Ns3World::Impl::Connection& Ns3World::Impl::connection(int src, int dst) {
  auto& slot = connections[{src, dst}];
  if (!slot) {
    slot = std::make_unique<Connection>();
    slot->src = src;
    slot->dst = dst;
  }
  return *slot;
}

void Ns3World::Impl::send(int src, int dst, Message message) {
  if (failed[static_cast<std::size_t>(src)]) return;
  if (dst < 0 || dst >= static_cast<int>(links.size()) || dst == src) return;
  Connection& c = connection(src, dst);
  const std::uint64_t bytes = frame_bytes(message);
  c.unwritten.push_back(bytes);
  c.in_flight.emplace_back(std::move(message), bytes);
  if (!c.tx) {
    open(c);
  } else {
    pump(c);
  }
}

void Ns3World::Impl::open(Connection& c) {
  using namespace ns3;
  const auto src_node =
      static_cast<std::uint32_t>(topo.worker_node[static_cast<std::size_t>(c.src)]);
  const auto dst_node = static_cast<std::size_t>(topo.worker_node[static_cast<std::size_t>(c.dst)]);
  c.tx = tcp_socket(src_node);
  c.tx->Bind();
  c.tx->SetConnectCallback(Callback<void, Ptr<Socket>>([this, &c](Ptr<Socket>) {
                             c.connected = true;
                             pump(c);
                           }),
                           Callback<void, Ptr<Socket>>([this, &c](Ptr<Socket>) {
                             lost(c.src, c.dst, "connection refused");
                           }));
  c.tx->SetSendCallback(
      Callback<void, Ptr<Socket>, uint32_t>([this, &c](Ptr<Socket>, uint32_t) { pump(c); }));
  c.tx->SetCloseCallbacks(Callback<void, Ptr<Socket>>([this, &c](Ptr<Socket>) {
                            lost(c.src, c.dst, "connection closed by the peer");
                          }),
                          Callback<void, Ptr<Socket>>(
                              [this, &c](Ptr<Socket>) { lost(c.src, c.dst, "connection reset"); }));
  if (!c.tx->TraceConnectWithoutContext("CongState", MakeCallback(&Impl::count_timeout, this))) {
    throw std::logic_error("ns-3: TcpSocketBase has no CongState trace source");
  }
  watch_tcp(c.tx, "job", static_cast<int>(src_node), static_cast<int>(dst_node), 0);
  c.tx->Connect(InetSocketAddress(node_address[dst_node], options.port));
}

void Ns3World::Impl::pump(Connection& c) {
  if (!c.connected || failed[static_cast<std::size_t>(c.src)]) return;
  while (!c.unwritten.empty()) {
    const std::uint32_t space = c.tx->GetTxAvailable();
    if (space == 0) return;  // the send callback resumes us
    const auto piece = static_cast<std::uint32_t>(
        std::min<std::uint64_t>({c.unwritten.front(), space, kWritePiece}));
    const int sent = c.tx->Send(ns3::Create<ns3::Packet>(piece));
    if (sent <= 0) return;
    c.unwritten.front() -= static_cast<std::uint64_t>(sent);
    if (c.unwritten.front() == 0) c.unwritten.pop_front();
  }
}

void Ns3World::Impl::on_readable(Connection& c) {
  while (ns3::Ptr<ns3::Packet> p = c.rx->Recv()) {
    if (p->GetSize() == 0) break;
    c.received += p->GetSize();
  }
  // TCP keeps bytes in order, so the front message is complete once its byte count has arrived.
  while (!c.in_flight.empty() && c.received >= c.in_flight.front().second) {
    auto [message, bytes] = std::move(c.in_flight.front());
    c.in_flight.pop_front();
    c.received -= bytes;
    ++stats.messages;
    stats.message_bytes += bytes;
    c.delivered += bytes;
    if (failed[static_cast<std::size_t>(c.dst)]) continue;
    links[static_cast<std::size_t>(c.dst)]->deliver(c.src, std::move(message));
  }
}

void Ns3World::Impl::lost(int observer, int peer, const std::string& why) {
  if (failed[static_cast<std::size_t>(observer)]) return;
  if (!reported_lost[static_cast<std::size_t>(observer)].insert(peer).second) return;
  links[static_cast<std::size_t>(observer)]->peer_lost(peer, Status(ErrorCode::peer_lost, why));
}

void Ns3World::Impl::pace(int id) {
  auto it = backgrounds.find(id);
  if (it == backgrounds.end() || !it->second.active) return;
  Background& b = it->second;
  // Every millisecond each flow may add rate x 1 ms to its send buffer.
  constexpr double kTick = 1e-3;
  const auto quantum = static_cast<std::uint32_t>(*b.rate_bps * kTick / 8);
  for (auto& s : b.senders) {
    const std::uint32_t bytes = std::min(quantum, s->GetTxAvailable());
    if (bytes > 0) s->Send(ns3::Create<ns3::Packet>(bytes));
  }
  b.pacer = ns3::Simulator::Schedule(ns3::Seconds(kTick), [this, id] { pace(id); });
}

// ---- public surface ----

Ns3World::Ns3World(const PhysicalTopology& topology, Ns3Options options)
    : impl_(std::make_unique<Impl>(topology, options)) {}

Ns3World::~Ns3World() = default;

int Ns3World::workers() const {
  return static_cast<int>(impl_->links.size());
}
Executor& Ns3World::executor() {
  return impl_->executor;
}
Transport& Ns3World::transport(int rank) {
  return *impl_->links.at(static_cast<std::size_t>(rank));
}
Compute& Ns3World::compute(int rank) {
  return *impl_->computes.at(static_cast<std::size_t>(rank));
}

void Ns3World::run() {
  ns3::Simulator::Run();
}
void Ns3World::stop() {
  ns3::Simulator::Stop();
}
TimePoint Ns3World::now() const {
  return impl_->executor.now();
}

Ns3Stats Ns3World::stats() const {
  Ns3Stats s = impl_->stats;
  s.simulator_events = ns3::Simulator::GetEventCount();
  return s;
}

void Ns3World::set_straggler(int rank, double factor) {
  impl_->computes.at(static_cast<std::size_t>(rank))->factor = factor;
}

int Ns3World::start_background(const std::string& from, const std::string& to,
                               std::optional<double> rate_bps, int flows) {
  using namespace ns3;
  Impl& w = *impl_;
  const int a = w.topo.find_node(from);
  const int b = w.topo.find_node(to);
  if (a < 0 || b < 0) {
    throw std::invalid_argument("background traffic: no node '" + (a < 0 ? from : to) + "'");
  }
  const int id = w.next_background++;
  const std::uint16_t port = static_cast<std::uint16_t>(20000 + id);
  Ptr<Socket> sink = w.tcp_socket(static_cast<std::uint32_t>(b));
  sink->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
  sink->Listen();
  sink->SetAcceptCallback(
      MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
      Callback<void, Ptr<Socket>, const Address&>([&w](Ptr<Socket> s, const Address&) {
        s->SetRecvCallback(Callback<void, Ptr<Socket>>([&w](Ptr<Socket> r) {
          while (Ptr<Packet> p = r->Recv()) {
            if (p->GetSize() == 0) break;
            w.stats.background_bytes += p->GetSize();
          }
        }));
      }));
  w.sinks.push_back(sink);
  Impl::Background& bg = w.backgrounds[id];
  bg.rate_bps = rate_bps;
  for (int f = 0; f < flows; ++f) {
    Ptr<Socket> s = w.tcp_socket(static_cast<std::uint32_t>(a));
    s->Bind();
    if (!rate_bps) {
      // Unpaced: keep the send buffer full.
      const auto fill = [](Ptr<Socket> sock, uint32_t) {
        const std::uint32_t space = sock->GetTxAvailable();
        if (space > 0) sock->Send(Create<Packet>(space));
      };
      s->SetSendCallback(Callback<void, Ptr<Socket>, uint32_t>(fill));
      s->SetConnectCallback(
          Callback<void, Ptr<Socket>>([fill](Ptr<Socket> sock) { fill(sock, 0); }),
          MakeNullCallback<void, Ptr<Socket>>());
    }
    w.watch_tcp(s, "background", a, b, f);
    s->Connect(InetSocketAddress(w.node_address[static_cast<std::size_t>(b)], port));
    bg.senders.push_back(s);
  }
  if (rate_bps) bg.pacer = Simulator::Schedule(Seconds(1e-3), [&w, id] { w.pace(id); });
  return id;
}

void Ns3World::stop_background(int id) {
  auto it = impl_->backgrounds.find(id);
  if (it == impl_->backgrounds.end() || !it->second.active) return;
  Impl::Background& b = it->second;
  b.active = false;
  ns3::Simulator::Cancel(b.pacer);
  for (auto& s : b.senders) {
    s->SetSendCallback(ns3::MakeNullCallback<void, ns3::Ptr<ns3::Socket>, uint32_t>());
    s->Close();
  }
}

void Ns3World::send_bulk(const std::string& from, const std::string& to, std::uint64_t bytes,
                         std::function<void()> done) {
  using namespace ns3;
  Impl& w = *impl_;
  const int a = w.topo.find_node(from);
  const int b = w.topo.find_node(to);
  if (a < 0 || b < 0)
    throw std::invalid_argument("bulk flow: no node '" + (a < 0 ? from : to) + "'");
  const auto port = static_cast<std::uint16_t>(40000 + w.next_background++);
  PacketSinkHelper sink("ns3::TcpSocketFactory", InetSocketAddress(Ipv4Address::GetAny(), port));
  ApplicationContainer sink_app = sink.Install(w.nodes.Get(static_cast<std::uint32_t>(b)));
  BulkSendHelper bulk("ns3::TcpSocketFactory",
                      InetSocketAddress(w.node_address[static_cast<std::size_t>(b)], port));
  bulk.SetAttribute("MaxBytes", UintegerValue(bytes));
  bulk.SetAttribute("SendSize", UintegerValue(static_cast<std::uint32_t>(kWritePiece)));
  ApplicationContainer send_app = bulk.Install(w.nodes.Get(static_cast<std::uint32_t>(a)));
  auto received = std::make_shared<std::uint64_t>(0);
  auto finished = std::make_shared<std::function<void()>>(std::move(done));
  sink_app.Get(0)->TraceConnectWithoutContext(
      "Rx", Callback<void, Ptr<const Packet>, const Address&>(
                [&w, received, finished, bytes](Ptr<const Packet> p, const Address&) {
                  *received += p->GetSize();
                  w.stats.background_bytes += p->GetSize();
                  if (*received >= bytes && *finished) {
                    auto f = std::move(*finished);
                    *finished = nullptr;
                    f();
                  }
                }));
  // Applications installed mid-run initialize now; their start time is a delay from then.
  sink_app.Start(Seconds(0));
  send_app.Start(Seconds(0));
}

const std::vector<TcpSample>& Ns3World::tcp_samples() const {
  return impl_->tcp_samples;
}

std::map<std::pair<int, int>, std::uint64_t> Ns3World::pair_bytes() const {
  std::map<std::pair<int, int>, std::uint64_t> out;
  for (const auto& [key, c] : impl_->connections) {
    if (c->delivered > 0) out[key] = c->delivered;
  }
  return out;
}

void Ns3World::set_link(const std::string& link, std::optional<double> bandwidth_bps,
                        std::optional<std::chrono::nanoseconds> latency) {
  using namespace ns3;
  const int index = impl_->topo.find_link(link);
  if (index < 0) throw std::invalid_argument("link change: no link '" + link + "'");
  NetDeviceContainer& devices = impl_->link_devices[static_cast<std::size_t>(index)];
  if (bandwidth_bps) {
    const DataRate rate(static_cast<std::uint64_t>(*bandwidth_bps));
    const bool shaped = impl_->topo.links[static_cast<std::size_t>(index)].spec.shaped();
    for (std::uint32_t i = 0; i < devices.GetN(); ++i) {
      Ptr<NetDevice> device = devices.Get(i);
      if (shaped) {
        // The wire keeps its line rate; the token bucket fills at the new one (as `tc qdisc
        // change ... tbf rate` does).
        DynamicCast<TbfQueueDisc>(
            device->GetNode()->GetObject<TrafficControlLayer>()->GetRootQueueDiscOnDevice(device))
            ->SetRate(rate);
      } else {
        DynamicCast<PointToPointNetDevice>(device)->SetDataRate(rate);
      }
    }
  }
  if (latency) {
    devices.Get(0)->GetChannel()->SetAttribute("Delay", TimeValue(to_ns3(*latency)));
  }
}

void Ns3World::fail(int rank) {
  Impl& w = *impl_;
  if (w.failed.at(static_cast<std::size_t>(rank))) return;
  w.failed[static_cast<std::size_t>(rank)] = true;
  w.listeners[static_cast<std::size_t>(rank)]->Close();
  // The kernel of a crashed process closes its sockets: peers see the connection end.
  for (auto& [key, c] : w.connections) {
    if (c->src == rank && c->tx) c->tx->Close();
    if (c->dst == rank && c->rx) c->rx->Close();
  }
}

}  // namespace kf
