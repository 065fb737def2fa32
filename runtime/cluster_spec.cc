#include "runtime/cluster_spec.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "proto/cluster.pb.h"

namespace kf {

std::string PeerID::to_string() const {
  return host + ":" + std::to_string(port);
}

PeerID PeerID::parse(std::string_view text) {
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    throw std::invalid_argument("peer '" + std::string(text) + "': expected host:port");
  }
  const std::string_view port_text = text.substr(colon + 1);
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535) {
    throw std::invalid_argument("peer '" + std::string(text) + "': port must be 1..65535");
  }
  const std::string_view host = text.substr(0, colon);
  if (!valid_host(host)) {
    throw std::invalid_argument("peer '" + std::string(text) +
                                "': bad host (printable ASCII, no spaces or commas)");
  }
  return PeerID{std::string(host), static_cast<std::uint16_t>(port)};
}

bool PeerID::valid_host(std::string_view host) {
  return !host.empty() && std::all_of(host.begin(), host.end(),
                                      [](char c) { return c > ' ' && c < 0x7F && c != ','; });
}

ClusterSpec::ClusterSpec(std::uint64_t version, std::vector<PeerID> runners,
                         std::vector<PeerID> workers)
    : state_(std::make_shared<const State>(
          work_out(version, std::move(runners), std::move(workers)))) {}

const ClusterSpec::State& ClusterSpec::state() const {
  static const State empty = work_out(0, {}, {});
  return state_ ? *state_ : empty;
}

ClusterSpec ClusterSpec::local(int n, std::uint16_t base_port) {
  std::vector<PeerID> workers;
  for (int i = 0; i < n; ++i) {
    workers.push_back({"127.0.0.1", static_cast<std::uint16_t>(base_port + i)});
  }
  return ClusterSpec(0, {{"127.0.0.1", static_cast<std::uint16_t>(base_port - 1)}},
                     std::move(workers));
}

ClusterSpec ClusterSpec::resized(int n, std::uint16_t first_port, int max_per_host) const {
  if (n < 1)
    throw std::invalid_argument("resize: a cluster needs at least 1 worker, asked for " +
                                std::to_string(n));
  std::vector<PeerID> next = workers();
  if (n <= size()) {
    next.resize(static_cast<std::size_t>(n));
    return ClusterSpec(version(), runners(), std::move(next));
  }
  if (runners().empty()) throw std::invalid_argument("resize: no runners to start workers on");
  while (static_cast<int>(next.size()) < n) {
    const PeerID* best = nullptr;
    int best_count = 0;
    for (const auto& r : runners()) {
      const auto count = static_cast<int>(std::count_if(
          next.begin(), next.end(), [&](const PeerID& w) { return w.host == r.host; }));
      if (max_per_host > 0 && count >= max_per_host) continue;
      if (best == nullptr || count < best_count) {
        best = &r;
        best_count = count;
      }
    }
    if (best == nullptr) {
      throw std::invalid_argument("resize: no room for " + std::to_string(n) + " workers (" +
                                  std::to_string(runners().size()) + " runners x " +
                                  std::to_string(max_per_host) + " slots)");
    }
    std::uint16_t port = first_port;
    for (const auto& w : next)
      if (w.host == best->host && w.port >= port) port = static_cast<std::uint16_t>(w.port + 1);
    next.push_back({best->host, port});
  }
  return ClusterSpec(version(), runners(), std::move(next));
}

ClusterSpec ClusterSpec::from_proto(const proto::ClusterSpec& p) {
  auto convert = [](const auto& list) {
    std::vector<PeerID> out;
    for (const auto& id : list) {
      if (id.port() == 0 || id.port() > 65535) {
        throw std::invalid_argument("peer '" + id.host() + ":" + std::to_string(id.port()) +
                                    "': port must be 1..65535");
      }
      out.push_back({id.host(), static_cast<std::uint16_t>(id.port())});
    }
    return out;
  };
  return ClusterSpec(p.version(), convert(p.runners()), convert(p.workers()));
}

proto::ClusterSpec ClusterSpec::to_proto() const {
  proto::ClusterSpec p;
  p.set_version(version());
  for (const auto& r : runners()) {
    auto* id = p.add_runners();
    id->set_host(r.host);
    id->set_port(r.port);
  }
  for (const auto& w : workers()) {
    auto* id = p.add_workers();
    id->set_host(w.host);
    id->set_port(w.port);
  }
  return p;
}

std::optional<int> ClusterSpec::rank_of(const PeerID& id) const {
  const auto& all = workers();
  const auto it = std::find(all.begin(), all.end(), id);
  if (it == all.end()) return std::nullopt;
  return static_cast<int>(it - all.begin());
}

int ClusterSpec::local_rank(int rank) const {
  const auto& host = worker(rank).host;
  return static_cast<int>(std::count_if(workers().begin(), workers().begin() + rank,
                                        [&](const PeerID& w) { return w.host == host; }));
}

int ClusterSpec::local_size(int rank) const {
  const auto& host = worker(rank).host;
  return static_cast<int>(std::count_if(workers().begin(), workers().end(),
                                        [&](const PeerID& w) { return w.host == host; }));
}

ClusterSpec::State ClusterSpec::work_out(std::uint64_t version, std::vector<PeerID> runners,
                                         std::vector<PeerID> workers) {
  State out;
  out.version = version;
  std::map<std::string, int> host_index;
  out.host_of.reserve(workers.size());
  for (const auto& w : workers) {
    const auto [it, inserted] = host_index.try_emplace(w.host, static_cast<int>(host_index.size()));
    out.host_of.push_back(it->second);
  }
  out.host_count = static_cast<int>(host_index.size());
  out.problem = [&]() -> std::optional<std::string> {
    if (workers.empty()) return "no workers";
    // Every peer must be one a worker can be told about and reach (tests/fuzz found clusters
    // that were not: hosts with commas, a runner on port 0).
    for (const auto* list : {&workers, &runners}) {
      const std::string role = list == &workers ? "worker" : "runner";
      for (const auto& p : *list) {
        if (!PeerID::valid_host(p.host)) {
          return role + " '" + p.to_string() +
                 "' has a bad host (printable ASCII, no spaces or commas)";
        }
        if (p.port == 0) return role + " " + p.to_string() + " has port 0";
      }
    }
    std::set<PeerID> seen;
    for (const auto& w : workers) {
      if (!seen.insert(w).second) return "duplicate worker " + w.to_string();
    }
    if (runners.empty()) return std::nullopt;
    std::set<std::string> runner_hosts;
    for (const auto& r : runners) {
      if (!runner_hosts.insert(r.host).second) return "two runners on host " + r.host;
      if (seen.contains(r)) return "runner " + r.to_string() + " uses a worker's port";
    }
    for (const auto& w : workers) {
      if (!runner_hosts.contains(w.host)) {
        return "worker " + w.to_string() + " has no runner on its host";
      }
    }
    return std::nullopt;
  }();
  out.runners = std::move(runners);
  out.workers = std::move(workers);
  return out;
}

}  // namespace kf
