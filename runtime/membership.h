// Elastic membership: what a worker needs from its world to change the cluster, and the resize
// protocol every worker runs (KungFu's): rank 0 proposes the new ClusterSpec to the config
// service, which bumps its version; every worker learns that version (allreduce-max), reads the
// spec back, and all check by consensus that they read the same one; rank 0 then tells the
// runners, which start the new workers and stop the removed ones. Survivors rebuild their engine
// (and, in the real world, their connections) for the new version, then sync state.
//
// The world implements Membership: an HTTP config server and kfrun runners in the real world, an
// in-simulation service and runners in kfsim.
#pragma once

#include <cstdint>
#include <functional>

#include "runtime/cluster_spec.h"
#include "runtime/engine.h"
#include "runtime/status.h"
#include "runtime/transport.h"

namespace kf {

using ClusterCallback = std::function<void(Status, ClusterSpec)>;

class Membership {
 public:
  virtual ~Membership() = default;
  // The most workers the world can hold.
  virtual int capacity() const = 0;
  // The proposal for `workers` workers (ClusterSpec::resized with the world's ports and slots).
  virtual ClusterSpec propose(const ClusterSpec& current, int workers) const = 0;
  // Config service: store a proposal (its version bumped; the stored spec comes back) / read it.
  virtual void put(const ClusterSpec& proposal, ClusterCallback done) = 0;
  virtual void get(ClusterCallback done) = 0;
  // Runners: from step `step` on, `next` is the cluster: start the workers it adds, stop the ones
  // it drops.
  virtual void update_runners(const ClusterSpec& next, std::int64_t step) = 0;
  // The transport this worker (rank `rank` of `cluster`) uses in that cluster, at start-up.
  virtual Transport& transport(const ClusterSpec& cluster, int rank) = 0;
  // After a resize: let go of the old cluster's transport (the real world closes its
  // connections in order, so nothing queued is lost) and hand over the one for `next`, on the
  // worker's executor. Nothing of the old engine may be alive when this is called.
  virtual void reconnect(const ClusterSpec& next, int rank,
                         std::function<void(Transport&)> ready) = 0;
  // A detached worker leaves: close the old cluster's connections in order, then `done`.
  virtual void leave(std::function<void()> done) = 0;
};

// Runs the resize protocol on this worker; every worker of the current cluster calls it at the
// same step. `done` gets the agreed new cluster. Collective names carry the current version.
void resize_cluster(Engine& engine, Membership& membership, int workers, std::int64_t next_step,
                    ClusterCallback done);

// The same protocol for a cluster someone else proposed (an operator, a controller, another job:
// upstream KungFu's propose_new_size then resize_cluster_from_url): rank 0 reads the config
// service's version instead of writing one. When the service holds nothing newer than the
// engine's cluster, every worker gets the current cluster back, unchanged.
void adopt_cluster(Engine& engine, Membership& membership, std::int64_t next_step,
                   ClusterCallback done);

}  // namespace kf
