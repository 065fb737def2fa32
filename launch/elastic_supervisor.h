// Elastic supervision (kfrun -w): the runner side of KungFu's resize protocol. Rank 0 PUTs a
// resized ClusterSpec to the config server, which bumps its version; every worker GETs it and
// agrees. The runner on each host polls GET too and, on a newer version, starts the workers of
// the new cluster that live on its host and are not running (with KUNGFU_JOINING=1 and the new
// cluster in their KUNGFU_INIT_*). Workers the new cluster dropped exit by themselves with code 0
// ("detached"); one still running SupervisorOptions::detach_timeout after the version that
// dropped it is stopped (SIGTERM, then SIGKILL after the grace). The process side (output,
// signals, failures, -timeout) is supervisor.h's WorkerPool.
#pragma once

#include <chrono>
#include <string>

#include "launch/config_client.h"
#include "launch/launch_plan.h"
#include "launch/supervisor.h"
#include "runtime/cluster_spec.h"

namespace kf {

struct ElasticOptions {
  std::string self;           // this runner's IP (-self / -nic)
  std::string strategy;       // -strategy; empty: the engine's default
  std::string config_server;  // the URL polled and given to the workers
  std::string token;          // KUNGFU_SECRET: the config server's bearer token
  ElasticEnv env;             // KUNGFU_HOST_SLOTS / KUNGFU_PORT_RANGE
  std::chrono::milliseconds poll_interval{100};
  std::chrono::milliseconds request_timeout{1000};  // per GET
  // A runner that must decide whether the job is over and cannot reach the server for this long
  // decides on the last cluster it saw.
  std::chrono::milliseconds server_lost_after{10000};
};

// -config-server URL with no builtin server: the cluster to start from. GETs the stored one;
// when none is stored (404) stores `planned` with POST (reset), so the first runner initialises
// it. Retries a failing server for `patience`, then throws std::runtime_error.
ClusterSpec initial_cluster(const ConfigClient& client, const ClusterSpec& planned,
                            std::chrono::milliseconds patience);

// Starts the workers of `initial` on this host (KUNGFU_JOINING=1 when its version is above 0:
// the job is already running) and follows the config server. Returns kfrun's exit code:
//   - a failing worker's code as supervise() picks it (non-zero exit, or 128 + signal), 124 on
//     -timeout, 128 + signal when kfrun was signalled, after stopping the others (a worker
//     stopped for overstaying its drop is not a failure);
//   - 0 once no local worker runs and a fresh GET shows no newer version and every worker of the
//     latest cluster on this host has run and exited 0;
//   - a runner with no worker in the latest cluster (it never had one, or a shrink dropped them
//     all) keeps watching (growth may bring one back) until a version gives it one, the config
//     is cleared (GET 404), or the server is lost: then 0.
int supervise_elastic(const ClusterSpec& initial, const ElasticOptions& elastic,
                      const SupervisorOptions& options);

}  // namespace kf
