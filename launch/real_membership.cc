#include "launch/real_membership.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace kf {

std::optional<RealMembershipOptions> elastic_membership_options(
    const EnvMap& env, const WorkerConfig& config, const SocketTransportOptions& transport) {
  const auto value = [&env](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  if (value("KUNGFU_ELASTIC") != "1") return std::nullopt;
  if (config.config_server.empty())
    throw std::invalid_argument("KUNGFU_ELASTIC=1 but no KUNGFU_CONFIG_SERVER");
  RealMembershipOptions m{
      .config_server = config.config_server, .token = transport.secret, .transport = transport};
  const std::string slots = value("KUNGFU_HOST_SLOTS");
  if (!slots.empty()) m.hosts = parse_host_list(slots);
  if (m.hosts.empty())
    m.hosts.push_back({config.cluster.worker(config.rank).host, config.cluster.size()});
  const std::string ports = value("KUNGFU_PORT_RANGE");
  if (!ports.empty()) m.first_port = parse_port_range(ports).begin;
  return m;
}

RealMembership::RealMembership(EpollLoop& loop, RealMembershipOptions options)
    : loop_(loop), options_(std::move(options)), client_(options_.config_server, options_.token) {}

RealMembership::~RealMembership() {
  *alive_ = false;
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(threads_mutex_);
    threads.swap(threads_);
  }
  for (auto& t : threads)
    t.join();  // each is bounded by the client's timeout
  transport_.reset();
}

int RealMembership::capacity() const {
  return std::accumulate(options_.hosts.begin(), options_.hosts.end(), 0,
                         [](int n, const HostSlots& h) { return n + h.slots; });
}

ClusterSpec RealMembership::propose(const ClusterSpec& current, int workers) const {
  int max_slots = 0;
  for (const auto& h : options_.hosts)
    max_slots = std::max(max_slots, h.slots);
  if (workers > capacity()) {
    throw std::invalid_argument(fmt::format("resize to {} workers: the hosts hold {} ({})", workers,
                                            capacity(), options_.hosts.size()));
  }
  return current.resized(workers, options_.first_port, max_slots);
}

void RealMembership::request(std::function<ClusterSpec()> call, ClusterCallback done) {
  std::lock_guard lock(threads_mutex_);
  threads_.emplace_back([this, alive = alive_, call = std::move(call), done = std::move(done)] {
    Status status;
    ClusterSpec spec;
    try {
      spec = call();
    } catch (const ConfigServerUnreachable& e) {
      status = Status(ErrorCode::unavailable, e.what());
    } catch (const std::exception& e) {
      status = Status(ErrorCode::invalid_argument, e.what());
    }
    loop_.post([alive, done, status, spec] {
      if (*alive) done(status, spec);
    });
  });
}

void RealMembership::put(const ClusterSpec& proposal, ClusterCallback done) {
  request([this, proposal] { return client_.put(proposal); }, std::move(done));
}

void RealMembership::get(ClusterCallback done) {
  request(
      [this] {
        auto spec = client_.get();
        if (!spec) throw std::runtime_error("config server " + client_.url() + " holds no cluster");
        return *spec;
      },
      std::move(done));
}

void RealMembership::update_runners(const ClusterSpec& /*next*/, std::int64_t /*step*/) {
  // kfrun -w polls the config server: the PUT already told the runners.
}

Transport& RealMembership::transport(const ClusterSpec& cluster, int rank) {
  transport_ = std::make_unique<SocketTransport>(loop_, cluster, rank, options_.transport);
  if (cluster.size() > 1) transport_->start();
  return *transport_;
}

void RealMembership::reconnect(const ClusterSpec& next, int rank,
                               std::function<void(Transport&)> ready) {
  leave([this, next, rank, ready = std::move(ready)] { ready(transport(next, rank)); });
}

void RealMembership::leave(std::function<void()> done) {
  if (!transport_) {
    done();
    return;
  }
  transport_->shutdown(options_.close_limit, [this, alive = alive_, done = std::move(done)] {
    if (!*alive) return;
    // Not from inside the transport's own callback: destroy it from a fresh task.
    loop_.post([this, alive, done] {
      if (!*alive) return;
      transport_.reset();
      done();
    });
  });
}

}  // namespace kf
