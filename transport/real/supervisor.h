// Supervisor: runs kfrun's local workers and watches them. Each worker is its own process group
// (so a signal reaches its children too), with stdout and stderr on pipes that are copied out
// line by line with an "[ip.port::stdout] " prefix (and into -logdir files). The first worker to
// fail decides the exit code; the others are stopped (SIGTERM, then SIGKILL after a grace
// period). SIGINT/SIGTERM to the supervisor are forwarded; a time limit stops everything.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "transport/real/launch_plan.h"

namespace kf {

struct SupervisorOptions {
  std::vector<std::string> command;                  // argv of every worker
  bool prefix = true;                                // -v: prefix worker lines
  bool quiet = false;                                // -q: no supervisor log lines
  std::string logdir;                                // also write each worker's output here
  std::optional<std::chrono::milliseconds> timeout;  // -timeout
  std::chrono::milliseconds grace{3000};             // SIGTERM -> SIGKILL
};

// Runs the workers to completion. Returns 0 when all succeed, else the first failure's exit
// code (128 + signal for a signalled worker; 124 on timeout).
int supervise(const std::vector<WorkerLaunch>& workers, const SupervisorOptions& options);

}  // namespace kf
