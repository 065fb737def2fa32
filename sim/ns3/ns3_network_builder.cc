// The ns-3 glue (C++17: Debian's ns-3 3.37 headers do not compile as C++20).
#include "sim/ns3/ns3_network_builder.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

namespace kf {

namespace {

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

// Connects `count` to `source`'s drop trace; throws std::logic_error naming the trace sources it
// has when it has no `trace` (another ns-3 release may rename them).
template <typename Callback>
void connect_drops(ns3::ObjectBase& source, Callback count, const char* trace = "Drop") {
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

// One build: the topology and the network as far as it is built.
class NetworkBuilder {
 public:
  NetworkBuilder(const PhysicalTopology& topology, HostQdisc host_qdisc,
                 std::uint64_t* dropped_packets)
      : topo_(topology),
        // A switch port keeps the drop-tail queue in every case.
        host_queue_(host_qdisc == HostQdisc::tsq        ? EndQueue::tsq
                    : host_qdisc == HostQdisc::fq_codel ? EndQueue::fq_codel
                                                        : EndQueue::drop_tail),
        dropped_(dropped_packets) {}

  Ns3Network build();

 private:
  void add_links();
  void install_link_end(ns3::Ptr<ns3::NetDevice> device, const LinkSpec& spec, EndQueue queue);
  void count_traffic_control_drops();
  void spread_over_spines();
  void map_ranks();

  ns3::Callback<void, ns3::Ptr<const ns3::Packet>> count_packet_drop() const {
    std::uint64_t* dropped = dropped_;
    return ns3::Callback<void, ns3::Ptr<const ns3::Packet>>(
        [dropped](ns3::Ptr<const ns3::Packet>) { ++*dropped; });
  }
  ns3::Callback<void, ns3::Ptr<const ns3::QueueDiscItem>> count_item_drop() const {
    std::uint64_t* dropped = dropped_;
    return ns3::Callback<void, ns3::Ptr<const ns3::QueueDiscItem>>(
        [dropped](ns3::Ptr<const ns3::QueueDiscItem>) { ++*dropped; });
  }

  const PhysicalTopology& topo_;
  const EndQueue host_queue_;
  std::uint64_t* dropped_;
  Ns3Network net_;
};

Ns3Network NetworkBuilder::build() {
  using namespace ns3;
  net_.nodes.Create(static_cast<std::uint32_t>(topo_.nodes.size()));
  InternetStackHelper internet;
  internet.Install(net_.nodes);
  add_links();
  count_traffic_control_drops();
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();
  spread_over_spines();
  map_ranks();
  return std::move(net_);
}

// Every link in topology order: its devices and channel, its ends' addresses (a /30 each) and
// queues. A node's address is that of the first link end it has.
void NetworkBuilder::add_links() {
  using namespace ns3;
  Ipv4AddressHelper addresses;
  addresses.SetBase("10.0.0.0", "255.255.255.252");
  net_.node_address.assign(topo_.nodes.size(), Ipv4Address());
  std::vector<bool> has_address(topo_.nodes.size(), false);
  for (const auto& l : topo_.links) {
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
    NetDeviceContainer devices = p2p.Install(net_.nodes.Get(static_cast<std::uint32_t>(l.a)),
                                             net_.nodes.Get(static_cast<std::uint32_t>(l.b)));
    Ipv4InterfaceContainer ifs = addresses.Assign(devices);
    addresses.NewNetwork();
    // Assign() adds a default FqCoDel queue disc; a link's queue is the drop-tail queue the
    // scenario sizes, as on a switch port, so take the queue disc away.
    TrafficControlHelper().Uninstall(devices);
    for (std::uint32_t end = 0; end < 2; ++end) {
      const auto node = static_cast<std::size_t>(end == 0 ? l.a : l.b);
      const bool host = topo_.nodes[node].kind != NodeKind::switch_;
      install_link_end(devices.Get(end), l.spec, host ? host_queue_ : EndQueue::drop_tail);
    }
    for (int end = 0; end < 2; ++end) {
      const auto node = static_cast<std::size_t>(end == 0 ? l.a : l.b);
      if (!has_address[node]) {
        net_.node_address[node] = ifs.GetAddress(static_cast<std::uint32_t>(end));
        has_address[node] = true;
      }
    }
    net_.link_devices.push_back(devices);
  }
}

void NetworkBuilder::install_link_end(ns3::Ptr<ns3::NetDevice> device, const LinkSpec& spec,
                                      EndQueue queue) {
  using namespace ns3;
  const auto packets = [](std::uint32_t n) {
    return QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, n));
  };
  Ptr<Queue<Packet>> device_queue = DynamicCast<PointToPointNetDevice>(device)->GetQueue();
  connect_drops(*device_queue, count_packet_drop());
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
  connect_drops(*root, count_item_drop());
}

// A port whose device queue is full stops it, and traffic control then drops the packet itself
// (the queue never sees it): that is where a switch port's drops are counted.
void NetworkBuilder::count_traffic_control_drops() {
  for (std::uint32_t i = 0; i < net_.nodes.GetN(); ++i) {
    connect_drops(*net_.nodes.Get(i)->GetObject<ns3::TrafficControlLayer>(), count_packet_drop(),
                  "TcDrop");
  }
}

// Global routing sends everything between two leaves over one spine, which would make every
// other spine idle. Per-packet ECMP would reorder TCP; instead each leaf gets a host route per
// remote destination, spread over the spines by destination (deterministic, flow-consistent).
void NetworkBuilder::spread_over_spines() {
  using namespace ns3;
  std::vector<int> spines;
  for (std::size_t i = 0; i < topo_.nodes.size(); ++i) {
    if (topo_.nodes[i].kind == NodeKind::switch_ && topo_.nodes[i].name.rfind("spine", 0) == 0) {
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
  for (std::size_t li = 0; li < topo_.links.size(); ++li) {
    const auto& l = topo_.links[li];
    for (int end = 0; end < 2; ++end) {
      const int leaf = end == 0 ? l.a : l.b;
      const int spine = end == 0 ? l.b : l.a;
      if (topo_.nodes[static_cast<std::size_t>(leaf)].name.rfind("leaf", 0) != 0) continue;
      if (std::find(spines.begin(), spines.end(), spine) == spines.end()) continue;
      Ptr<Ipv4> leaf_ip = net_.nodes.Get(static_cast<std::uint32_t>(leaf))->GetObject<Ipv4>();
      Ptr<Ipv4> spine_ip = net_.nodes.Get(static_cast<std::uint32_t>(spine))->GetObject<Ipv4>();
      const auto leaf_if = static_cast<std::uint32_t>(leaf_ip->GetInterfaceForDevice(
          net_.link_devices[li].Get(static_cast<std::uint32_t>(end))));
      const auto spine_if = static_cast<std::uint32_t>(spine_ip->GetInterfaceForDevice(
          net_.link_devices[li].Get(static_cast<std::uint32_t>(1 - end))));
      uplinks[leaf][spine] = {leaf_if, spine_ip->GetAddress(spine_if, 0).GetLocal()};
    }
  }
  // Which leaf each worker hangs under: walk up from the worker (through its host node).
  const auto leaf_of = [this](int node) {
    for (int hops = 0; hops < 3; ++hops) {
      if (topo_.nodes[static_cast<std::size_t>(node)].name.rfind("leaf", 0) == 0) return node;
      for (const auto& l : topo_.links) {
        const int other = l.a == node ? l.b : (l.b == node ? l.a : -1);
        if (other < 0) continue;
        const auto& k = topo_.nodes[static_cast<std::size_t>(other)];
        if (k.kind != NodeKind::worker && k.name.rfind("spine", 0) != 0) {
          node = other;
          break;
        }
      }
    }
    return topo_.nodes[static_cast<std::size_t>(node)].name.rfind("leaf", 0) == 0 ? node : -1;
  };
  Ipv4StaticRoutingHelper helper;
  for (std::size_t r = 0; r < topo_.worker_node.size(); ++r) {
    const int node = topo_.worker_node[r];
    const int home = leaf_of(node);
    const Ipv4Address dst = net_.node_address[static_cast<std::size_t>(node)];
    for (auto& [leaf, by_spine] : uplinks) {
      if (leaf == home || by_spine.size() != spines.size()) continue;
      const Uplink& up = by_spine.at(spines[r % spines.size()]);
      helper.GetStaticRouting(net_.nodes.Get(static_cast<std::uint32_t>(leaf))->GetObject<Ipv4>())
          ->AddHostRouteTo(dst, up.next_hop, up.interface);
    }
  }
}

// Ranks in order: where two workers share a node, its address is the later rank's.
void NetworkBuilder::map_ranks() {
  for (std::size_t r = 0; r < topo_.worker_node.size(); ++r) {
    const auto node = static_cast<std::size_t>(topo_.worker_node[r]);
    net_.rank_of_address[net_.node_address[node].Get()] = static_cast<int>(r);
  }
}

}  // namespace

Ns3Network build_ns3_network(const PhysicalTopology& topology, HostQdisc host_qdisc,
                             std::uint64_t* dropped_packets) {
  return NetworkBuilder(topology, host_qdisc, dropped_packets).build();
}

}  // namespace kf
