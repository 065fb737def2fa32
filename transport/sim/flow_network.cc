#include "transport/sim/flow_network.h"

#include <algorithm>
#include <stdexcept>

namespace kf {

namespace {

// Shares within this relative distance of the water level count as reaching it: progressive
// filling subtracts rates from capacities, and the rounding must not leave a flow one ulp short
// of its bottleneck for another round.
constexpr double kTie = 1e-12;

}  // namespace

int FlowNetwork::add_channel(double capacity) {
  if (!(capacity > 0)) throw std::invalid_argument("a channel's capacity must be positive");
  capacity_.push_back(capacity);
  on_channel_.emplace_back();
  channel_mark_.push_back(0);
  return static_cast<int>(capacity_.size()) - 1;
}

FlowNetwork::FlowId FlowNetwork::add_flow(const std::vector<int>& route, double cap) {
  if (route.empty() && cap == kUncapped) {
    throw std::invalid_argument("a flow with no channel needs a rate cap");
  }
  if (!(cap > 0)) throw std::invalid_argument("a flow's rate cap must be positive");
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
  f.route = route;
  f.cap = cap;
  f.rate = 0;
  f.active = true;
  for (int ch : route)
    on_channel_.at(static_cast<std::size_t>(ch)).push_back(id);
  resolve_from({}, id);
  return id;
}

void FlowNetwork::remove_flow(FlowId id) {
  Flow& f = flows_.at(static_cast<std::size_t>(id));
  if (!f.active) throw std::logic_error("removing a flow that is not active");
  for (int ch : f.route) {
    auto& list = on_channel_[static_cast<std::size_t>(ch)];
    list.erase(std::find(list.begin(), list.end(), id));
  }
  f.active = false;
  f.rate = 0;
  free_ids_.push_back(id);
  resolve_from(f.route, -1);
}

void FlowNetwork::set_capacity(int channel, double capacity) {
  if (!(capacity > 0)) throw std::invalid_argument("a channel's capacity must be positive");
  capacity_.at(static_cast<std::size_t>(channel)) = capacity;
  resolve_from({channel}, -1);
}

void FlowNetwork::resolve_from(const std::vector<int>& seeds, FlowId extra_flow) {
  changes_.clear();
  ++epoch_;
  component_channels_.clear();
  component_flows_.clear();
  std::vector<int>& stack = component_channels_;  // channels found; scanned in order
  const auto reach_channel = [&](int ch) {
    if (channel_mark_[static_cast<std::size_t>(ch)] == epoch_) return;
    channel_mark_[static_cast<std::size_t>(ch)] = epoch_;
    stack.push_back(ch);
  };
  const auto reach_flow = [&](FlowId f) {
    if (flow_mark_[static_cast<std::size_t>(f)] == epoch_) return;
    flow_mark_[static_cast<std::size_t>(f)] = epoch_;
    component_flows_.push_back(f);
    for (int ch : flows_[static_cast<std::size_t>(f)].route)
      reach_channel(ch);
  };
  for (int ch : seeds)
    reach_channel(ch);
  if (extra_flow >= 0) reach_flow(extra_flow);
  for (std::size_t i = 0; i < stack.size(); ++i) {
    for (FlowId f : on_channel_[static_cast<std::size_t>(stack[i])])
      reach_flow(f);
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
    for (int ch : f.route)
      level = std::min(level, capacity_[static_cast<std::size_t>(ch)]);
    out[static_cast<std::size_t>(flows.front())] = std::max(level, 0.0);
    return;
  }
  FillScratch& x = scratch_;
  if (x.local_of_channel.size() < capacity_.size()) x.local_of_channel.resize(capacity_.size());
  x.shares.resize(channels.size());
  for (std::size_t i = 0; i < channels.size(); ++i) {
    const auto ch = static_cast<std::size_t>(channels[i]);
    x.local_of_channel[ch] = static_cast<int>(i);
    x.shares[i] = {capacity_[ch], 0, false};
  }
  x.hops.clear();
  x.first_hop.clear();
  for (FlowId id : flows) {
    x.first_hop.push_back(x.hops.size());
    for (int ch : flows_[static_cast<std::size_t>(id)].route) {
      const int l = x.local_of_channel[static_cast<std::size_t>(ch)];
      x.hops.push_back(l);
      ++x.shares[static_cast<std::size_t>(l)].unfrozen;
    }
  }
  x.first_hop.push_back(x.hops.size());

  x.unfrozen.resize(flows.size());
  for (std::size_t k = 0; k < flows.size(); ++k)
    x.unfrozen[k] = k;
  while (!x.unfrozen.empty()) {
    double level = kUncapped;
    for (const Share& s : x.shares) {
      if (s.unfrozen > 0) level = std::min(level, s.remaining / s.unfrozen);
    }
    for (std::size_t k : x.unfrozen)
      level = std::min(level, flows_[static_cast<std::size_t>(flows[k])].cap);
    level = std::max(level, 0.0);  // rounding may leave a full channel a hair below zero
    const double reach = level * (1 + kTie);
    for (Share& s : x.shares)
      s.saturated = s.unfrozen > 0 && s.remaining <= reach * s.unfrozen;
    // Freeze every flow at the level that crosses a full channel or reaches its cap.
    x.freezing.clear();
    std::size_t kept = 0;
    for (std::size_t k : x.unfrozen) {
      const double cap = flows_[static_cast<std::size_t>(flows[k])].cap;
      bool freeze = cap <= reach;
      for (std::size_t h = x.first_hop[k]; !freeze && h < x.first_hop[k + 1]; ++h)
        freeze = x.shares[static_cast<std::size_t>(x.hops[h])].saturated;
      if (freeze) {
        x.freezing.push_back(k);
        out[static_cast<std::size_t>(flows[k])] = std::min(level, cap);
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
      }
    }
  }
}

std::vector<double> FlowNetwork::full_solution() const {
  std::vector<int> channels(capacity_.size());
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
