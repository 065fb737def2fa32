// Elastic membership inside the simulation: the config service and the runners of the real world,
// as simulated processes. PUT / GET take `config_latency` of simulated time; a runner takes
// `spawn_delay` to start a worker. Workers live on fixed slots (the topology's worker nodes), but
// ranks change with the cluster, so every slot's transport maps ranks to slots by the cluster
// version each message carries: a message sent in version v reaches the right engine even while
// its receiver is still on version v - 1.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "runtime/executor.h"
#include "runtime/membership.h"

namespace kf {

class SimWorld;

struct SimMembershipOptions {
  std::chrono::nanoseconds config_latency = std::chrono::milliseconds(1);
  std::chrono::nanoseconds spawn_delay = std::chrono::seconds(1);
  std::uint16_t first_port = 10000;
  int slots_per_host = 1;
};

class SimMembership final : public Membership {
 public:
  // `slots[i]` is the PeerID of the worker on slot i (host name + port); `initial` the starting
  // cluster. `spawn(cluster, rank, slot)` is called for every member of a new cluster once the
  // runners have had time to start processes; the simulation starts the ones not running.
  using Spawn = std::function<void(const ClusterSpec& cluster, int rank, int slot)>;
  SimMembership(SimWorld& world, std::vector<PeerID> slots, ClusterSpec initial,
                SimMembershipOptions options, Spawn spawn);
  ~SimMembership() override;

  int capacity() const override { return static_cast<int>(slots_.size()); }
  ClusterSpec propose(const ClusterSpec& current, int workers) const override;
  void put(const ClusterSpec& proposal, ClusterCallback done) override;
  void get(ClusterCallback done) override;
  void update_runners(const ClusterSpec& next, std::int64_t step) override;
  Transport& transport(const ClusterSpec& cluster, int rank) override;
  // Simulated connections need no closing: both are immediate (on the executor).
  void reconnect(const ClusterSpec& next, int rank, std::function<void(Transport&)> ready) override;
  void leave(std::function<void()> done) override;

  const ClusterSpec& stored() const { return stored_; }
  int slot_of(const PeerID& id) const;

 private:
  class SlotTransport;
  struct Layout {
    std::vector<PeerID> workers;  // of the cluster learnt
    std::vector<int> slot_of_rank;
    std::vector<int> rank_of_slot;  // -1: the slot is not a member
    int rank_of(int slot) const {
      return slot >= 0 && static_cast<std::size_t>(slot) < rank_of_slot.size()
                 ? rank_of_slot[static_cast<std::size_t>(slot)]
                 : -1;
    }
  };
  const Layout* layout(std::uint64_t version) const;
  void learn(const ClusterSpec& cluster);

  SimWorld& world_;
  std::vector<PeerID> slots_;
  std::map<PeerID, int> slot_index_;  // slots_ inverted
  ClusterSpec stored_;
  SimMembershipOptions options_;
  Spawn spawn_;
  std::map<std::uint64_t, Layout> layouts_;  // by cluster version; never erased, so a pointer
                                             // to one stays valid (learn() refills in place)
  mutable std::uint64_t last_version_ = 0;
  mutable const Layout* last_layout_ = nullptr;
  std::vector<std::unique_ptr<SlotTransport>> transports_;
};

}  // namespace kf
