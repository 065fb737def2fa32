#include "launch/worker_env.h"

#include "launch/launch_plan.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <array>
#include <cerrno>
#include <cstring>

#include <charconv>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <vector>

extern char** environ;  // NOLINT: POSIX

namespace kf {
namespace {

std::optional<std::string> get(const EnvMap& env, const std::string& key) {
  const auto it = env.find(key);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

long long number(const EnvMap& env, const std::string& key, long long lo, long long hi) {
  const std::string text = get(env, key).value_or("");
  long long v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    throw std::invalid_argument(
        fmt::format("{}='{}': expected an integer in [{}, {}]", key, text, lo, hi));
  }
  return v;
}

// The whole range of a std::uint64_t (a cluster version: the config server stores any).
std::uint64_t unsigned_number(const EnvMap& env, const std::string& key) {
  const std::string text = get(env, key).value_or("");
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw std::invalid_argument(fmt::format("{}='{}': expected an integer in [0, {}]", key, text,
                                            std::numeric_limits<std::uint64_t>::max()));
  }
  return v;
}

std::vector<std::string> split(std::string_view text) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const auto item = text.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::vector<PeerID> peer_list(const EnvMap& env, const std::string& key) {
  std::vector<PeerID> out;
  for (const auto& item : split(get(env, key).value_or(""))) {
    try {
      out.push_back(PeerID::parse(item));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(fmt::format("{}: {}", key, e.what()));
    }
  }
  return out;
}

std::optional<StrategyName> strategy_of(const EnvMap& env) {
  const auto text = get(env, "KUNGFU_ALLREDUCE_STRATEGY");
  if (!text) return std::nullopt;
  const auto s = parse_strategy_name(*text);
  if (!s)
    throw std::invalid_argument(fmt::format("KUNGFU_ALLREDUCE_STRATEGY='{}': unknown", *text));
  return s;
}

WorkerConfig from_kungfu(const EnvMap& env) {
  WorkerConfig c;
  c.source = "kungfu";
  const PeerID self = PeerID::parse(*get(env, "KUNGFU_SELF_SPEC"));
  auto workers = peer_list(env, "KUNGFU_INIT_PEERS");
  if (workers.empty()) workers.push_back(self);
  auto runners = peer_list(env, "KUNGFU_INIT_RUNNERS");
  // Any version the config server may hold (tests/fuzz found 2^62 and above refused here).
  const std::uint64_t version = get(env, "KUNGFU_INIT_CLUSTER_VERSION")
                                    ? unsigned_number(env, "KUNGFU_INIT_CLUSTER_VERSION")
                                    : 0;
  c.cluster = ClusterSpec(version, std::move(runners), std::move(workers));
  const auto rank = c.cluster.rank_of(self);
  if (!rank) {
    throw std::invalid_argument(
        fmt::format("KUNGFU_SELF_SPEC={} is not in KUNGFU_INIT_PEERS", self.to_string()));
  }
  c.rank = *rank;
  return c;
}

// torchrun, mpirun and srun all give (rank, size, local rank, local size): derive the peers.
WorkerConfig derived(const EnvMap& env, std::string source, const std::string& rank_key,
                     const std::string& size_key, const std::string& local_rank_key,
                     const std::string& local_size_key, std::string default_host,
                     long long base_port) {
  WorkerConfig c;
  c.source = std::move(source);
  const int size = static_cast<int>(number(env, size_key, 1, 1 << 20));
  const int rank = static_cast<int>(number(env, rank_key, 0, size - 1));
  const int local_size =
      get(env, local_size_key) ? static_cast<int>(number(env, local_size_key, 1, size)) : size;
  const int local_rank = get(env, local_rank_key)
                             ? static_cast<int>(number(env, local_rank_key, 0, local_size - 1))
                             : rank % local_size;
  if (rank % local_size != local_rank) {
    throw std::invalid_argument(fmt::format(
        "{}={} with {}={} is not a block placement ({} should be {}); set the KUNGFU_* variables",
        rank_key, rank, local_size_key, local_size, local_rank_key, rank % local_size));
  }
  if (get(env, "KUNGFU_PORT_BASE")) base_port = number(env, "KUNGFU_PORT_BASE", 1, 65535);
  if (base_port + local_size - 1 > 65535) {
    throw std::invalid_argument(fmt::format("ports {}+{} exceed 65535", base_port, local_size));
  }
  const int nodes = (size + local_size - 1) / local_size;
  std::vector<std::string> hosts = split(get(env, "KUNGFU_HOSTS").value_or(""));
  if (hosts.empty()) {
    if (nodes > 1) {
      throw std::invalid_argument(fmt::format(
          "{} ranks on {} nodes: set KUNGFU_HOSTS to the nodes' IPs in node order", size, nodes));
    }
    hosts.push_back(std::move(default_host));
  }
  if (static_cast<int>(hosts.size()) < nodes) {
    throw std::invalid_argument(
        fmt::format("KUNGFU_HOSTS names {} hosts, {} are needed", hosts.size(), nodes));
  }
  std::vector<PeerID> workers;
  std::vector<PeerID> runners;
  const std::uint16_t runner_port =
      runner_port_clear_of(static_cast<std::uint16_t>(base_port),
                           static_cast<std::uint16_t>(base_port + local_size - 1));
  for (int r = 0; r < size; ++r) {
    const auto& host = hosts[static_cast<std::size_t>(r / local_size)];
    workers.push_back(PeerID{host, static_cast<std::uint16_t>(base_port + r % local_size)});
    if (r % local_size == 0) runners.push_back(PeerID{host, runner_port});
  }
  c.cluster = ClusterSpec(0, std::move(runners), std::move(workers));
  c.rank = rank;
  return c;
}

}  // namespace

WorkerConfig worker_config_from(const EnvMap& env) {
  WorkerConfig c;
  if (get(env, "KUNGFU_SELF_SPEC")) {
    c = from_kungfu(env);
  } else if (get(env, "RANK") && get(env, "WORLD_SIZE")) {
    const long long master_port =
        get(env, "MASTER_PORT") ? number(env, "MASTER_PORT", 1, 65534) : 29500;
    c = derived(env, "torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                get(env, "MASTER_ADDR").value_or("127.0.0.1"), master_port + 1);
  } else if (get(env, "OMPI_COMM_WORLD_RANK") && get(env, "OMPI_COMM_WORLD_SIZE")) {
    c = derived(env, "mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "127.0.0.1", 10000);
  } else if (get(env, "SLURM_PROCID") && get(env, "SLURM_NTASKS")) {
    c = derived(env, "slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                "SLURM_NTASKS_PER_NODE", "127.0.0.1", 10000);
  } else {
    c.source = "single";
    c.cluster =
        ClusterSpec(0, {PeerID{"127.0.0.1", kDefaultRunnerPort}}, {PeerID{"127.0.0.1", 10000}});
    c.rank = 0;
  }
  if (const auto problem = c.cluster.problem()) {
    throw std::invalid_argument(fmt::format("{} environment: {}", c.source, *problem));
  }
  c.strategy = strategy_of(env);
  c.config_server = get(env, "KUNGFU_CONFIG_SERVER").value_or("");
  return c;
}

EnvMap current_environment() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

std::string random_secret() {
  std::array<unsigned char, 16> bytes{};
  std::size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(fmt::format("getrandom: {}", std::strerror(errno)));
    }
    got += static_cast<std::size_t>(n);
  }
  std::string hex;
  for (const unsigned char b : bytes)
    hex += fmt::format("{:02x}", b);
  return hex;
}

}  // namespace kf
