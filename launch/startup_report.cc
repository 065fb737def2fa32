#include "launch/startup_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace kf {
namespace {

std::string whoami(const ClusterSpec& cluster, int self_rank) {
  return fmt::format("rank {} ({})", self_rank, cluster.worker(self_rank).to_string());
}

std::string seconds(std::chrono::milliseconds d) {
  return fmt::format("{:.0f} s", std::chrono::duration<double>(d).count());
}

}  // namespace

std::string describe_unconnected(const ClusterSpec& cluster, int self_rank,
                                 const std::vector<int>& missing) {
  std::vector<std::pair<std::string, std::string>> hosts;  // host, its ranks; first-seen order
  std::vector<int> ranks = missing;
  std::sort(ranks.begin(), ranks.end());
  for (const int r : ranks) {
    const PeerID& id = cluster.worker(r);
    auto it = std::find_if(hosts.begin(), hosts.end(),
                           [&id](const auto& h) { return h.first == id.host; });
    if (it == hosts.end()) it = hosts.insert(hosts.end(), {id.host, ""});
    it->second += fmt::format("{}rank {} :{}", it->second.empty() ? "" : ", ", r, id.port);
  }
  std::string list;
  for (const auto& [host, what] : hosts)
    list += fmt::format("{}{} ({})", list.empty() ? "" : ", ", host, what);
  const int others = cluster.size() - (self_rank >= 0 && self_rank < cluster.size() ? 1 : 0);
  return fmt::format("{} of {} peers not connected yet, from {} host{}: {}", ranks.size(), others,
                     hosts.size(), hosts.size() == 1 ? "" : "s", list);
}

std::string waiting_line(const ClusterSpec& cluster, int self_rank, const std::vector<int>& missing,
                         std::chrono::milliseconds waited) {
  return fmt::format("{} waiting {}: {}", whoami(cluster, self_rank), seconds(waited),
                     describe_unconnected(cluster, self_rank, missing));
}

std::string gave_up_line(const ClusterSpec& cluster, int self_rank, const std::vector<int>& missing,
                         std::chrono::milliseconds waited) {
  return fmt::format(
      "{} gave up after {}: {} (are the runners on those hosts started, with the same -H, -np "
      "and -port-range?)",
      whoami(cluster, self_rank), seconds(waited),
      describe_unconnected(cluster, self_rank, missing));
}

}  // namespace kf
