// FlowNetwork: the fluid model of a network. Channels (one direction of a link) have a capacity;
// flows follow a route of channels and may have a rate cap of their own; every active flow gets
// its max-min fair rate (progressive filling: raise every rate together, freeze the flows of a
// channel once it is full or a flow once it reaches its cap).
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

#include <cstdint>
#include <limits>
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
  int channels() const { return static_cast<int>(capacity_.size()); }
  double capacity(int channel) const { return capacity_[static_cast<std::size_t>(channel)]; }

  // Starts a flow over `route` (channel ids; may be empty: then only `cap` bounds it, and an
  // empty uncapped route is an error) and re-solves its component.
  FlowId add_flow(const std::vector<int>& route, double cap = kUncapped);
  // Ends a flow and re-solves what was its component. Its id may be reused.
  void remove_flow(FlowId flow);
  void set_capacity(int channel, double capacity);

  double rate(FlowId flow) const { return flows_[static_cast<std::size_t>(flow)].rate; }
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
  struct Flow {
    std::vector<int> route;
    double cap = kUncapped;
    double rate = 0;
    bool active = false;
  };

  // Re-solves the component(s) reached from these channels (and `extra_flow` if >= 0).
  void resolve_from(const std::vector<int>& seeds, FlowId extra_flow);
  // Progressive filling over `flows` (every active flow on `channels` is among them); writes
  // the rates into `out` (indexed by flow id).
  void fill(const std::vector<int>& channels, const std::vector<FlowId>& flows,
            std::vector<double>& out) const;

  std::vector<double> capacity_;
  std::vector<std::vector<FlowId>> on_channel_;  // active flows per channel
  std::vector<Flow> flows_;
  std::vector<FlowId> free_ids_;
  std::vector<RateChange> changes_;

  // Scratch for component searches (marks by epoch, so nothing is cleared between solves).
  std::vector<std::uint64_t> channel_mark_;
  std::vector<std::uint64_t> flow_mark_;
  std::uint64_t epoch_ = 0;
  std::vector<int> component_channels_;
  std::vector<FlowId> component_flows_;
  std::vector<double> new_rates_;
  // fill()'s working sets, kept between solves so the millions of small ones allocate nothing.
  struct Share {
    double remaining;  // capacity not yet given to frozen flows
    int unfrozen;      // flows on the channel still rising
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
};

}  // namespace kf
