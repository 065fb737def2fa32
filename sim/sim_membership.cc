#include "sim/sim_membership.h"

#include <fmt/format.h>

#include <stdexcept>

#include "sim/sim_world.h"

namespace kf {

// One slot's view of the network in ranks. Messages name their cluster version; the rank <->
// slot mapping of that version translates them both ways.
class SimMembership::SlotTransport final : public Transport {
 public:
  SlotTransport(SimMembership& owner, int slot)
      : owner_(owner), slot_(slot), inner_(owner.world_.transport(slot)) {}

  void set_handlers(Handlers handlers) override {
    handlers_ = std::move(handlers);
    if (!handlers_.on_message && !handlers_.on_peer_lost) {
      inner_.set_handlers({});  // parked until the next engine listens
      return;
    }
    inner_.set_handlers({
        .on_message =
            [this](int source_slot, Message&& m) {
              const Layout* l = owner_.layout(m.header.cluster_version);
              if (l == nullptr) return;
              const int rank = l->rank_of(source_slot);
              if (rank < 0) return;  // not a member of that version
              if (handlers_.on_message) handlers_.on_message(rank, std::move(m));
            },
        .on_peer_lost =
            [this](int peer_slot, Status why) {
              const Layout* l = owner_.layout(version_);
              if (l == nullptr) return;
              const int rank = l->rank_of(peer_slot);
              if (rank >= 0 && handlers_.on_peer_lost) handlers_.on_peer_lost(rank, std::move(why));
            },
    });
  }

  void send(int destination, Message&& message) override {
    const Layout* l = owner_.layout(message.header.cluster_version);
    if (l == nullptr || destination < 0 ||
        static_cast<std::size_t>(destination) >= l->slot_of_rank.size()) {
      throw std::logic_error(fmt::format("slot {}: no rank {} in cluster version {}", slot_,
                                         destination, message.header.cluster_version));
    }
    inner_.send(l->slot_of_rank[static_cast<std::size_t>(destination)], std::move(message));
  }

  std::uint64_t version_ = 0;  // of the engine listening now

 private:
  SimMembership& owner_;
  int slot_;
  Transport& inner_;  // the world's, for this slot
  Handlers handlers_;
};

SimMembership::SimMembership(SimWorld& world, std::vector<PeerID> slots, ClusterSpec initial,
                             SimMembershipOptions options, Spawn spawn)
    : world_(world),
      slots_(std::move(slots)),
      stored_(std::move(initial)),
      options_(options),
      spawn_(std::move(spawn)) {
  for (int s = 0; s < capacity(); ++s) {
    slot_index_.emplace(slots_[static_cast<std::size_t>(s)], s);
    transports_.push_back(std::make_unique<SlotTransport>(*this, s));
  }
  learn(stored_);
}

SimMembership::~SimMembership() = default;

int SimMembership::slot_of(const PeerID& id) const {
  if (const auto it = slot_index_.find(id); it != slot_index_.end()) return it->second;
  throw std::invalid_argument("no worker slot " + id.to_string() + " in the topology");
}

void SimMembership::learn(const ClusterSpec& cluster) {
  // Every worker's transport asks with the cluster it starts in: learn it once, not n times.
  if (const Layout* known = layout(cluster.version());
      known != nullptr && known->workers == cluster.workers())
    return;
  Layout l;
  l.workers = cluster.workers();
  l.rank_of_slot.assign(slots_.size(), -1);
  for (int r = 0; r < cluster.size(); ++r) {
    const int slot = slot_of(cluster.worker(r));
    l.slot_of_rank.push_back(slot);
    l.rank_of_slot[static_cast<std::size_t>(slot)] = r;
  }
  layouts_[cluster.version()] = std::move(l);
}

const SimMembership::Layout* SimMembership::layout(std::uint64_t version) const {
  // Every message asks, nearly always for the version asked for last.
  if (last_layout_ != nullptr && last_version_ == version) return last_layout_;
  const auto it = layouts_.find(version);
  if (it == layouts_.end()) return nullptr;
  last_version_ = version;
  return last_layout_ = &it->second;
}

ClusterSpec SimMembership::propose(const ClusterSpec& current, int workers) const {
  return current.resized(workers, options_.first_port, options_.slots_per_host);
}

void SimMembership::put(const ClusterSpec& proposal, ClusterCallback done) {
  world_.executor().post_after(options_.config_latency, [this, proposal, done] {
    if (const auto problem = proposal.problem()) {
      done(Status(ErrorCode::invalid_argument, "config service: " + *problem), {});
      return;
    }
    for (const auto& w : proposal.workers()) {
      try {
        (void)slot_of(w);
      } catch (const std::invalid_argument& e) {
        done(Status(ErrorCode::invalid_argument, std::string("config service: ") + e.what()), {});
        return;
      }
    }
    stored_ = ClusterSpec(stored_.version() + 1, proposal.runners(), proposal.workers());
    learn(stored_);
    done(Status{}, stored_);
  });
}

void SimMembership::get(ClusterCallback done) {
  world_.executor().post_after(options_.config_latency, [this, done] { done(Status{}, stored_); });
}

void SimMembership::update_runners(const ClusterSpec& next, std::int64_t /*step*/) {
  // Workers that `next` drops detach by themselves (they see they are not in it). The runners
  // are told about every member after a process start-up time; the simulation starts the ones
  // not already running.
  world_.executor().post_after(options_.spawn_delay, [this, next] {
    for (int r = 0; r < next.size(); ++r)
      spawn_(next, r, slot_of(next.worker(r)));
  });
}

Transport& SimMembership::transport(const ClusterSpec& cluster, int rank) {
  learn(cluster);
  const int slot = slot_of(cluster.worker(rank));
  auto& t = *transports_[static_cast<std::size_t>(slot)];
  t.version_ = cluster.version();
  return t;
}

void SimMembership::reconnect(const ClusterSpec& next, int rank,
                              std::function<void(Transport&)> ready) {
  ready(transport(next, rank));
}

void SimMembership::leave(std::function<void()> done) {
  done();
}

}  // namespace kf
