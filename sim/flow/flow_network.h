// FlowNetwork: the fluid model of a network. Channels (one direction of a link) have a capacity;
// flows follow a route of channels and may have a rate cap of their own; every active flow gets
// its weighted max-min fair rate (progressive filling: raise every rate together in proportion
// to the flows' weights, freeze the flows of a channel once it is full or a flow once it reaches
// its cap). Weights are 1 unless the caller sets them: FlowWorld's TCP windows do, so that flows
// meeting at a bottleneck share it in proportion to their congestion windows, as TCP does.
//
// Incremental: a max-min allocation splits over the connected components of the "shares a
// channel" relation, so when a flow starts or ends (or a channel's capacity changes) only the
// component around it is solved again; flows elsewhere keep their rates. The caller learns which
// flows changed rate (and what their rate was) so that it can settle their progress at the old
// rate and reschedule only their completions.
//
// Rates and capacities are in bytes per second. Plain C++, no simulator inside: FlowWorld drives
// it, and tests check it against full_solution().
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace kf {

class FlowNetwork {
 public:
  using FlowId = int;
  static constexpr double kUncapped = std::numeric_limits<double>::infinity();

  struct RateChange {
    FlowId flow;
    double old_rate;  // 0 for a flow that just started
  };

  int add_channel(double capacity);
  int channels() const { return static_cast<int>(channels_.size()); }
  double capacity(int channel) const { return state_[static_cast<std::size_t>(channel)].capacity; }

  // Starts a flow over `route` (channel ids; may be empty: then only `cap` bounds it, and an
  // empty uncapped route is an error) and re-solves its component.
  FlowId add_flow(std::span<const int> route, double cap = kUncapped, double weight = 1);
  FlowId add_flow(const std::vector<int>& route, double cap = kUncapped, double weight = 1) {
    return add_flow(std::span<const int>(route), cap, weight);
  }
  // Whether the last add_flow found its flow alone on every channel of its route (its component
  // itself, no other rate changed): true until a flow is added or removed.
  bool added_alone() const { return added_alone_; }
  // Gives an active flow a new weight (> 0) and re-solves its component if that can matter.
  void set_weight(FlowId flow, double weight);
  // Gives every active flow on a channel the same weight (> 0) and re-solves their component
  // once, where a set_weight per flow would solve it once per flow.
  void set_weight_on(int channel, double weight);
  double weight(FlowId flow) const { return flows_[static_cast<std::size_t>(flow)].weight; }
  // How many active flows cross a channel.
  std::size_t flows_on(int channel) const {
    return channels_[static_cast<std::size_t>(channel)].flows.size();
  }
  // The i-th active flow on a channel (in the order they started).
  FlowId flow_on(int channel, std::size_t i) const {
    return channels_[static_cast<std::size_t>(channel)].flows[i];
  }
  // Ends a flow and re-solves what was its component. Its id may be reused.
  void remove_flow(FlowId flow);
  // Sets a channel's capacity and re-solves its component; an error on a channel a lone flow
  // holds.
  void set_capacity(int channel, double capacity);

  // Lone flows. A flow alone on every channel of its route has the tightest capacity as its rate
  // for as long as no other flow uses one of those channels, so the caller may hold it outside
  // the solver: it reserves the route (no flow, no channel lists touched; at a thousand workers
  // nearly every message of a ring is one), and makes it a flow (release_alone, then add_flow,
  // which finds it alone and gives it the same rate) before anything else uses one of its
  // channels or changes its capacity: add_flow and set_capacity refuse a reserved channel.
  // Its rate counts in load(); it is not among flows_on().
  //
  // If no flow crosses any channel of `route` (not empty) and none is reserved: reserves them
  // and returns the lone flow's rate. Else reserves nothing and returns 0.
  double reserve_alone(std::span<const int> route);
  void release_alone(std::span<const int> route);
  bool reserved(int channel) const {
    return state_[static_cast<std::size_t>(channel)].lone_rate > 0;
  }

  double rate(FlowId flow) const { return flows_[static_cast<std::size_t>(flow)].rate; }
  // The channels a flow (active, or just removed) crosses.
  std::span<const int> route(FlowId id) const {
    const Flow& f = flows_[static_cast<std::size_t>(id)];
    if (f.length <= kInlineHops) return {f.hops.data(), f.length};
    return long_routes_[static_cast<std::size_t>(id)];
  }
  // What a channel carries now: the sum of its active flows' rates.
  double load(int channel) const;
  bool active(FlowId flow) const {
    return flow >= 0 && static_cast<std::size_t>(flow) < flows_.size() &&
           flows_[static_cast<std::size_t>(flow)].active;
  }
  // Flows whose rate the last add_flow / remove_flow / set_capacity changed, with their old rates
  // (a started flow included; an ended one not).
  const std::vector<RateChange>& changes() const { return changes_; }

  // Every active flow's max-min rate computed from scratch over the whole network (indexed by
  // flow id, 0 for inactive ids): the reference the incremental solution must equal.
  std::vector<double> full_solution() const;

  // How much work the solver did: components solved and flows in them, summed.
  std::uint64_t solves() const { return solves_; }
  std::uint64_t solved_flows() const { return solved_flows_; }

 private:
  // Laid out for a thousand-worker simulation, where every message starts and ends a flow and
  // each touch of a cold cache line costs more than the arithmetic: a flow keeps its route in
  // place, and a channel keeps its capacity, search mark and first few flows in one line.
  static constexpr std::size_t kInlineHops = 6;   // every route of a leaf-spine or fat tree
  static constexpr std::size_t kInlineFlows = 4;  // on one channel

  struct Flow {
    double cap = kUncapped;
    double weight = 1;
    double rate = 0;
    std::array<int, kInlineHops> hops{};  // the route, if it fits; else long_routes_[id]
    std::uint32_t length = 0;
    bool active = false;
  };

  // The active flows on a channel, in the order they started: the first kInlineFlows in place.
  class FlowList {
   public:
    std::size_t size() const { return count_; }
    FlowId operator[](std::size_t i) const {
      return i < kInlineFlows ? first_[i] : more_[i - kInlineFlows];
    }
    void push_back(FlowId id);
    void erase(FlowId id);  // keeps the others' order

   private:
    void set(std::size_t i, FlowId id) {
      (i < kInlineFlows ? first_[i] : more_[i - kInlineFlows]) = id;
    }
    std::array<FlowId, kInlineFlows> first_{};
    std::uint32_t count_ = 0;
    std::vector<FlowId> more_;
  };

  struct Channel {
    std::uint64_t mark = 0;  // epoch of the last component search that reached it
    FlowList flows;
  };
  // What a lone flow's start reads of each channel on its route, apart and dense (24 bytes, where
  // a Channel takes a cache line): a thousand workers' channels stay in cache.
  struct ChannelState {
    double capacity = 0;
    double lone_rate = 0;     // its lone flow's, 0 if none
    std::uint32_t flows = 0;  // active flows on it (flows.size() of its Channel)
  };

  // Re-solves the component(s) reached from these channels (and `extra_flow` if >= 0).
  void resolve_from(std::span<const int> seeds, FlowId extra_flow);
  // Progressive filling over `flows` (every active flow on `channels` is among them); writes
  // the rates into `out` (indexed by flow id).
  void fill(const std::vector<int>& channels, const std::vector<FlowId>& flows,
            std::vector<double>& out) const;

  std::vector<Channel> channels_;
  std::vector<ChannelState> state_;  // by channel
  std::vector<Flow> flows_;
  std::vector<std::vector<int>> long_routes_;  // by flow id, for routes over kInlineHops
  std::vector<FlowId> free_ids_;
  std::vector<RateChange> changes_;

  // Scratch for component searches (marks by epoch, so nothing is cleared between solves).
  std::vector<std::uint64_t> flow_mark_;
  std::uint64_t epoch_ = 0;
  std::vector<int> component_channels_;
  std::vector<FlowId> component_flows_;
  std::vector<double> new_rates_;
  // fill()'s working sets, kept between solves so the millions of small ones allocate nothing.
  struct Share {
    double remaining;  // capacity not yet given to frozen flows
    int unfrozen;      // flows on the channel still rising
    double weight;     // their weights, summed
    bool saturated;
  };
  struct FillScratch {
    std::vector<int> local_of_channel;  // channel id -> index in `shares` (valid for this fill)
    std::vector<Share> shares;
    std::vector<int> hops;  // each flow's route as local channel indices, flattened
    std::vector<std::size_t> first_hop;
    std::vector<std::size_t> unfrozen;
    std::vector<std::size_t> freezing;
  };
  mutable FillScratch scratch_;
  std::uint64_t solves_ = 0;
  std::uint64_t solved_flows_ = 0;
  bool added_alone_ = false;
};

}  // namespace kf
