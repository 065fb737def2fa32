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
#include "sim/ns3/ns3_network_builder.h"
#include "sim/ns3/ns3_rack_socket.h"
#include "sim/sim_compute.h"
#include "sim/sim_port.h"

namespace kf {

namespace {

// Bytes handed to an ns-3 socket per Send. Measured: 64 KiB writes and reading all that is
// available run 35% faster than segment-sized writes and reads (ns-3's per-item bookkeeping
// costs more than its merging copies).
constexpr std::uint64_t kWritePiece = 64 << 10;

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

// The TCP of every socket of the world. ns-3 reads these defaults when the internet stack is
// installed and whenever a socket is made: set before the network is built.
void set_tcp_defaults(const PhysicalTopology& topo, const Ns3Options& options) {
  using namespace ns3;
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
}

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
  // Worker r's port, compute and listener.
  void add_worker(int r);
  // A connection from `from` accepted by worker r's listener: the receiving end of (sender, r).
  void accept(int r, ns3::Ptr<ns3::Socket> socket, const ns3::Address& from);
  // Every TCP socket of the world (listeners, runtime senders, background flows): with RACK
  // with LossRecovery::rack, counting what it resends.
  ns3::Ptr<ns3::Socket> tcp_socket(std::uint32_t node) {
    ns3::Ptr<ns3::Socket> socket =
        create_tcp_socket(network.nodes.Get(node), options.loss_recovery == LossRecovery::rack);
    if (const auto rack = ns3::DynamicCast<RackTcpSocket>(socket))
      rack->on_lost = [this](bool retransmission) {
        ++(retransmission ? stats.lost_retransmissions : stats.early_losses);
      };
    return socket;
  }
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
  Ns3Network network;
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
  // ns-3 numbers its objects and random streams in the order they are made, so this order (seed,
  // TCP defaults, network, then each worker's sockets) is part of every run's outcome.
  ns3::RngSeedManager::SetSeed(static_cast<std::uint32_t>(options.seed % 0xFFFFFFFFu) + 1);
  ns3::RngSeedManager::SetRun(1);
  set_tcp_defaults(topo, options);
  network = build_ns3_network(topo, options.host_qdisc, &stats.dropped_packets);
  const std::size_t n = topo.worker_node.size();
  failed.assign(n, false);
  reported_lost.resize(n);
  for (int r = 0; r < static_cast<int>(n); ++r)
    add_worker(r);
  if (options.tcp_sample_every.count() > 0) {
    ns3::Simulator::Schedule(to_ns3(options.tcp_sample_every), [this] { sample_tcp(); });
  }
}

void Ns3World::Impl::add_worker(int r) {
  using namespace ns3;
  links.push_back(std::make_unique<SimPort>(
      r, [this](int src, int dst, Message&& m) { send(src, dst, std::move(m)); },
      [](std::function<void()> fn) { ns3::Simulator::ScheduleNow(std::move(fn)); }));
  computes.push_back(std::make_unique<SimCompute>(
      [](std::chrono::nanoseconds delay, std::function<void()> done) {
        ns3::Simulator::Schedule(to_ns3(delay), std::move(done));
      },
      options.seed, r, options.compute_jitter));
  const auto node = static_cast<std::uint32_t>(topo.worker_node[static_cast<std::size_t>(r)]);
  Ptr<Socket> listener = tcp_socket(node);
  listener->Bind(InetSocketAddress(Ipv4Address::GetAny(), options.port));
  listener->Listen();
  listener->SetAcceptCallback(
      MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
      Callback<void, Ptr<Socket>, const Address&>(
          [this, r](Ptr<Socket> socket, const Address& from) { accept(r, socket, from); }));
  listeners.push_back(listener);
}

void Ns3World::Impl::accept(int r, ns3::Ptr<ns3::Socket> socket, const ns3::Address& from) {
  using namespace ns3;
  const auto it =
      network.rank_of_address.find(InetSocketAddress::ConvertFrom(from).GetIpv4().Get());
  if (it == network.rank_of_address.end() || failed[static_cast<std::size_t>(r)]) {
    socket->Close();
    return;
  }
  Connection& c = connection(it->second, r);
  c.rx = socket;
  socket->SetRecvCallback(Callback<void, Ptr<Socket>>([this, &c](Ptr<Socket>) { on_readable(c); }));
  socket->SetCloseCallbacks(Callback<void, Ptr<Socket>>([this, &c](Ptr<Socket>) {
                              lost(c.dst, c.src, "connection closed by the peer");
                            }),
                            Callback<void, Ptr<Socket>>([this, &c](Ptr<Socket>) {
                              lost(c.dst, c.src, "connection reset");
                            }));
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
  c.tx->Connect(InetSocketAddress(network.node_address[dst_node], options.port));
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
    s->Connect(InetSocketAddress(w.network.node_address[static_cast<std::size_t>(b)], port));
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
  ApplicationContainer sink_app = sink.Install(w.network.nodes.Get(static_cast<std::uint32_t>(b)));
  BulkSendHelper bulk("ns3::TcpSocketFactory",
                      InetSocketAddress(w.network.node_address[static_cast<std::size_t>(b)], port));
  bulk.SetAttribute("MaxBytes", UintegerValue(bytes));
  bulk.SetAttribute("SendSize", UintegerValue(static_cast<std::uint32_t>(kWritePiece)));
  ApplicationContainer send_app = bulk.Install(w.network.nodes.Get(static_cast<std::uint32_t>(a)));
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
  NetDeviceContainer& devices = impl_->network.link_devices[static_cast<std::size_t>(index)];
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
