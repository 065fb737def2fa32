#include "sim/flow/flow_tcp.h"

#include <algorithm>
#include <cmath>

namespace kf {

namespace {

constexpr double kInitialSegments = 10;
constexpr double kBeta = 0.7;
constexpr double kC = 0.4;
constexpr double kHystartLowSegments = 16;
constexpr double kHystartDelayMin = 4e-3;
constexpr double kHystartDelayMax = 1.0;
constexpr double kCountClamp = 20;  // before the first loss

}  // namespace

CubicWindow::CubicWindow(double segment_bytes)
    : segment_(segment_bytes), cwnd_(kInitialSegments * segment_bytes) {}

void CubicWindow::acked(double now, double bytes, double rtt, double rate) {
  if (rtt > 0) min_rtt_ = std::min(min_rtt_, rtt);
  if (bytes <= 0) return;
  if (slow_start()) {
    const double room = ssthresh_ - cwnd_;
    const double grown = std::min(bytes, room);
    cwnd_ += grown;
    bytes -= grown;
    if (cwnd_ >= kHystartLowSegments * segment_ && std::isfinite(min_rtt_)) {
      const bool train = rate > 0 && cwnd_ / rate > min_rtt_;
      const bool delay = rtt > min_rtt_ + std::clamp(min_rtt_, kHystartDelayMin, kHystartDelayMax);
      if (train || delay) ssthresh_ = cwnd_;
    }
    if (slow_start()) return;
  }
  const double seg = cwnd_ / segment_;
  if (epoch_start_ < 0) {
    epoch_start_ = now;
    if (last_max_ <= seg) {
      k_ = 0;
      origin_ = seg;
    } else {
      k_ = std::cbrt((last_max_ - seg) / kC);
      origin_ = last_max_;
    }
  }
  const double t = now + (std::isfinite(min_rtt_) ? min_rtt_ : 0) - epoch_start_;
  const double delta = kC * std::pow(std::abs(t - k_), 3);
  const double target = t < k_ ? origin_ - delta : origin_ + delta;
  // ns-3 adds a segment per `cnt` ACKed segments, cnt = window / (target - window), and
  // recomputes cnt as the window moves: over a spell of ACKs the window closes in on the target
  // and stops there. At most half a segment per segment ACKed (cnt >= 2); before the first loss
  // at least one per 20 (cnt clamped).
  const double acked_segments = bytes / segment_;
  double growth = 0;
  if (target > seg) growth = std::min(acked_segments * (target - seg) / seg, target - seg);
  growth = std::min(growth, acked_segments / 2);
  if (last_max_ == 0) growth = std::max(growth, acked_segments / kCountClamp);
  cwnd_ += growth * segment_;
}

void CubicWindow::timed_out() {
  lost();
  cwnd_ = segment_;
  last_max_ = 0;
  min_rtt_ = std::numeric_limits<double>::infinity();
}

void CubicWindow::lost() {
  const double seg = cwnd_ / segment_;
  last_max_ = seg < last_max_ ? seg * (1 + kBeta) / 2 : seg;
  epoch_start_ = -1;
  ssthresh_ = std::max(std::floor(seg * kBeta), 2.0) * segment_;
  cwnd_ = ssthresh_;
}

FlowTcp::FlowTcp(FlowNetwork& network, EventQueue& clock, std::vector<double> queue_bytes,
                 double segment_bytes, std::uint64_t seed, Hooks hooks)
    : network_(network),
      clock_(clock),
      queue_bytes_(std::move(queue_bytes)),
      segment_(segment_bytes),
      draws_(seed ^ 0x7cb3a1d95e4f0b21ULL),
      hooks_(std::move(hooks)) {}

int FlowTcp::add_sender() {
  senders_.emplace_back(segment_);
  return static_cast<int>(senders_.size()) - 1;
}

double FlowTcp::weight(int sender, double backlog) const {
  return std::max(segment_,
                  std::min(senders_[static_cast<std::size_t>(sender)].window.cwnd(), backlog));
}

double FlowTcp::in_flight(const Sender& s) const {
  return std::max(segment_, std::min(s.window.cwnd(), hooks_.backlog(s.flow)));
}

double FlowTcp::in_flight_on(int channel) const {
  double sum = 0;
  for (std::size_t i = 0; i < network_.flows_on(channel); ++i) {
    if (const Sender* t = sender_of(network_.flow_on(channel, i))) sum += in_flight(*t);
  }
  return sum;
}

FlowTcp::Sender* FlowTcp::sender_of(FlowNetwork::FlowId flow) const {
  if (flow < 0 || static_cast<std::size_t>(flow) >= sender_by_flow_.size()) return nullptr;
  const int s = sender_by_flow_[static_cast<std::size_t>(flow)];
  return s < 0 ? nullptr : const_cast<Sender*>(&senders_[static_cast<std::size_t>(s)]);
}

void FlowTcp::started(int sender, FlowNetwork::FlowId flow, std::int64_t one_way_latency_ns) {
  Sender& s = senders_[static_cast<std::size_t>(sender)];
  s.flow = flow;
  s.base_rtt = 2e-9 * static_cast<double>(one_way_latency_ns);
  if (s.rtt == 0) s.rtt = s.base_rtt;
  s.settled_at = clock_.now_ns();
  if (sender_by_flow_.size() <= static_cast<std::size_t>(flow))
    sender_by_flow_.resize(static_cast<std::size_t>(flow) + 1, -1);
  sender_by_flow_[static_cast<std::size_t>(flow)] = sender;
  // It may have joined flows that were alone: they start their rounds, as it does. Alone, it
  // needs nothing more (a ring's flows, nearly always).
  if (network_.added_alone()) return;
  for (int ch : network_.route(flow)) {
    if (network_.flows_on(ch) < 2) continue;
    for (std::size_t i = 0; i < network_.flows_on(ch); ++i) {
      if (Sender* other = sender_of(network_.flow_on(ch, i))) start_rounds(*other);
    }
  }
}

void FlowTcp::started_alone(int sender, std::span<const int> route, double rate, double in_flight,
                            std::int64_t one_way_latency_ns) {
  Sender& s = senders_[static_cast<std::size_t>(sender)];
  s.lone = true;
  s.lone_rate = rate;
  s.lone_in_flight = in_flight;
  s.lone_route = route;
  s.base_rtt = 2e-9 * static_cast<double>(one_way_latency_ns);
  if (s.rtt == 0) s.rtt = s.base_rtt;
  s.settled_at = clock_.now_ns();
}

void FlowTcp::joined(int sender, FlowNetwork::FlowId flow) {
  // At the same rate, it stays settled as of its start: what it sent is counted in one spell,
  // as for a flow that was in the network all along.
  Sender& s = senders_[static_cast<std::size_t>(sender)];
  s.lone = false;
  s.flow = flow;
  if (sender_by_flow_.size() <= static_cast<std::size_t>(flow))
    sender_by_flow_.resize(static_cast<std::size_t>(flow) + 1, -1);
  sender_by_flow_[static_cast<std::size_t>(flow)] = sender;
}

void FlowTcp::stopping(int sender, std::int64_t ended_ns) {
  Sender& s = senders_[static_cast<std::size_t>(sender)];
  if (s.lone) {
    // Alone since it started: what it sent is fed to its window when it next meets another
    // flow (start_rounds), as one spell.
    settle(s, s.lone_rate, ended_ns);
    s.lone = false;
    ++s.generation;
    return;
  }
  if (s.flow < 0) return;
  if (s.ticking) {
    update(s);
  } else {
    // Alone since its last round: what it sent is fed to its window when it next meets
    // another flow (start_rounds), as one spell.
    settle(s, network_.rate(s.flow), ended_ns);
  }
  sender_by_flow_[static_cast<std::size_t>(s.flow)] = -1;
  s.flow = -1;
  s.ticking = false;
  ++s.generation;
}

void FlowTcp::rates_changing(std::span<const FlowNetwork::RateChange> changes) {
  for (const auto& change : changes) {
    if (Sender* s = sender_of(change.flow)) settle(*s, change.old_rate);
  }
}

void FlowTcp::settle(Sender& s, double rate, std::int64_t until_ns) {
  const double sent = rate * static_cast<double>(until_ns - s.settled_at) * 1e-9;
  s.pending += sent;
  s.acked += sent;
  s.settled_at = until_ns;
}

FlowTcp::Sample FlowTcp::sample(int sender) const {
  const Sender& s = senders_[static_cast<std::size_t>(sender)];
  Sample out{
      .cwnd = s.window.cwnd(), .ssthresh = s.window.ssthresh(), .rtt = s.rtt, .acked = s.acked};
  if (s.lone) {
    out.rtt = lone_round_trip(s);
    out.in_flight = s.lone_in_flight;
    out.acked += s.lone_rate * static_cast<double>(clock_.now_ns() - s.settled_at) * 1e-9;
  } else if (s.flow >= 0) {
    out.rtt = round_trip(s);
    out.in_flight = in_flight(s);
    out.acked += network_.rate(s.flow) * static_cast<double>(clock_.now_ns() - s.settled_at) * 1e-9;
  }
  return out;
}

FlowTcp::Sample FlowTcp::sample(int sender, std::int64_t ended_ns) const {
  const Sender& s = senders_[static_cast<std::size_t>(sender)];
  Sample out{
      .cwnd = s.window.cwnd(), .ssthresh = s.window.ssthresh(), .rtt = s.rtt, .acked = s.acked};
  if (s.lone || s.flow >= 0) {
    const double rate = s.lone ? s.lone_rate : network_.rate(s.flow);
    out.acked += rate * static_cast<double>(ended_ns - s.settled_at) * 1e-9;
  }
  return out;
}

bool FlowTcp::shared(const Sender& s) const {
  for (int ch : network_.route(s.flow))
    if (network_.flows_on(ch) >= 2) return true;
  return false;
}

void FlowTcp::start_rounds(Sender& s) {
  if (s.ticking) return;
  // What it sent alone counts first, as one spell, and what that grew beyond its path's
  // queues it lost alone.
  update(s);
  double limit = FlowNetwork::kUncapped;
  for (int ch : network_.route(s.flow)) {
    limit = std::min(limit, network_.capacity(ch) * s.base_rtt + data_room(ch));
  }
  while (in_flight(s) > limit && s.window.cwnd() > 2 * segment_) {
    s.window.lost();
    ++stats_.losses;
  }
  s.growth = 0;
  reweigh(s);
  s.ticking = true;
  const std::uint64_t generation = ++s.generation;
  const auto index = static_cast<int>(&s - senders_.data());
  const auto rtt = static_cast<std::int64_t>(round_trip(s) * 1e9);
  clock_.schedule_at(clock_.now_ns() + std::max<std::int64_t>(rtt, 1),
                     [this, index, generation] { round(index, generation); });
}

void FlowTcp::round(int sender, std::uint64_t generation) {
  Sender& s = senders_[static_cast<std::size_t>(sender)];
  if (generation != s.generation || s.flow < 0) return;
  update(s);
  reweigh(s);
  drop_excess(network_.route(s.flow), s.base_rtt);
  if (s.flow < 0) return;  // it timed out
  if (!shared(s)) {
    s.ticking = false;
    return;
  }
  const std::uint64_t next = ++s.generation;
  const auto rtt = static_cast<std::int64_t>(round_trip(s) * 1e9);
  clock_.schedule_at(clock_.now_ns() + std::max<std::int64_t>(rtt, 1),
                     [this, sender, next] { round(sender, next); });
}

void FlowTcp::update(Sender& s) {
  const double rate = network_.rate(s.flow);
  settle(s, rate);
  ++stats_.rounds;
  const double before = s.window.cwnd();
  s.rtt = round_trip(s);
  s.window.acked(static_cast<double>(clock_.now_ns()) * 1e-9, s.pending, s.rtt, rate);
  s.growth = std::max(0.0, s.window.cwnd() - before);
  s.pending = 0;
}

double FlowTcp::queued(int channel, double base_rtt) const {
  // A queue stands only where the flows fill the channel: elsewhere the windows' bytes wait at
  // their own bottlenecks, and counting them at every channel on the way made the round trips
  // of flows crossing several busy links (a binary tree's) more than twice ns-3's.
  if (network_.load(channel) < network_.capacity(channel) * (1 - 1e-9)) return 0;
  return std::clamp(in_flight_on(channel) - network_.capacity(channel) * base_rtt, 0.0,
                    data_room(channel));
}

double FlowTcp::data_room(int channel) const {
  const double bytes = queue_bytes_[static_cast<std::size_t>(channel)];
  if (!std::isfinite(bytes)) return bytes;
  // The port counts packets, and the ACKs of what crosses its link the other way (one per two
  // segments) take their share of its slots.
  const double data = network_.load(channel);
  const double acks = network_.load(channel ^ 1) / 2;
  return data + acks > 0 ? bytes * data / (data + acks) : bytes;
}

double FlowTcp::round_trip(const Sender& s) const {
  double rtt = s.base_rtt;
  for (int ch : network_.route(s.flow))
    rtt += queued(ch, s.base_rtt) / network_.capacity(ch);
  return rtt;
}

// round_trip() for a lone flow: what its window queues beyond its path's bandwidth-delay
// product waits at the channels it fills.
double FlowTcp::lone_round_trip(const Sender& s) const {
  double rtt = s.base_rtt;
  for (int ch : s.lone_route) {
    const double capacity = network_.capacity(ch);
    if (s.lone_rate < capacity * (1 - 1e-9)) continue;  // as queued(): not full
    rtt += std::clamp(s.lone_in_flight - capacity * s.base_rtt, 0.0, data_room(ch)) / capacity;
  }
  return rtt;
}

void FlowTcp::drop_excess(std::span<const int> path, double base_rtt) {
  // A copy: a loser that times out ends its flow, and the network may reuse its route's place.
  route_scratch_.assign(path.begin(), path.end());
  for (int ch : route_scratch_) {
    const std::size_t n = network_.flows_on(ch);
    const double windows = in_flight_on(ch);
    const double capacity = network_.capacity(ch);
    const double limit = capacity * base_rtt + data_room(ch);
    const double excess = windows - limit;
    if (excess <= 0) continue;
    if (n == 1) {
      // Alone, it loses every round trip until its window fits.
      if (Sender* t = sender_of(network_.flow_on(ch, 0))) {
        while (in_flight(*t) > limit && t->window.cwnd() > 2 * segment_)
          back_off(*t);
      }
      continue;
    }
    // The senders learn of the overflow a round trip later: meanwhile their windows grow on,
    // and that growth overflows too.
    double overshoot = excess;
    for (std::size_t i = 0; i < n; ++i) {
      if (const Sender* t = sender_of(network_.flow_on(ch, i))) overshoot += t->growth;
    }
    std::vector<Sender*> losers;
    for (std::size_t i = 0; i < n; ++i) {
      const FlowNetwork::FlowId f = network_.flow_on(ch, i);
      Sender* t = sender_of(f);
      if (t == nullptr) continue;
      const double drops = overshoot / segment_ * network_.rate(f) / capacity;
      if (std::uniform_real_distribution<double>(0, 1)(draws_) < drops) losers.push_back(t);
    }
    for (Sender* t : losers) {
      if (t->flow < 0) continue;  // timed out on an earlier channel
      // Duplicate ACKs come from the segments sent after the lost one: what is left of the
      // window and of what the sender has to send.
      const double behind = std::min(t->window.cwnd(), hooks_.backlog(t->flow));
      if (behind < 3 * segment_) {
        time_out(*t);
      } else {
        back_off(*t);
      }
    }
  }
}

void FlowTcp::time_out(Sender& s) {
  s.window.timed_out();
  s.growth = 0;
  ++stats_.losses;
  ++stats_.timeouts;
  const double rto = std::max(kMinRto, 3 * round_trip(s));
  hooks_.pause(s.flow, static_cast<std::int64_t>(rto * 1e9));
}

void FlowTcp::back_off(Sender& s) {
  s.window.lost();
  s.growth = 0;
  ++stats_.losses;
  reweigh(s);
}

int FlowTcp::shared_fair_channel(const Sender& s) const {
  int best = -1;
  for (int ch : network_.route(s.flow)) {
    if (std::isfinite(queue_bytes_[static_cast<std::size_t>(ch)]) || network_.flows_on(ch) < 2)
      continue;
    // Served in turn matters only where the queue holds flows back: a full channel.
    if (network_.load(ch) < network_.capacity(ch) * (1 - 1e-9)) continue;
    if (best < 0 || network_.flows_on(ch) > network_.flows_on(best)) best = ch;
  }
  return best;
}

void FlowTcp::reweigh(Sender& s) {
  const int fair = shared_fair_channel(s);
  if (fair < 0) {
    network_.set_weight(s.flow, in_flight(s));
    hooks_.apply();
    return;
  }
  network_.set_weight_on(fair, in_flight_on(fair) / static_cast<double>(network_.flows_on(fair)));
  hooks_.apply();
}

}  // namespace kf
