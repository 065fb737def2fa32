// Fuzzes what the config server does with the body of a PUT or POST /config
// (launch/cluster_json.h: valid_cluster_from_json, i.e. cluster_from_json, the Protobuf JSON
// mapping of kf.proto.ClusterSpec, then ClusterSpec::problem()). Input: the body.
//
// Contract checked (beyond no crash, no sanitizer report):
//   - a bad body is refused with std::invalid_argument, and nothing else (the server turns it into
//     400 with its text; anything else would escape as 500);
//   - a body it accepts is a cluster the rest of the job can use: what GET then serves
//     (cluster_to_json) reads back to the same cluster, and the environment a runner gives each
//     worker of it (local_workers: KUNGFU_SELF_SPEC, KUNGFU_INIT_PEERS, ...) makes that worker
//     derive the same cluster and its own rank (worker_config_from). Checked for clusters of up to
//     64 workers, on the first and the last rank, to keep runs short.
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

void check_worker_sees_it(const ClusterSpec& spec, int rank) {
  const PeerID& self = spec.worker(rank);
  for (const auto& launch : local_workers(spec, self.host, "", "")) {
    if (launch.rank != rank) continue;
    WorkerConfig c;
    try {
      c = worker_config_from(launch.env);
    } catch (const std::invalid_argument& e) {
      broken("worker " + std::to_string(rank) + " of an accepted cluster cannot read its " +
             "environment: " + e.what() + "\ncluster: " + cluster_to_json(spec));
    }
    KF_FUZZ_CHECK(c.cluster == spec && c.rank == rank,
                  "worker " + std::to_string(rank) +
                      " derives another cluster or rank: " + cluster_to_json(c.cluster) + " rank " +
                      std::to_string(c.rank) + "\ncluster: " + cluster_to_json(spec));
    return;
  }
  broken("no launch for worker " + std::to_string(rank) + " on its own host");
}

void check_usable(const ClusterSpec& spec) {
  KF_FUZZ_CHECK(!spec.problem(), "accepted with a problem: " + *spec.problem());
  const std::string served = cluster_to_json(spec);
  ClusterSpec again;
  try {
    again = valid_cluster_from_json(served);
  } catch (const std::invalid_argument& e) {
    broken("what GET serves is refused by PUT: " + std::string(e.what()) + "\n" + served);
  }
  KF_FUZZ_CHECK(again == spec, "the served JSON reads back to another cluster: " + served);
  KF_FUZZ_CHECK(cluster_to_json(again) == served, "serving is not stable: " + served);
  if (spec.size() <= 64) {
    check_worker_sees_it(spec, 0);
    check_worker_sees_it(spec, spec.size() - 1);
  }
}

}  // namespace
}  // namespace kf::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace kf::fuzz;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  kf::ClusterSpec spec;
  try {
    spec = kf::valid_cluster_from_json(body);
  } catch (const std::invalid_argument&) {
    return 0;  // a 400 with the reason
  } catch (const std::exception& e) {
    unexpected(e);
  }
  try {
    check_usable(spec);
  } catch (const std::exception& e) {
    unexpected(e);
  }
  return 0;
}
