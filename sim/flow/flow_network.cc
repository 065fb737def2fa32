#include "sim/flow/flow_network.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace kf {

namespace {

// Shares within this relative distance of the water level count as reaching it: progressive
// filling subtracts rates from capacities, and the rounding must not leave a flow one ulp short
// of its bottleneck for another round.
constexpr double kTie = 1e-12;

}  // namespace

void FlowNetwork::FlowList::push_back(FlowId id) {
  if (count_ < kInlineFlows) {
    first_[count_] = id;
  } else {
    more_.push_back(id);
  }
  ++count_;
}

void FlowNetwork::FlowList::erase(FlowId id) {
  std::size_t at = 0;
  while (at < count_ && (*this)[at] != id)
    ++at;
  if (at == count_) throw std::logic_error("a channel does not carry that flow");
  for (std::size_t i = at; i + 1 < count_; ++i)
    set(i, (*this)[i + 1]);
  if (count_ > kInlineFlows) more_.pop_back();
  --count_;
}

int FlowNetwork::add_channel(double capacity) {
  if (!(capacity > 0)) throw std::invalid_argument("a channel's capacity must be positive");
  channels_.emplace_back();
  state_.push_back({.capacity = capacity});
  return static_cast<int>(channels_.size()) - 1;
}

FlowNetwork::FlowId FlowNetwork::add_flow(std::span<const int> route, double cap, double weight) {
  if (route.empty() && cap == kUncapped) {
    throw std::invalid_argument("a flow with no channel needs a rate cap");
  }
  if (!(cap > 0)) throw std::invalid_argument("a flow's rate cap must be positive");
  if (!(weight > 0) || weight == kUncapped)
    throw std::invalid_argument("a flow's weight must be positive and finite");
  for (int ch : route) {
    if (ch < 0 || static_cast<std::size_t>(ch) >= channels_.size())
      throw std::out_of_range("a flow's route names no channel " + std::to_string(ch));
    if (reserved(ch))
      throw std::logic_error("a flow joins channel " + std::to_string(ch) +
                             ", which a lone flow holds");
  }
  FlowId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
    flow_mark_.push_back(0);
    new_rates_.push_back(0);
  }
  Flow& f = flows_[static_cast<std::size_t>(id)];
  f.length = static_cast<std::uint32_t>(route.size());
  if (route.size() <= kInlineHops) {
    std::copy(route.begin(), route.end(), f.hops.begin());
  } else {
    if (long_routes_.size() <= static_cast<std::size_t>(id)) long_routes_.resize(id + 1);
    long_routes_[static_cast<std::size_t>(id)].assign(route.begin(), route.end());
  }
  f.cap = cap;
  f.weight = weight;
  f.rate = 0;
  f.active = true;
  bool alone = true;  // on every channel of its route: its component is itself
  for (int ch : route) {
    FlowList& on = channels_[static_cast<std::size_t>(ch)].flows;
    on.push_back(id);
    ++state_[static_cast<std::size_t>(ch)].flows;
    alone = alone && on.size() == 1;
  }
  added_alone_ = alone;
  if (alone) {
    // A ring's or a tree's flow, nearly always: what resolve_from() would find, without the
    // search (fill() gives a lone flow the same rate).
    double rate = cap;
    for (int ch : route)
      rate = std::min(rate, state_[static_cast<std::size_t>(ch)].capacity);
    f.rate = rate;
    changes_.assign(1, {id, 0.0});
    ++solves_;
    ++solved_flows_;
    return id;
  }
  resolve_from({}, id);
  return id;
}

void FlowNetwork::remove_flow(FlowId id) {
  Flow& f = flows_.at(static_cast<std::size_t>(id));
  if (!f.active) throw std::logic_error("removing a flow that is not active");
  const std::span<const int> hops = route(id);
  bool alone = true;  // it was: no other flow's rate changes
  for (int ch : hops) {
    FlowList& on = channels_[static_cast<std::size_t>(ch)].flows;
    on.erase(id);
    --state_[static_cast<std::size_t>(ch)].flows;
    alone = alone && on.size() == 0;
  }
  f.active = false;
  f.rate = 0;
  free_ids_.push_back(id);
  added_alone_ = false;
  if (alone) {
    changes_.clear();
    return;
  }
  resolve_from(hops, -1);
}

void FlowNetwork::set_weight(FlowId id, double weight) {
  if (!(weight > 0) || weight == kUncapped)
    throw std::invalid_argument("a flow's weight must be positive and finite");
  Flow& f = flows_.at(static_cast<std::size_t>(id));
  if (!f.active) throw std::logic_error("weighting a flow that is not active");
  changes_.clear();
  if (f.weight == weight) return;
  f.weight = weight;
  // A weight matters only against another flow on some channel.
  bool alone = true;
  for (int ch : route(id))
    alone = alone && channels_[static_cast<std::size_t>(ch)].flows.size() == 1;
  if (!alone) resolve_from({}, id);
}

void FlowNetwork::set_weight_on(int channel, double weight) {
  if (!(weight > 0) || weight == kUncapped)
    throw std::invalid_argument("a flow's weight must be positive and finite");
  changes_.clear();
  const FlowList& on = channels_.at(static_cast<std::size_t>(channel)).flows;
  bool changed = false;
  for (std::size_t i = 0; i < on.size(); ++i) {
    Flow& f = flows_[static_cast<std::size_t>(on[i])];
    changed = changed || f.weight != weight;
    f.weight = weight;
  }
  if (!changed) return;
  const int seed[] = {channel};
  resolve_from(seed, -1);
}

double FlowNetwork::load(int channel) const {
  const FlowList& on = channels_.at(static_cast<std::size_t>(channel)).flows;
  double sum = state_[static_cast<std::size_t>(channel)].lone_rate;
  for (std::size_t i = 0; i < on.size(); ++i)
    sum += flows_[static_cast<std::size_t>(on[i])].rate;
  return sum;
}

void FlowNetwork::set_capacity(int channel, double capacity) {
  if (!(capacity > 0)) throw std::invalid_argument("a channel's capacity must be positive");
  if (reserved(channel))
    throw std::logic_error("changing the capacity of channel " + std::to_string(channel) +
                           ", which a lone flow holds");
  state_.at(static_cast<std::size_t>(channel)).capacity = capacity;
  const int seed[] = {channel};
  resolve_from(seed, -1);
}

double FlowNetwork::reserve_alone(std::span<const int> route) {
  if (route.empty()) throw std::invalid_argument("a lone flow needs a route");
  double rate = kUncapped;  // as add_flow() gives a flow alone
  for (int ch : route) {
    if (ch < 0 || static_cast<std::size_t>(ch) >= state_.size())
      throw std::out_of_range("a flow's route names no channel " + std::to_string(ch));
    const ChannelState& c = state_[static_cast<std::size_t>(ch)];
    if (c.flows != 0 || c.lone_rate > 0) return 0;
    rate = std::min(rate, c.capacity);
  }
  for (int ch : route)
    state_[static_cast<std::size_t>(ch)].lone_rate = rate;
  ++solves_;
  ++solved_flows_;
  return rate;
}

void FlowNetwork::release_alone(std::span<const int> route) {
  for (int ch : route)
    state_[static_cast<std::size_t>(ch)].lone_rate = 0;
}

void FlowNetwork::resolve_from(std::span<const int> seeds, FlowId extra_flow) {
  changes_.clear();
  ++epoch_;
  component_channels_.clear();
  component_flows_.clear();
  std::vector<int>& stack = component_channels_;  // channels found; scanned in order
  const auto reach_channel = [&](int ch) {
    std::uint64_t& mark = channels_[static_cast<std::size_t>(ch)].mark;
    if (mark == epoch_) return;
    mark = epoch_;
    stack.push_back(ch);
  };
  const auto reach_flow = [&](FlowId f) {
    if (flow_mark_[static_cast<std::size_t>(f)] == epoch_) return;
    flow_mark_[static_cast<std::size_t>(f)] = epoch_;
    component_flows_.push_back(f);
    for (int ch : route(f))
      reach_channel(ch);
  };
  for (int ch : seeds)
    reach_channel(ch);
  if (extra_flow >= 0) reach_flow(extra_flow);
  for (std::size_t i = 0; i < stack.size(); ++i) {
    const FlowList& on = channels_[static_cast<std::size_t>(stack[i])].flows;
    for (std::size_t k = 0; k < on.size(); ++k)
      reach_flow(on[k]);
  }
  if (component_flows_.empty()) return;
  ++solves_;
  solved_flows_ += component_flows_.size();
  fill(component_channels_, component_flows_, new_rates_);
  for (FlowId id : component_flows_) {
    Flow& f = flows_[static_cast<std::size_t>(id)];
    const double rate = new_rates_[static_cast<std::size_t>(id)];
    if (rate != f.rate) {
      changes_.push_back({id, f.rate});
      f.rate = rate;
    }
  }
}

void FlowNetwork::fill(const std::vector<int>& channels, const std::vector<FlowId>& flows,
                       std::vector<double>& out) const {
  if (flows.size() == 1) {
    // Alone on its channels (the common case: a ring's or tree's flow): the tightest channel or
    // its cap, which is what the filling below gives in one round.
    const Flow& f = flows_[static_cast<std::size_t>(flows.front())];
    double level = f.cap;
    for (int ch : route(flows.front()))
      level = std::min(level, state_[static_cast<std::size_t>(ch)].capacity);
    out[static_cast<std::size_t>(flows.front())] = std::max(level, 0.0);
    return;
  }
  FillScratch& x = scratch_;
  if (x.local_of_channel.size() < channels_.size()) x.local_of_channel.resize(channels_.size());
  x.shares.resize(channels.size());
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const auto ch = static_cast<std::size_t>(channels[i]);
    x.local_of_channel[ch] = static_cast<int>(i);
    x.shares[i] = {state_[ch].capacity, 0, 0.0, false};
  }
  x.hops.clear();
  x.first_hop.clear();
  for (FlowId id : flows) {
    x.first_hop.push_back(x.hops.size());
    for (int ch : route(id)) {
      const int l = x.local_of_channel[static_cast<std::size_t>(ch)];
      x.hops.push_back(l);
      Share& s = x.shares[static_cast<std::size_t>(l)];
      ++s.unfrozen;
      s.weight += flows_[static_cast<std::size_t>(id)].weight;
    }
  }
  x.first_hop.push_back(x.hops.size());

  x.unfrozen.resize(flows.size());
  for (std::size_t k = 0; k < flows.size(); ++k)
    x.unfrozen[k] = k;
  while (!x.unfrozen.empty()) {
    // The level is a rate per unit of weight.
    double level = kUncapped;
    for (const Share& s : x.shares) {
      if (s.unfrozen > 0) level = std::min(level, s.remaining / s.weight);
    }
    for (std::size_t k : x.unfrozen) {
      const Flow& f = flows_[static_cast<std::size_t>(flows[k])];
      level = std::min(level, f.cap / f.weight);
    }
    level = std::max(level, 0.0);  // rounding may leave a full channel a hair below zero
    const double reach = level * (1 + kTie);
    for (Share& s : x.shares)
      s.saturated = s.unfrozen > 0 && s.remaining <= reach * s.weight;
    // Freeze every flow at the level that crosses a full channel or reaches its cap.
    x.freezing.clear();
    std::size_t kept = 0;
    for (std::size_t k : x.unfrozen) {
      const Flow& f = flows_[static_cast<std::size_t>(flows[k])];
      bool freeze = f.cap / f.weight <= reach;
      for (std::size_t h = x.first_hop[k]; !freeze && h < x.first_hop[k + 1]; ++h)
        freeze = x.shares[static_cast<std::size_t>(x.hops[h])].saturated;
      if (freeze) {
        x.freezing.push_back(k);
        out[static_cast<std::size_t>(flows[k])] = std::min(level * f.weight, f.cap);
      } else {
        x.unfrozen[kept++] = k;
      }
    }
    x.unfrozen.resize(kept);
    for (std::size_t k : x.freezing) {
      const double rate = out[static_cast<std::size_t>(flows[k])];
      for (std::size_t h = x.first_hop[k]; h < x.first_hop[k + 1]; ++h) {
        Share& s = x.shares[static_cast<std::size_t>(x.hops[h])];
        s.remaining -= rate;
        --s.unfrozen;
        s.weight -= flows_[static_cast<std::size_t>(flows[k])].weight;
      }
    }
  }
}

std::vector<double> FlowNetwork::full_solution() const {
  std::vector<int> channels(channels_.size());
  for (std::size_t i = 0; i < channels.size(); ++i)
    channels[i] = static_cast<int>(i);
  std::vector<FlowId> flows;
  for (std::size_t i = 0; i < flows_.size(); ++i)
    if (flows_[i].active) flows.push_back(static_cast<FlowId>(i));
  std::vector<double> out(flows_.size(), 0.0);
  fill(channels, flows, out);
  return out;
}

}  // namespace kf
