#include "launch/launch_plan.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <stdexcept>

namespace kf {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

int to_int(std::string_view text, std::string_view what, int lo, int hi) {
  int v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    throw std::invalid_argument(
        fmt::format("{} '{}': expected an integer in [{}, {}]", what, text, lo, hi));
  }
  return v;
}

}  // namespace

// Hosts are IPv4 addresses, as kungfu-run takes them: a worker's peers connect to them as given.
void check_ip(std::string_view host, const std::string& where) {
  in_addr ignored{};
  if (::inet_pton(AF_INET, std::string(host).c_str(), &ignored) != 1) {
    throw std::invalid_argument(fmt::format(
        "{}: '{}' is not an IPv4 address (hosts are given by IP, as 10.0.0.1)", where, host));
  }
}

std::vector<HostSlots> parse_host_list(std::string_view text) {
  std::vector<HostSlots> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    if (item.empty()) continue;
    const auto colon = item.rfind(':');
    if (colon == std::string_view::npos) {
      out.push_back({std::string(item), 1});
    } else {
      out.push_back({std::string(item.substr(0, colon)),
                     to_int(item.substr(colon + 1), "-H slots", 1, 65535)});
    }
    if (out.back().ip.empty()) throw std::invalid_argument("-H: empty host");
    check_ip(out.back().ip, "-H");
  }
  if (out.empty()) throw std::invalid_argument("-H: no hosts");
  return out;
}

std::vector<HostSlots> parse_hostfile(std::string_view contents) {
  std::vector<HostSlots> out;
  int line_no = 0;
  while (!contents.empty()) {
    const auto nl = contents.find('\n');
    auto line = contents.substr(0, nl);
    contents = nl == std::string_view::npos ? std::string_view() : contents.substr(nl + 1);
    ++line_no;
    if (const auto hash = line.find('#'); hash != std::string_view::npos)
      line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    const auto space = line.find_first_of(" \t");
    HostSlots h{std::string(line.substr(0, space)), 1};
    check_ip(h.ip, fmt::format("hostfile line {}", line_no));
    if (space != std::string_view::npos) {
      const auto rest = trim(line.substr(space));
      if (!rest.starts_with("slots=")) {
        throw std::invalid_argument(
            fmt::format("hostfile line {}: expected 'IP slots=N', got '{}'", line_no, line));
      }
      h.slots = to_int(rest.substr(6), fmt::format("hostfile line {} slots", line_no), 1, 65535);
    }
    out.push_back(std::move(h));
  }
  if (out.empty()) throw std::invalid_argument("hostfile: no hosts");
  return out;
}

PortRange parse_port_range(std::string_view text) {
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) {
    throw std::invalid_argument(fmt::format("-port-range '{}': expected BEGIN-END", text));
  }
  PortRange r;
  r.begin = static_cast<std::uint16_t>(to_int(text.substr(0, dash), "-port-range begin", 1, 65535));
  r.end = static_cast<std::uint16_t>(to_int(text.substr(dash + 1), "-port-range end", 1, 65535));
  if (r.end < r.begin) throw std::invalid_argument(fmt::format("-port-range '{}' is empty", text));
  return r;
}

std::uint16_t runner_port_clear_of(std::uint16_t first, std::uint16_t last) {
  if (kDefaultRunnerPort < first || kDefaultRunnerPort > last) return kDefaultRunnerPort;
  if (last < 65535) return static_cast<std::uint16_t>(last + 1);
  if (first > 1) return static_cast<std::uint16_t>(first - 1);
  throw std::invalid_argument(
      fmt::format("-port-range {}-{} leaves no port for the runner: narrow it", first, last));
}

ClusterSpec plan_cluster(const std::vector<HostSlots>& hosts, int np, PortRange ports,
                         std::uint16_t runner_port) {
  if (np < 1) throw std::invalid_argument(fmt::format("-np {}: need at least 1", np));
  if (runner_port == 0) {
    runner_port = runner_port_clear_of(ports.begin, ports.end);
  } else if (runner_port >= ports.begin && runner_port <= ports.end) {
    throw std::invalid_argument(fmt::format("-runner-port {} is inside -port-range {}", runner_port,
                                            format_port_range(ports)));
  }
  std::vector<PeerID> workers;
  std::vector<PeerID> runners;
  // Every host gets a runner, also those the first np slots do not reach: an elastic job (-w)
  // may grow onto them (ClusterSpec::resized places new workers on runners only).
  for (const auto& h : hosts) {
    const PeerID runner{h.ip, runner_port};
    if (std::find(runners.begin(), runners.end(), runner) == runners.end()) {
      runners.push_back(runner);
    }
    if (static_cast<int>(workers.size()) == np) continue;
    if (h.slots > ports.end - ports.begin + 1) {
      throw std::invalid_argument(fmt::format("host {} has {} slots but -port-range holds {} ports",
                                              h.ip, h.slots, ports.end - ports.begin + 1));
    }
    for (int j = 0; j < h.slots && static_cast<int>(workers.size()) < np; ++j) {
      workers.push_back(PeerID{h.ip, static_cast<std::uint16_t>(ports.begin + j)});
    }
  }
  if (static_cast<int>(workers.size()) < np) {
    throw std::invalid_argument(
        fmt::format("-np {} but the hosts offer only {} slots", np, workers.size()));
  }
  ClusterSpec spec(0, std::move(runners), std::move(workers));
  if (const auto problem = spec.problem()) throw std::invalid_argument(*problem);
  return spec;
}

std::string interface_ip(const std::string& nic) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) throw std::invalid_argument("getifaddrs failed");
  std::string ip;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || nic != a->ifa_name) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    ip = buf;
    break;
  }
  ::freeifaddrs(list);
  if (ip.empty()) throw std::invalid_argument(fmt::format("-nic {}: no IPv4 address", nic));
  return ip;
}

std::string format_host_list(const std::vector<HostSlots>& hosts) {
  std::string out;
  for (const auto& h : hosts) {
    if (!out.empty()) out += ',';
    out += fmt::format("{}:{}", h.ip, h.slots);
  }
  return out;
}

std::string format_port_range(PortRange ports) {
  return fmt::format("{}-{}", ports.begin, ports.end);
}

std::string join_peers(const std::vector<PeerID>& ids) {
  std::string out;
  for (const auto& id : ids) {
    if (!out.empty()) out += ',';
    out += id.to_string();
  }
  return out;
}

std::vector<WorkerLaunch> local_workers(const ClusterSpec& cluster, const std::string& self,
                                        const std::string& strategy,
                                        const std::string& config_server) {
  std::vector<WorkerLaunch> out;
  const std::string peers = join_peers(cluster.workers());
  const std::string runners = join_peers(cluster.runners());
  // torchrun's variables too, so that a program written for torchrun (torch.distributed's env://
  // rendezvous) runs under kfrun unchanged: its store listens next to rank 0's worker ports.
  // Above the host's highest worker port, or below its lowest when that is 65535.
  const PeerID& first = cluster.worker(0);
  int highest = first.port, lowest = first.port;
  for (const PeerID& w : cluster.workers()) {
    if (w.host != first.host) continue;
    highest = std::max<int>(highest, w.port);
    lowest = std::min<int>(lowest, w.port);
  }
  if (highest == 65535 && lowest == 1) {
    throw std::invalid_argument(fmt::format(
        "host {}'s workers take ports 1 to 65535: no port is left for MASTER_PORT", first.host));
  }
  const auto store_port = static_cast<std::uint16_t>(highest < 65535 ? highest + 1 : lowest - 1);
  for (int r = 0; r < cluster.size(); ++r) {
    const PeerID& id = cluster.worker(r);
    if (id.host != self) continue;
    WorkerLaunch w;
    w.id = id;
    w.rank = r;
    w.env["RANK"] = std::to_string(r);
    w.env["WORLD_SIZE"] = std::to_string(cluster.size());
    w.env["LOCAL_RANK"] = std::to_string(cluster.local_rank(r));
    w.env["LOCAL_WORLD_SIZE"] = std::to_string(cluster.local_size(r));
    w.env["MASTER_ADDR"] = first.host;
    w.env["MASTER_PORT"] = std::to_string(store_port);
    w.env["KUNGFU_SELF_SPEC"] = id.to_string();
    w.env["KUNGFU_INIT_PEERS"] = peers;
    w.env["KUNGFU_INIT_RUNNERS"] = runners;
    w.env["KUNGFU_INIT_CLUSTER_VERSION"] = std::to_string(cluster.version());
    if (!strategy.empty()) w.env["KUNGFU_ALLREDUCE_STRATEGY"] = strategy;
    if (!config_server.empty()) w.env["KUNGFU_CONFIG_SERVER"] = config_server;
    out.push_back(std::move(w));
  }
  return out;
}

std::vector<WorkerLaunch> elastic_local_workers(const ClusterSpec& cluster, const std::string& self,
                                                const std::string& strategy,
                                                const std::string& config_server,
                                                const ElasticEnv& elastic, bool joining) {
  auto out = local_workers(cluster, self, strategy, config_server);
  const std::string yes = "1";  // (assigning "1" directly trips GCC 12's -Wrestrict)
  for (auto& w : out) {
    w.env["KUNGFU_ELASTIC"] = yes;
    w.env["KUNGFU_HOST_SLOTS"] = elastic.host_slots;
    w.env["KUNGFU_PORT_RANGE"] = elastic.port_range;
    if (joining) w.env["KUNGFU_JOINING"] = yes;
  }
  return out;
}

}  // namespace kf
