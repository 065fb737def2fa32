#include "sim/make_world.h"

#include <stdexcept>

#include "sim/flow/flow_world.h"
#ifdef KF_WITH_NS3
#include "sim/ns3/ns3_world.h"
#endif

namespace kf {

std::unique_ptr<SimWorld> make_world(const Scenario& sc, const PhysicalTopology& topo) {
  switch (sc.world) {
    case WorldKind::flow:
      return std::make_unique<FlowWorld>(
          topo, FlowOptions{.seed = sc.seed,
                            .compute_jitter = sc.workload.compute_jitter,
                            .tcp_windows = sc.flow_tcp == FlowSharing::cubic,
                            .lossless_hosts = sc.topology.host_qdisc == HostQdisc::tsq,
                            .tcp_sample_every = sc.tcp_samples});
    case WorldKind::ns3:
#ifdef KF_WITH_NS3
      return std::make_unique<Ns3World>(topo,
                                        Ns3Options{.seed = sc.seed,
                                                   .compute_jitter = sc.workload.compute_jitter,
                                                   .host_qdisc = sc.topology.host_qdisc,
                                                   .loss_recovery = sc.tcp_recovery,
                                                   .tcp_sample_every = sc.tcp_samples});
#else
      throw std::invalid_argument("world 'ns3' is not built in (no ns-3 here): use world: flow");
#endif
  }
  throw std::invalid_argument("unknown world");
}

}  // namespace kf
