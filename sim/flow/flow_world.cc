#include "sim/flow/flow_world.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "runtime/wire_size.h"
#include "sim/flow/event_queue.h"
#include "sim/flow/flow_network.h"
#include "sim/flow/flow_routes.h"
#include "sim/flow/flow_tcp.h"
#include "sim/flow/ring_queue.h"
#include "sim/sim_compute.h"
#include "sim/sim_port.h"

namespace kf {

namespace {}  // namespace

class FlowWorld::Impl {
 public:
  Impl(const PhysicalTopology& topology, FlowOptions options);

  // One ordered worker pair, as one TCP connection: messages leave in order at the flow's rate.
  // Its per-message events come back through fire(), the kind in the low two bits: "the front
  // message's last byte left" (with the generation above), "the oldest message under way
  // arrived", or an express message's arrival (with its token above).
  //
  // Express: a message that starts a flow alone on every channel of its route, with nothing
  // queued behind it, keeps its rate until another flow joins one of those channels. Its last
  // byte leaves at a time known at its start (express_end), so its arrival is scheduled at once
  // and the "last byte left" event is skipped: at a thousand workers nearly every message of a
  // ring is one, and that is one event in two. Its flow is a lone flow (FlowNetwork::
  // reserve_alone): it holds its channels without entering the solver. It is released when the
  // message arrives, or earlier when something would touch its channels after express_end
  // (settle_express). Until express_end, something touching its channels (a flow joining them,
  // a capacity or latency change, a failure) or another message for the connection ends express
  // mode: its lone flow becomes a flow, and the skipped event is scheduled as usual.
  struct Connection final : EventQueue::Handler {
    static constexpr std::uint64_t kFrontSent = 0;
    static constexpr std::uint64_t kArrive = 1;
    static constexpr std::uint64_t kExpressArrive = 2;
    void fire(std::uint64_t argument) override {
      switch (argument & 3) {
        case kArrive:
          world->arrive(*this);
          break;
        case kExpressArrive:
          world->express_arrive(*this, argument >> 2);
          break;
        default:
          world->front_sent(*this, argument >> 2);
      }
    }

    // The channels it crosses.
    std::span<const int> route() const {
      if (hop_count <= hops.size()) return {hops.data(), hop_count};
      return long_route;
    }
    void set_route(const std::vector<int>& channels) {
      hop_count = static_cast<std::uint32_t>(channels.size());
      if (channels.size() <= hops.size()) {
        std::copy(channels.begin(), channels.end(), hops.begin());
      } else {
        long_route = channels;
      }
    }

    // What a message's send and arrival touch comes first: the event queue fetches a handler's
    // first four cache lines ahead of its event (EventQueue::run).
    Impl* world = nullptr;
    int src = 0;
    int dst = 0;
    int sender = -1;    // its TCP window (FlowTcp), with options.tcp_windows
    bool open = false;  // handshake done
    bool opening = false;
    bool closed = false;  // by a failure: nothing more is sent
    bool express = false;
    // In order: [0, sent) have left and are crossing the path, [sent, end) wait to be sent. One
    // queue, so a message is not moved from one to another on the way.
    RingQueue<std::pair<Message, std::uint64_t>> messages;
    std::size_t sent = 0;
    double waiting_bytes = 0;       // of the messages in [sent, end)
    double front_sent = 0;          // bytes of the first waiting message sent
    FlowNetwork::FlowId flow = -1;  // active while some wait (-1 while express: a lone flow)
    std::int64_t settled_at = 0;    // front_sent is as of this time
    std::uint64_t generation = 0;   // of the pending "front sent" event
    std::int64_t last_arrival = 0;
    std::int64_t express_end = 0;      // when its last byte leaves
    std::int64_t express_arrival = 0;  // when it arrives
    std::uint64_t express_bytes = 0;   // its size (its queue slot is a cache miss away)
    double express_rate = 0;           // its lone flow's
    double express_weight = 0;         // its flow's weight, should it become one
    std::uint64_t express_token = 0;   // of its express arrival (one per express message)
    // Express arrivals still scheduled whose messages left express mode before their end (few:
    // one is dropped when it comes up).
    std::vector<std::uint64_t> voided;
    std::int64_t latency_ns = 0;          // propagation along the route
    std::int64_t forward_segment_ns = 0;  // store-and-forward of a full segment
    // In place up to six channels (every route of a leaf-spine or fat tree): a vector's would
    // be one more cache line per message.
    std::array<int, 6> hops{};
    std::uint32_t hop_count = 0;
    double forward_s_per_byte = 0;  // store-and-forward: sum over hops after the first of 1 / rate
    std::int64_t paused_until = 0;  // waiting out a retransmission timeout until then
    std::vector<int> long_route;    // a route of more than six channels
  };

  struct Background {
    std::vector<FlowNetwork::FlowId> flows;
    std::vector<int> senders;  // FlowTcp's, with options.tcp_windows
    bool active = true;
  };

  // Who a flow belongs to: a connection, or (connection null) a background flow.
  struct Owner {
    Connection* connection = nullptr;
    std::int64_t settled_at = 0;  // background: bytes counted up to this time
  };

  // A shaped link direction (LinkSpec::shaped) as a fluid token bucket: its channel runs at the
  // line rate while tokens last and at the bucket's rate once they are spent; tokens fill at
  // that rate less what the channel carries, up to the bucket's depth. The channel's capacity
  // flips only when a rate on it changes or when the tokens run out or come back.
  struct Bucket {
    int channel = 0;
    double rate = 0;    // payload bytes/s
    double line = 0;    // payload bytes/s
    double depth = 0;   // payload bytes
    double tokens = 0;  // as of `at`
    double load = 0;    // what the channel carried since `at`
    std::int64_t at = 0;
    std::uint64_t generation = 0;  // of the pending flip
    bool queued = false;
  };

  double payload_rate(double bandwidth_bps) const {
    return bandwidth_bps / 8 * static_cast<double>(segment) /
           static_cast<double>(segment + kTcpIpHeaderBytes + kPppHeaderBytes);
  }
  std::int64_t now() const { return clock.now_ns(); }

  Connection* find_connection(int src, int dst) const;
  Connection& connection(int src, int dst);
  void measure(Connection& c);
  void send(int src, int dst, Message&& message);
  void start_flow(Connection& c);
  void stop_flow(Connection& c);
  void apply_changes();
  void follow_buckets();
  void retune_queued();
  void touch_buckets(std::span<const int> route);
  void integrate(Bucket& b);
  void retune(Bucket& b);
  void settle(Connection& c, double rate);
  // Bytes a connection has queued and not sent (as of its last settle); a flow's: a background
  // flow's is unbounded.
  double unsent(const Connection& c) const;
  double backlog(FlowNetwork::FlowId flow) const;
  // A connection's sender waits out a retransmission timeout: nothing leaves for `ns`.
  void pause(FlowNetwork::FlowId flow, std::int64_t ns);
  void reschedule(Connection& c);
  void front_sent(Connection& c, std::uint64_t generation);
  // When a message of `bytes` whose last byte left at `left` arrives (in order).
  std::int64_t arrival_after(const Connection& c, std::int64_t left, std::uint64_t bytes) const;
  std::int64_t forward_ns(const Connection& c, double payload) const;  // its last packet's
  void arrive(Connection& c);
  // Express messages (see Connection).
  bool express_allowed(const Connection& c) const;
  void start_express(Connection& c, double rate, double weight);
  void express_arrive(Connection& c, std::uint64_t token);
  // Brings an express message up to now before something else touches its channels: done
  // sending (its lone flow released as of express_end) or, still sending, back to the usual
  // events with its lone flow made a flow.
  void settle_express(Connection& c);
  void settle_express_on(std::span<const int> channels);
  void leave_express(Connection& c);
  void release_express(Connection& c);  // frees its channels
  void retire_express(Connection& c);
  void lost_later(int observer, int peer, std::int64_t at, const char* why);
  void lost(int observer, int peer, const std::string& why);
  void sample_tcp();

  EventQueue clock;
  PhysicalTopology topo;
  FlowRoutes routes;
  FlowNetwork network;
  FlowOptions options;
  std::uint64_t segment = 0;  // TCP payload bytes per segment
  std::vector<double> link_bandwidth;
  std::vector<std::int64_t> link_latency;
  std::vector<std::unique_ptr<SimPort>> ports;
  std::vector<std::unique_ptr<SimCompute>> computes;
  // Per source: (destination, connection), few each (a ring has one, a star's root n - 1).
  std::vector<std::vector<std::pair<int, Connection*>>> connections_from;
  // Per source, the connection it last sent on: a ring sends on one connection only, and a dense
  // array stays in cache where a thousand small per-source lists would not.
  mutable std::vector<Connection*> last_connection;
  std::vector<std::unique_ptr<Connection>> connection_list;  // in creation order
  std::vector<Owner> owners;                                 // by flow id
  std::vector<Connection*> express_on;  // by channel: the express message holding it, if any
  std::vector<std::uint8_t> failed;     // by rank: bytes, not bits (read twice per message)
  std::vector<std::set<int>> reported_lost;
  std::map<int, Background> backgrounds;
  int next_background = 0;
  double background_bytes = 0;  // of stopped flows and settled parts of running ones
  WorldStats stats;
  // Shaped links only (after the rest, which the message path keeps in cache).
  std::vector<Bucket> buckets;
  std::vector<int> bucket_of_channel;  // -1: a plain channel; empty when no link is shaped
  std::vector<int> buckets_to_retune;
  bool retuning = false;
  std::unique_ptr<FlowTcp> tcp;  // options.tcp_windows
  // The senders tcp_samples() reports, in the order they started (as the ns-3 world lists its
  // sockets), and what was sampled of them.
  struct Sampled {
    const char* kind;
    int src_node;
    int dst_node;
    int flow;  // a background event's flow number; 0 for a connection
    int sender;
    const Connection* connection;  // null for a background flow
  };
  std::vector<Sampled> sampled;
  std::vector<TcpSample> samples;
};

FlowWorld::Impl::Impl(const PhysicalTopology& topology, FlowOptions opts)
    : topo(topology), routes(topo), options(opts) {
  std::uint32_t min_mtu = 65535;
  for (const auto& l : topo.links)
    min_mtu = std::min(min_mtu, l.spec.mtu);
  segment = tcp_segment_bytes(min_mtu);
  for (const auto& l : topo.links) {
    link_bandwidth.push_back(l.spec.bandwidth_bps);
    link_latency.push_back(l.spec.latency.count());
    for (int direction = 0; direction < 2; ++direction) {  // a -> b, b -> a
      if (!l.spec.shaped()) {
        network.add_channel(payload_rate(l.spec.bandwidth_bps));
        continue;
      }
      // A full bucket to start with, as after an idle spell.
      Bucket b;
      b.rate = payload_rate(l.spec.bandwidth_bps);
      b.line = payload_rate(l.spec.line_rate_bps);
      b.depth = static_cast<double>(l.spec.burst_bytes) * b.rate / (l.spec.bandwidth_bps / 8);
      b.tokens = b.depth;
      b.channel = network.add_channel(b.line);
      bucket_of_channel.resize(static_cast<std::size_t>(b.channel) + 1, -1);
      bucket_of_channel[static_cast<std::size_t>(b.channel)] = static_cast<int>(buckets.size());
      buckets.push_back(b);
    }
  }
  if (!buckets.empty()) bucket_of_channel.resize(static_cast<std::size_t>(network.channels()), -1);
  express_on.assign(static_cast<std::size_t>(network.channels()), nullptr);
  if (options.tcp_windows) {
    std::vector<double> queue_bytes;
    for (int ch = 0; ch < network.channels(); ++ch) {
      const auto& link = topo.links[static_cast<std::size_t>(link_of(ch))];
      const int from = ch == channel_of(link_of(ch), true) ? link.a : link.b;
      const bool host = topo.nodes[static_cast<std::size_t>(from)].kind != NodeKind::switch_;
      queue_bytes.push_back(host && options.lossless_hosts
                                ? FlowNetwork::kUncapped
                                : static_cast<double>(link.spec.queue_packets) * link.spec.mtu);
    }
    tcp = std::make_unique<FlowTcp>(
        network, clock, std::move(queue_bytes), static_cast<double>(segment), options.seed,
        FlowTcp::Hooks{.apply = [this] { apply_changes(); },
                       .backlog = [this](FlowNetwork::FlowId f) { return backlog(f); },
                       .pause = [this](FlowNetwork::FlowId f, std::int64_t ns) { pause(f, ns); }});
    if (options.tcp_sample_every.count() > 0)
      clock.schedule_at(options.tcp_sample_every.count(), [this] { sample_tcp(); });
  }
  const int n = static_cast<int>(topo.worker_node.size());
  failed.assign(static_cast<std::size_t>(n), 0);
  connections_from.resize(static_cast<std::size_t>(n));
  last_connection.assign(static_cast<std::size_t>(n), nullptr);
  reported_lost.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    ports.push_back(std::make_unique<SimPort>(
        r, [this](int src, int dst, Message&& m) { send(src, dst, std::move(m)); },
        [this](std::function<void()> fn) { clock.post(std::move(fn)); }));
    computes.push_back(std::make_unique<SimCompute>(
        [this](std::chrono::nanoseconds delay, std::function<void()> done) {
          clock.post_after(delay, std::move(done));
        },
        options.seed, r, options.compute_jitter));
  }
}

FlowWorld::Impl::Connection* FlowWorld::Impl::find_connection(int src, int dst) const {
  Connection* last = last_connection[static_cast<std::size_t>(src)];
  if (last != nullptr && last->dst == dst) return last;
  for (const auto& [d, c] : connections_from[static_cast<std::size_t>(src)]) {
    if (d == dst) return last_connection[static_cast<std::size_t>(src)] = c;
  }
  return nullptr;
}

FlowWorld::Impl::Connection& FlowWorld::Impl::connection(int src, int dst) {
  if (Connection* c = find_connection(src, dst)) return *c;
  auto c = std::make_unique<Connection>();
  c->world = this;
  c->src = src;
  c->dst = dst;
  c->set_route(routes.route(topo.worker_node[static_cast<std::size_t>(src)],
                            topo.worker_node[static_cast<std::size_t>(dst)]));
  measure(*c);
  if (tcp) {
    c->sender = tcp->add_sender();
    sampled.push_back({"job", topo.worker_node[static_cast<std::size_t>(src)],
                       topo.worker_node[static_cast<std::size_t>(dst)], 0, c->sender, c.get()});
  }
  connections_from[static_cast<std::size_t>(src)].emplace_back(dst, c.get());
  connection_list.push_back(std::move(c));
  return *connection_list.back();
}

// The route's latency and store-and-forward terms from the links' current specs.
void FlowWorld::Impl::measure(Connection& c) {
  c.latency_ns = 0;
  c.forward_s_per_byte = 0;
  const std::span<const int> route = c.route();
  for (std::size_t h = 0; h < route.size(); ++h) {
    const auto link = static_cast<std::size_t>(link_of(route[h]));
    c.latency_ns += link_latency[link];
    if (h > 0) c.forward_s_per_byte += 8 / link_bandwidth[link];
  }
  c.forward_segment_ns = forward_ns(c, static_cast<double>(segment));
}

void FlowWorld::Impl::send(int src, int dst, Message&& message) {
  if (failed[static_cast<std::size_t>(src)]) return;
  if (dst < 0 || dst >= static_cast<int>(ports.size()) || dst == src) return;
  Connection* found = find_connection(src, dst);
  const bool fresh = found == nullptr;
  Connection& c = fresh ? connection(src, dst) : *found;
  if (c.closed) return;  // the peer's end closed: already reported
  if (c.express) settle_express(c);
  if (failed[static_cast<std::size_t>(dst)]) {
    // No one listens there any more: the connection attempt is refused after a round trip.
    if (fresh) lost_later(src, dst, now() + 2 * c.latency_ns, "connection refused");
    c.closed = true;
    return;
  }
  const std::uint64_t bytes = frame_bytes(message);
  c.messages.emplace_back(std::move(message), bytes);
  c.waiting_bytes += static_cast<double>(bytes);
  if (!c.open) {
    if (!c.opening) {
      c.opening = true;
      // SYN out, SYN-ACK back: data follows one round trip after the first send.
      clock.schedule_at(now() + 2 * c.latency_ns, [cp = &c] {
        cp->open = true;
        if (!cp->closed) cp->world->start_flow(*cp);
      });
    }
    return;
  }
  if (c.flow < 0) start_flow(c);
}

void FlowWorld::Impl::start_flow(Connection& c) {
  if (c.flow >= 0 || c.express || c.sent == c.messages.size() || now() < c.paused_until) return;
  settle_express_on(c.route());
  c.settled_at = now();
  const double weight = tcp ? tcp->weight(c.sender, unsent(c)) : 1;
  if (express_allowed(c)) {
    if (const double rate = network.reserve_alone(c.route()); rate > 0) {
      start_express(c, rate, weight);
      return;
    }
  }
  c.flow = network.add_flow(c.route(), FlowNetwork::kUncapped, weight);
  if (owners.size() <= static_cast<std::size_t>(c.flow)) owners.resize(c.flow + 1);
  owners[static_cast<std::size_t>(c.flow)] = {&c, now()};
  apply_changes();
  if (tcp) tcp->started(c.sender, c.flow, c.latency_ns);
}

bool FlowWorld::Impl::express_allowed(const Connection& c) const {
  if (!options.express_messages) return false;
  if (!buckets.empty()) return false;  // shaped links change capacity on their own
  // One message, over a route (reserve_alone() then tells whether it is alone on it).
  return !c.route().empty() && c.sent + 1 == c.messages.size();
}

void FlowWorld::Impl::start_express(Connection& c, double rate, double weight) {
  // Alone: no other flow's rate changes. As reschedule() and front_sent() would.
  const std::uint64_t bytes = c.messages[c.sent].second;
  const double left = static_cast<double>(bytes) - c.front_sent;
  const std::int64_t end =
      now() +
      (left <= 0 ? std::int64_t{0} : static_cast<std::int64_t>(std::ceil(left / rate * 1e9)));
  for (int ch : c.route())
    express_on[static_cast<std::size_t>(ch)] = &c;
  c.express = true;
  c.express_bytes = bytes;
  c.express_rate = rate;
  c.express_weight = weight;
  c.express_end = end;
  c.express_arrival = arrival_after(c, end, bytes);
  clock.schedule_call(c.express_arrival, c, (++c.express_token << 2) | Connection::kExpressArrive);
  if (tcp) tcp->started_alone(c.sender, c.route(), rate, weight, c.latency_ns);
}

void FlowWorld::Impl::express_arrive(Connection& c, std::uint64_t token) {
  if (const auto it = std::find(c.voided.begin(), c.voided.end(), token); it != c.voided.end()) {
    c.voided.erase(it);  // it left express mode: the usual events took over
    return;
  }
  // Still express, or retired early (and a later message may be express by now).
  if (c.express && token == c.express_token) retire_express(c);
  arrive(c);
}

void FlowWorld::Impl::settle_express(Connection& c) {
  if (!c.express) return;
  if (now() >= c.express_end) {
    retire_express(c);
    return;
  }
  leave_express(c);
  clock.schedule_call(c.express_end, c, (++c.generation << 2) | Connection::kFrontSent);
}

void FlowWorld::Impl::settle_express_on(std::span<const int> channels) {
  for (int ch : channels) {
    if (Connection* c = express_on[static_cast<std::size_t>(ch)]) settle_express(*c);
  }
}

void FlowWorld::Impl::release_express(Connection& c) {
  c.express = false;
  for (int ch : c.route())
    express_on[static_cast<std::size_t>(ch)] = nullptr;
  network.release_alone(c.route());
}

// Still sending: its lone flow becomes a flow, alone, so at the same rate; the connection and its
// window stay settled as of its start, at that rate.
void FlowWorld::Impl::leave_express(Connection& c) {
  release_express(c);
  c.voided.push_back(c.express_token);  // its arrival is scheduled again once its last byte leaves
  c.flow = network.add_flow(c.route(), FlowNetwork::kUncapped, c.express_weight);
  if (owners.size() <= static_cast<std::size_t>(c.flow)) owners.resize(c.flow + 1);
  owners[static_cast<std::size_t>(c.flow)] = {&c, now()};
  if (tcp) tcp->joined(c.sender, c.flow);
}

// What front_sent() and stop_flow() would have done at express_end. Alone until then: ending
// its lone flow changes no other.
void FlowWorld::Impl::retire_express(Connection& c) {
  const std::int64_t end = c.express_end;
  c.front_sent += c.express_rate * static_cast<double>(end - c.settled_at) * 1e-9;
  c.settled_at = end;
  ++c.sent;
  const auto bytes = static_cast<double>(c.express_bytes);
  c.waiting_bytes -= bytes;
  c.front_sent = std::max(0.0, c.front_sent - bytes);
  c.last_arrival = c.express_arrival;
  if (tcp) tcp->stopping(c.sender, end);
  ++c.generation;
  release_express(c);
}

void FlowWorld::Impl::stop_flow(Connection& c) {
  if (c.flow < 0) return;
  if (tcp) tcp->stopping(c.sender);
  const FlowNetwork::FlowId id = c.flow;
  c.flow = -1;
  ++c.generation;  // its pending "front sent" event is void
  owners[static_cast<std::size_t>(id)] = {};
  network.remove_flow(id);
  // A flow alone on a shaped channel leaves no rate change behind to find its bucket by.
  if (!buckets.empty()) touch_buckets(c.route());
  apply_changes();
}

// Settles every flow whose rate changed at its old rate up to now, then reschedules it.
void FlowWorld::Impl::apply_changes() {
  if (tcp) tcp->rates_changing(network.changes());
  for (const auto& change : network.changes()) {
    Owner& o = owners[static_cast<std::size_t>(change.flow)];
    if (o.connection != nullptr) {
      settle(*o.connection, change.old_rate);
      reschedule(*o.connection);
    } else {
      background_bytes += change.old_rate * static_cast<double>(now() - o.settled_at) * 1e-9;
      o.settled_at = now();
    }
  }
  if (!buckets.empty()) follow_buckets();
}

// The token buckets on the routes of the flows whose rate changed follow what they now carry.
void FlowWorld::Impl::follow_buckets() {
  for (const auto& change : network.changes())
    touch_buckets(network.route(change.flow));
  retune_queued();
}

void FlowWorld::Impl::retune_queued() {
  if (retuning) return;  // a retune that changed rates: the loop below takes what it queued
  retuning = true;
  while (!buckets_to_retune.empty()) {
    Bucket& b = buckets[static_cast<std::size_t>(buckets_to_retune.back())];
    buckets_to_retune.pop_back();
    b.queued = false;
    retune(b);
  }
  retuning = false;
}

void FlowWorld::Impl::touch_buckets(std::span<const int> route) {
  if (buckets.empty()) return;
  for (int channel : route) {
    const int b = bucket_of_channel[static_cast<std::size_t>(channel)];
    if (b < 0 || buckets[static_cast<std::size_t>(b)].queued) continue;
    buckets[static_cast<std::size_t>(b)].queued = true;
    buckets_to_retune.push_back(b);
  }
}

// Brings a bucket's tokens up to now at the load it carried since it last looked.
void FlowWorld::Impl::integrate(Bucket& b) {
  const double seconds = static_cast<double>(now() - b.at) * 1e-9;
  b.tokens = std::clamp(b.tokens + (b.rate - b.load) * seconds, 0.0, b.depth);
  b.at = now();
}

void FlowWorld::Impl::retune(Bucket& b) {
  // Below a packet's worth the bucket counts as spent: no flip for a sliver of tokens.
  const double floor = static_cast<double>(segment);
  integrate(b);
  // (A rate above the wire's, by a link change, gives the wire's.)
  const double capacity = b.tokens > floor ? b.line : std::min(b.rate, b.line);
  if (capacity != network.capacity(b.channel)) {
    network.set_capacity(b.channel, capacity);
    apply_changes();  // may queue this bucket again: harmless, its next look changes nothing
  }
  b.load = network.load(b.channel);
  // The next flip: the tokens run out while the channel carries more than the rate, or come
  // back while it carries less.
  const std::uint64_t generation = ++b.generation;
  // (Rates within a part in a billion of the bucket's are its rate: a saturated channel's sum
  // of rates is not exact.)
  const double slack = 1e-9 * b.rate;
  double seconds = -1;
  if (b.tokens > floor && b.load > b.rate + slack) seconds = b.tokens / (b.load - b.rate);
  if (b.tokens <= floor && b.load < b.rate - slack)
    seconds = (floor - b.tokens) / (b.rate - b.load);
  if (seconds < 0) return;
  const auto index = static_cast<int>(&b - buckets.data());
  clock.schedule_at(now() + static_cast<std::int64_t>(std::ceil(seconds * 1e9)) + 1,
                    [this, index, generation] {
                      Bucket& bucket = buckets[static_cast<std::size_t>(index)];
                      if (bucket.generation != generation || bucket.queued) return;
                      bucket.queued = true;
                      buckets_to_retune.push_back(index);
                      retune_queued();
                    });
}

void FlowWorld::Impl::settle(Connection& c, double rate) {
  c.front_sent += rate * static_cast<double>(now() - c.settled_at) * 1e-9;
  c.settled_at = now();
}

double FlowWorld::Impl::unsent(const Connection& c) const {
  return std::max(0.0, c.waiting_bytes - c.front_sent);
}

void FlowWorld::Impl::pause(FlowNetwork::FlowId flow, std::int64_t ns) {
  Connection* c = owners[static_cast<std::size_t>(flow)].connection;
  if (c == nullptr) return;  // a bulk background flow: its window starts over, it never idles
  settle(*c, network.rate(flow));
  c->paused_until = now() + ns;
  stop_flow(*c);
  clock.schedule_at(c->paused_until, [this, c] {
    if (!c->closed) start_flow(*c);
  });
}

double FlowWorld::Impl::backlog(FlowNetwork::FlowId flow) const {
  const Connection* c = owners[static_cast<std::size_t>(flow)].connection;
  return c == nullptr ? FlowNetwork::kUncapped : unsent(*c);
}

// Schedules the moment the front message's last byte leaves, at the flow's current rate.
void FlowWorld::Impl::reschedule(Connection& c) {
  const std::uint64_t generation = ++c.generation;
  const double left = static_cast<double>(c.messages[c.sent].second) - c.front_sent;
  const double rate = network.rate(c.flow);
  const auto wait =
      left <= 0 ? std::int64_t{0} : static_cast<std::int64_t>(std::ceil(left / rate * 1e9));
  clock.schedule_call(now() + wait, c, (generation << 2) | Connection::kFrontSent);
}

std::int64_t FlowWorld::Impl::arrival_after(const Connection& c, std::int64_t left,
                                            std::uint64_t bytes) const {
  // Its last packet is stored and forwarded at every hop after the first.
  const std::int64_t forward =
      bytes >= segment ? c.forward_segment_ns : forward_ns(c, static_cast<double>(bytes));
  return std::max(c.last_arrival, left + c.latency_ns + forward);
}

std::int64_t FlowWorld::Impl::forward_ns(const Connection& c, double payload) const {
  return std::llround((payload + kTcpIpHeaderBytes + kPppHeaderBytes) * c.forward_s_per_byte * 1e9);
}

void FlowWorld::Impl::front_sent(Connection& c, std::uint64_t generation) {
  if (generation != c.generation) return;  // the rate changed since: rescheduled
  settle(c, network.rate(c.flow));
  const std::uint64_t bytes = c.messages[c.sent++].second;
  c.waiting_bytes -= static_cast<double>(bytes);
  c.front_sent = std::max(0.0, c.front_sent - static_cast<double>(bytes));
  const std::int64_t arrival = arrival_after(c, now(), bytes);
  c.last_arrival = arrival;
  clock.schedule_call(arrival, c, Connection::kArrive);
  if (c.sent < c.messages.size()) {
    reschedule(c);  // same rate: no other flow is affected
  } else {
    stop_flow(c);
  }
}

void FlowWorld::Impl::arrive(Connection& c) {
  // The receiver most likely answers on the connection it last sent on (a ring's next step):
  // fetching it now overlaps its miss with the runtime's work in between.
  if (const Connection* next = last_connection[static_cast<std::size_t>(c.dst)]) {
    const auto* at = reinterpret_cast<const char*>(next);
    for (std::size_t line = 0; line < sizeof(Connection); line += 64)
      __builtin_prefetch(at + line);
  }
  auto [message, bytes] = c.messages.take_front();
  --c.sent;
  ++stats.messages;
  stats.message_bytes += bytes;
  if (failed[static_cast<std::size_t>(c.dst)]) return;
  ports[static_cast<std::size_t>(c.dst)]->deliver(c.src, std::move(message));
}

void FlowWorld::Impl::lost_later(int observer, int peer, std::int64_t at, const char* why) {
  clock.schedule_at(at, [this, observer, peer, why] { lost(observer, peer, why); });
}

void FlowWorld::Impl::lost(int observer, int peer, const std::string& why) {
  if (failed[static_cast<std::size_t>(observer)]) return;
  if (!reported_lost[static_cast<std::size_t>(observer)].insert(peer).second) return;
  ports[static_cast<std::size_t>(observer)]->peer_lost(peer, Status(ErrorCode::peer_lost, why));
}

void FlowWorld::Impl::sample_tcp() {
  const double seconds = static_cast<double>(now()) * 1e-9;
  const auto bytes32 = [](double b) {
    return static_cast<std::uint32_t>(std::clamp(b, 0.0, 4294967295.0));
  };
  for (const Sampled& x : sampled) {
    // An express message whose last byte left is done sending, though its flow waits for its
    // arrival to be removed.
    const Connection* c = x.connection;
    const FlowTcp::Sample t = c != nullptr && c->express && now() >= c->express_end
                                  ? tcp->sample(x.sender, c->express_end)
                                  : tcp->sample(x.sender);
    samples.push_back({.time_s = seconds,
                       .kind = x.kind,
                       .src = topo.nodes[static_cast<std::size_t>(x.src_node)].name,
                       .dst = topo.nodes[static_cast<std::size_t>(x.dst_node)].name,
                       .flow = x.flow,
                       .cwnd_bytes = bytes32(t.cwnd),
                       .ssthresh_bytes = std::isfinite(t.ssthresh) ? bytes32(t.ssthresh) : 0,
                       .srtt_s = t.rtt,
                       .in_flight_bytes = bytes32(t.in_flight),
                       .acked_bytes = static_cast<std::uint64_t>(t.acked)});
  }
  // Sampling alone must not keep the simulation going.
  if (clock.pending() > 0)
    clock.schedule_at(now() + options.tcp_sample_every.count(), [this] { sample_tcp(); });
}

// ---- public surface ----

FlowWorld::FlowWorld(const PhysicalTopology& topology, FlowOptions options)
    : impl_(std::make_unique<Impl>(topology, options)) {}

FlowWorld::~FlowWorld() = default;

int FlowWorld::workers() const {
  return static_cast<int>(impl_->ports.size());
}
Executor& FlowWorld::executor() {
  return impl_->clock;
}
Transport& FlowWorld::transport(int rank) {
  return *impl_->ports.at(static_cast<std::size_t>(rank));
}
Compute& FlowWorld::compute(int rank) {
  return *impl_->computes.at(static_cast<std::size_t>(rank));
}

void FlowWorld::run() {
  impl_->clock.run();
}
void FlowWorld::stop() {
  impl_->clock.stop();
}
TimePoint FlowWorld::now() const {
  return impl_->clock.now();
}

WorldStats FlowWorld::stats() const {
  WorldStats s = impl_->stats;
  s.simulator_events = impl_->clock.executed();
  double background = impl_->background_bytes;
  for (const auto& [id, b] : impl_->backgrounds) {
    if (!b.active) continue;
    for (FlowNetwork::FlowId f : b.flows) {
      background += impl_->network.rate(f) *
                    static_cast<double>(impl_->now() -
                                        impl_->owners[static_cast<std::size_t>(f)].settled_at) *
                    1e-9;
    }
  }
  s.background_bytes = static_cast<std::uint64_t>(background);
  return s;
}

const std::vector<TcpSample>& FlowWorld::tcp_samples() const {
  return impl_->samples;
}

std::vector<std::pair<std::string, std::uint64_t>> FlowWorld::model_counters() const {
  const FlowStats s = flow_stats();
  return {{"rate_solves", s.rate_solves}, {"solved_flows", s.solved_flows},
          {"connections", s.connections}, {"tcp_rounds", s.tcp_rounds},
          {"tcp_losses", s.tcp_losses},   {"tcp_timeouts", s.tcp_timeouts}};
}

FlowStats FlowWorld::flow_stats() const {
  const FlowTcp::Stats tcp = impl_->tcp ? impl_->tcp->stats() : FlowTcp::Stats{};
  return {.rate_solves = impl_->network.solves(),
          .solved_flows = impl_->network.solved_flows(),
          .connections = impl_->connection_list.size(),
          .tcp_rounds = tcp.rounds,
          .tcp_losses = tcp.losses,
          .tcp_timeouts = tcp.timeouts};
}

void FlowWorld::set_straggler(int rank, double factor) {
  impl_->computes.at(static_cast<std::size_t>(rank))->factor = factor;
}

int FlowWorld::start_background(const std::string& from, const std::string& to,
                                std::optional<double> rate_bps, int flows) {
  Impl& w = *impl_;
  const int a = w.topo.find_node(from);
  const int b = w.topo.find_node(to);
  if (a < 0 || b < 0) {
    throw std::invalid_argument("background traffic: no node '" + (a < 0 ? from : to) + "'");
  }
  if (a == b) throw std::invalid_argument("background traffic from '" + from + "' to itself");
  const std::vector<int> route = w.routes.route(a, b);
  w.settle_express_on(route);
  const int id = w.next_background++;
  Impl::Background& bg = w.backgrounds[id];
  std::int64_t latency_ns = 0;
  for (int ch : route)
    latency_ns += w.link_latency[static_cast<std::size_t>(link_of(ch))];
  for (int f = 0; f < flows; ++f) {
    const int sender = w.tcp ? w.tcp->add_sender() : -1;
    const FlowNetwork::FlowId flow =
        w.network.add_flow(route, rate_bps ? *rate_bps / 8 : FlowNetwork::kUncapped,
                           w.tcp ? w.tcp->weight(sender, FlowNetwork::kUncapped) : 1);
    if (w.owners.size() <= static_cast<std::size_t>(flow)) w.owners.resize(flow + 1);
    w.owners[static_cast<std::size_t>(flow)] = {nullptr, w.now()};
    w.apply_changes();
    bg.flows.push_back(flow);
    if (w.tcp) {
      w.tcp->started(sender, flow, latency_ns);
      bg.senders.push_back(sender);
      w.sampled.push_back({"background", a, b, f, sender, nullptr});
    }
  }
  return id;
}

void FlowWorld::stop_background(int id) {
  Impl& w = *impl_;
  auto it = w.backgrounds.find(id);
  if (it == w.backgrounds.end() || !it->second.active) return;
  it->second.active = false;
  for (std::size_t i = 0; i < it->second.flows.size(); ++i) {
    const FlowNetwork::FlowId f = it->second.flows[i];
    if (w.tcp) w.tcp->stopping(it->second.senders[i]);
    Impl::Owner& o = w.owners[static_cast<std::size_t>(f)];
    w.background_bytes += w.network.rate(f) * static_cast<double>(w.now() - o.settled_at) * 1e-9;
    o = {};
    w.network.remove_flow(f);
    w.touch_buckets(w.network.route(f));
    w.apply_changes();
  }
}

void FlowWorld::set_link(const std::string& link, std::optional<double> bandwidth_bps,
                         std::optional<std::chrono::nanoseconds> latency) {
  Impl& w = *impl_;
  const int index = w.topo.find_link(link);
  if (index < 0) throw std::invalid_argument("link change: no link '" + link + "'");
  const auto i = static_cast<std::size_t>(index);
  if (bandwidth_bps) {
    w.link_bandwidth[i] = *bandwidth_bps;
    for (const bool from_a : {true, false}) {
      const int channel = channel_of(index, from_a);
      if (w.topo.links[i].spec.shaped()) {
        // The wire keeps its line rate; the bucket fills at the new rate from now on.
        Impl::Bucket& b = w.buckets[static_cast<std::size_t>(
            w.bucket_of_channel[static_cast<std::size_t>(channel)])];
        w.integrate(b);
        b.rate = w.payload_rate(*bandwidth_bps);
        w.touch_buckets(std::span<const int>(&channel, 1));
        w.retune_queued();
      } else {
        w.settle_express_on(std::span<const int>(&channel, 1));
        w.network.set_capacity(channel, w.payload_rate(*bandwidth_bps));
        w.apply_changes();
      }
    }
  }
  if (latency) w.link_latency[i] = latency->count();
  // Messages already under way keep the delay they left with.
  for (const auto& c : w.connection_list) {
    const std::span<const int> route = c->route();
    if (std::any_of(route.begin(), route.end(), [index](int ch) { return link_of(ch) == index; })) {
      if (latency) w.settle_express(*c);  // one still sending leaves with the new delay
      w.measure(*c);
    }
  }
}

void FlowWorld::fail(int rank) {
  Impl& w = *impl_;
  if (w.failed.at(static_cast<std::size_t>(rank))) return;
  for (const auto& c : w.connection_list) {
    if (c->src == rank || c->dst == rank) w.settle_express(*c);  // before its queue is cut
  }
  w.failed[static_cast<std::size_t>(rank)] = 1;
  // The kernel of a crashed process closes its sockets: messages already on the wire still
  // arrive, then each peer sees its connection end; whatever was sent to it is dropped.
  for (const auto& c : w.connection_list) {
    if (c->src == rank && !c->closed) {
      // What was not sent yet would reach the peer as a partial message at best: dropped.
      c->closed = true;
      c->messages.truncate(c->sent);
      c->waiting_bytes = 0;
      w.stop_flow(*c);
      w.lost_later(c->dst, c->src, std::max(w.now() + c->latency_ns, c->last_arrival),
                   "connection closed by the peer");
    } else if (c->dst == rank && !c->closed) {
      c->closed = true;
      c->messages.truncate(c->sent);
      c->waiting_bytes = 0;
      w.stop_flow(*c);
      w.lost_later(c->src, c->dst, w.now() + c->latency_ns, "connection closed by the peer");
    }
  }
}

}  // namespace kf
