// Who am I? A worker's identity from its environment, as a pure function of the variables so it
// can be tested. In order of precedence:
//   1. kfrun's KUNGFU_SELF_SPEC / KUNGFU_INIT_PEERS / KUNGFU_INIT_RUNNERS /
//      KUNGFU_INIT_CLUSTER_VERSION / KUNGFU_ALLREDUCE_STRATEGY / KUNGFU_CONFIG_SERVER;
//   2. torchrun's RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT;
//   3. Open MPI's OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE;
//   4. Slurm's SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE;
//   5. otherwise a single peer.
// For 2-4 the peer list is derived: ranks are placed in blocks of local_size per node (the
// launchers' default), node i being KUNGFU_HOSTS[i] (comma-separated IPs, one per node; default:
// everyone on MASTER_ADDR, or 127.0.0.1), and a worker with local rank j listens on port
// base + j, where base = MASTER_PORT + 1 (torchrun) or KUNGFU_PORT_BASE (default 10000).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "runtime/cluster_spec.h"
#include "runtime/time.h"
#include "topology/strategy.h"

namespace kf {

using EnvMap = std::map<std::string, std::string>;

struct WorkerConfig {
  ClusterSpec cluster;
  int rank = 0;
  std::optional<StrategyName> strategy;  // unset: the engine's default
  std::string config_server;
  std::string source;  // "kungfu", "torchrun", "mpi", "slurm" or "single"
};

// Throws std::invalid_argument naming the variable at fault.
WorkerConfig worker_config_from(const EnvMap& env);
EnvMap current_environment();

inline constexpr std::uint16_t kDefaultRunnerPort = 38080;

// A fresh job secret for KUNGFU_SECRET: 32 hex digits from the kernel's random source.
std::string random_secret();

}  // namespace kf
