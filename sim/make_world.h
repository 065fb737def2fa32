// The simulated world a scenario names (`world:`): the packet-level ns-3 world or the flow-level
// one, with the scenario's options for it. The one place that knows every world.
#pragma once

#include <memory>

#include "sim/scenario/scenario.h"
#include "sim/sim_world.h"
#include "topology/physical.h"

namespace kf {

// Throws std::invalid_argument for a world this build lacks (ns-3 where ns-3 was not found).
std::unique_ptr<SimWorld> make_world(const Scenario& scenario, const PhysicalTopology& topology);

}  // namespace kf
