// Cluster membership: a versioned list of workers (rank = index) and runners (one launcher per
// host). Every peer derives its rank, local rank and the host layout strategies need from it.
#pragma once

#include <compare>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kf {

namespace proto {
class ClusterSpec;
}

struct PeerID {
  std::string host;
  std::uint16_t port = 0;

  std::string to_string() const;  // "10.0.0.1:10000"
  // Parses "host:port"; throws std::invalid_argument naming the text on a bad form, host or port.
  static PeerID parse(std::string_view text);
  // A host is an IPv4 address or a host name: non-empty printable ASCII with no space and no
  // comma, since peers travel as text, "host:port,host:port" (KUNGFU_INIT_PEERS, -H), and must
  // come back the same (tests/fuzz found clusters that did not).
  static bool valid_host(std::string_view host);
  auto operator<=>(const PeerID&) const = default;
};

class ClusterSpec {
 public:
  ClusterSpec() = default;
  ClusterSpec(std::uint64_t version, std::vector<PeerID> runners, std::vector<PeerID> workers);

  // n workers on one host (127.0.0.1, ports base_port + i) and its runner: handy for tests and the
  // in-process world.
  static ClusterSpec local(int n, std::uint16_t base_port = 10000);

  static ClusterSpec from_proto(const proto::ClusterSpec& p);
  proto::ClusterSpec to_proto() const;

  std::uint64_t version() const { return state().version; }
  const std::vector<PeerID>& runners() const { return state().runners; }
  const std::vector<PeerID>& workers() const { return state().workers; }
  int size() const { return static_cast<int>(workers().size()); }
  const PeerID& worker(int rank) const { return workers().at(static_cast<std::size_t>(rank)); }

  // KungFu's resize proposal. Shrinking drops the last workers; growing adds each new worker to
  // the runner with the fewest workers (the first such in runner order), on the port after that
  // host's highest, or `first_port` on a host with none, so survivors keep their ranks. At most
  // `max_per_host` workers per host (0: no limit). The version is kept: the config server bumps
  // it. Throws std::invalid_argument for n < 1 or when the runners have no room.
  ClusterSpec resized(int n, std::uint16_t first_port, int max_per_host = 0) const;

  std::optional<int> rank_of(const PeerID& id) const;
  int local_rank(int rank) const;  // index among the workers on the same host
  int local_size(int rank) const;  // workers on the same host
  // host_of()[r] = host index of rank r, hosts numbered by first appearance.
  const std::vector<int>& host_of() const { return state().host_of; }
  int host_count() const { return state().host_count; }

  // Empty when valid, else the first problem found ("duplicate worker 10.0.0.1:10000", "worker
  // 10.0.0.2:10000 has no runner on its host", "two runners on host 10.0.0.1", "no workers",
  // "worker 'a,b:1' has a bad host ...": see PeerID::valid_host, "runner 10.0.0.1:0 has port 0").
  // Runners are checked only when there are any (the in-process world has none).
  const std::optional<std::string>& problem() const { return state().problem; }

  bool operator==(const ClusterSpec& other) const {
    return version() == other.version() && runners() == other.runners() &&
           workers() == other.workers();
  }

 private:
  // A spec never changes once built, so its copies share one state: every engine of a simulated
  // cluster holds the cluster, and n private copies of n workers cost O(n^2) memory (670 MB at
  // 4,096 workers). The host layout and the problem are worked out once, when it is built: each
  // engine checking its own copy cost O(n^2 log n) string comparisons.
  struct State {
    std::uint64_t version = 0;
    std::vector<PeerID> runners;
    std::vector<PeerID> workers;
    std::vector<int> host_of;
    int host_count = 0;
    std::optional<std::string> problem;
  };
  static State work_out(std::uint64_t version, std::vector<PeerID> runners,
                        std::vector<PeerID> workers);
  const State& state() const;

  std::shared_ptr<const State> state_;  // null only for a default-constructed spec
};

}  // namespace kf
