// The real world's Membership: the config server over HTTP, kfrun -w runners, and one
// SocketTransport per cluster version. Config requests run on their own threads (an HTTP call
// must not stall the event loop) and complete on the loop. Runners need no message: they watch
// the config server and start the workers a new version adds. A resize closes the old version's
// connections in order (a "bye" on each, queues flushed) before listening again with the new
// version in the handshake, so a peer still on the old version is refused and retried, never
// mixed up.
#pragma once

#include <algorithm>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launch/config_client.h"
#include "launch/launch_plan.h"
#include "launch/worker_env.h"
#include "real/epoll_loop.h"
#include "real/socket_transport.h"
#include "runtime/membership.h"

namespace kf {

struct RealMembershipOptions {
  std::string config_server;  // KUNGFU_CONFIG_SERVER
  std::string token;          // KUNGFU_SECRET
  SocketTransportOptions transport;
  std::vector<HostSlots> hosts;                     // KUNGFU_HOST_SLOTS: where workers may run
  std::uint16_t first_port = 10000;                 // KUNGFU_PORT_RANGE's begin
  Duration close_limit = std::chrono::seconds(10);  // an orderly close waits at most this long
};

// The membership options of a worker started by `kfrun -w` (KUNGFU_ELASTIC=1), from its
// environment: the config server, the secret, KUNGFU_HOST_SLOTS (default: the worker's host with
// the cluster's size) and KUNGFU_PORT_RANGE's begin. nullopt when the worker is not elastic;
// throws std::invalid_argument when KUNGFU_ELASTIC=1 comes without KUNGFU_CONFIG_SERVER.
std::optional<RealMembershipOptions> elastic_membership_options(
    const EnvMap& env, const WorkerConfig& config, const SocketTransportOptions& transport);

class RealMembership final : public Membership {
 public:
  // Construct, use and destroy on `loop`'s thread.
  RealMembership(EpollLoop& loop, RealMembershipOptions options);
  ~RealMembership() override;

  int capacity() const override;
  ClusterSpec propose(const ClusterSpec& current, int workers) const override;
  void put(const ClusterSpec& proposal, ClusterCallback done) override;
  void get(ClusterCallback done) override;
  void update_runners(const ClusterSpec& next, std::int64_t step) override;
  Transport& transport(const ClusterSpec& cluster, int rank) override;
  void reconnect(const ClusterSpec& next, int rank, std::function<void(Transport&)> ready) override;
  void leave(std::function<void()> done) override;
  // Later orderly closes wait at most `limit` (a failed job need not wait for silent peers).
  void limit_close(Duration limit) { options_.close_limit = std::min(options_.close_limit, limit); }

  // The transport of the current version (none before transport() or after leave()).
  SocketTransport* current() const { return transport_.get(); }

 private:
  // Runs `call` on a thread of its own and `done` with its outcome on the loop.
  void request(std::function<ClusterSpec()> call, ClusterCallback done);

  EpollLoop& loop_;
  RealMembershipOptions options_;
  ConfigClient client_;
  std::unique_ptr<SocketTransport> transport_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  std::mutex threads_mutex_;
  std::vector<std::thread> threads_;
};

}  // namespace kf
