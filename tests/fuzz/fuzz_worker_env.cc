// Fuzzes the worker-environment parser (launch/worker_env.h: worker_config_from), which decides
// a worker's identity from KUNGFU_*, torchrun's, Open MPI's or Slurm's variables. Input: lines
// "NAME=VALUE" (split at the first '='; a later line for the same name wins, as in a shell); the
// names that matter are in tests/fuzz/worker_env.dict.
//
// Contract checked (beyond no crash, no sanitizer report, no hang):
//   - a bad environment is refused with std::invalid_argument, and nothing else;
//   - an accepted one gives a valid cluster (ClusterSpec::problem() empty) whose every port is in
//     1..65535, this worker's rank within it, a known source, and the strategy when one is named;
//   - the cluster survives being told to a worker the way kfrun tells it (local_workers'
//     KUNGFU_* variables): that worker derives the same cluster and rank. Checked for clusters of
//     up to 64 workers, to keep runs short.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "launch/cluster_json.h"
#include "launch/launch_plan.h"
#include "launch/worker_env.h"
#include "tests/fuzz/fuzz_check.h"

namespace kf::fuzz {
namespace {

EnvMap env_of(std::string_view text) {
  EnvMap env;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    const std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 1);
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    env.insert_or_assign(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }
  return env;
}

void check_config(const EnvMap& env, const WorkerConfig& c) {
  const ClusterSpec& spec = c.cluster;
  const std::string where = "\ncluster: " + cluster_to_json(spec);
  KF_FUZZ_CHECK(!spec.problem(), "an accepted environment gives an invalid cluster: " +
                                     spec.problem().value_or("") + where);
  KF_FUZZ_CHECK(c.rank >= 0 && c.rank < spec.size(),
                "rank " + std::to_string(c.rank) + " is outside the cluster" + where);
  KF_FUZZ_CHECK(c.source == "kungfu" || c.source == "torchrun" || c.source == "mpi" ||
                    c.source == "slurm" || c.source == "single",
                "unknown source " + c.source);
  for (const auto* list : {&spec.workers(), &spec.runners()}) {
    for (const PeerID& p : *list)
      KF_FUZZ_CHECK(p.port != 0, "a peer on port 0: " + p.to_string() + where);
  }
  const auto strategy = env.find("KUNGFU_ALLREDUCE_STRATEGY");
  if (strategy != env.end() && !strategy->second.empty()) {
    KF_FUZZ_CHECK(c.strategy.has_value(), "a named strategy was dropped");
  }
  if (spec.size() > 64) return;
  const PeerID& self = spec.worker(c.rank);
  for (const auto& launch : local_workers(spec, self.host, "", "")) {
    if (launch.rank != c.rank) continue;
    WorkerConfig again;
    try {
      again = worker_config_from(launch.env);
    } catch (const std::invalid_argument& e) {
      broken("the environment kfrun would give this worker is refused: " + std::string(e.what()) +
             where);
    }
    KF_FUZZ_CHECK(again.cluster == spec && again.rank == c.rank,
                  "told in KUNGFU_* variables, the worker derives another cluster or rank" + where);
    return;
  }
  broken("kfrun would not launch this worker on its own host" + where);
}

}  // namespace
}  // namespace kf::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kf::fuzz;
  const kf::EnvMap env = env_of(std::string_view(reinterpret_cast<const char*>(data), size));
  kf::WorkerConfig c;
  try {
    c = kf::worker_config_from(env);
  } catch (const std::invalid_argument&) {
    return 0;  // refused, naming the variable
  } catch (const std::exception& e) {
    unexpected(e);
  }
  try {
    check_config(env, c);
  } catch (const std::exception& e) {
    unexpected(e);
  }
  return 0;
}
