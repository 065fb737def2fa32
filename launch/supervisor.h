// Supervisor: runs kfrun's local workers and watches them. Each worker is its own process group
// (so a signal reaches its children too), with stdout and stderr on pipes that are copied out
// line by line with an "[ip.port::stdout] " prefix (and into -logdir files). A failing worker
// decides the exit code (of those failing within 100 ms, the first killed by a signal: its
// peers' errors are the consequence); the others are stopped (SIGTERM, then SIGKILL after a grace
// period). SIGINT/SIGTERM to the supervisor are forwarded; a time limit stops everything.
// supervise() runs a fixed set of workers; WorkerPool is the same machinery for a caller that
// starts and retires workers over time (kfrun -w, elastic_supervisor.h).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/launch_plan.h"

namespace kf {

// Why `program` (a worker command's first word) cannot be started, checked before any worker
// is: a word that looks like a flag (kfrun took it for the command: an unknown flag), a path that
// is not executable, a name not found on PATH. nullopt when it can.
std::optional<std::string> worker_command_problem(const std::string& program);

struct SupervisorOptions {
  std::vector<std::string> command;                  // argv of every worker
  bool prefix = true;                                // -v: prefix worker lines
  bool quiet = false;                                // -q: no supervisor log lines
  std::string logdir;                                // also write each worker's output here
  std::optional<std::chrono::milliseconds> timeout;  // -timeout
  std::chrono::milliseconds grace{3000};             // SIGTERM -> SIGKILL
  // -w: a worker the cluster dropped should exit by itself; one still running this long after
  // the version that dropped it is stopped (SIGTERM, SIGKILL after `grace`).
  std::chrono::milliseconds detach_timeout{30000};
};

// Runs the workers to completion. Returns 0 when all succeed, else the failure's exit code
// (128 + signal for a signalled worker; 124 on timeout).
int supervise(const std::vector<WorkerLaunch>& workers, const SupervisorOptions& options);

// The process machinery under supervise(). It installs kfrun's SIGINT/SIGTERM/SIGCHLD handlers
// for its lifetime (one pool per process at a time). Not thread-safe: drive it from one thread.
class WorkerPool {
 public:
  explicit WorkerPool(const SupervisorOptions& options);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts one worker; throws std::runtime_error when it cannot. A worker id started again
  // appends to its -logdir files.
  void start(const WorkerLaunch& worker);
  // One turn: reaps exited workers, handles forwarded signals, the time limit, a failure (every
  // worker is stopped) and SIGKILL deadlines, and copies output for at most `wait`.
  void turn(std::chrono::milliseconds wait);
  // Asks one worker to stop (SIGTERM to its group, SIGKILL after the grace). Its exit, whatever
  // the code, is then not a failure.
  void retire(const PeerID& id);

  bool is_running(const PeerID& id) const;
  int running() const;
  // (id, exit code) of every worker that exited since the last call, in order.
  std::vector<std::pair<PeerID, int>> take_exits();
  // Set once a worker failed: the job's exit code (see supervise()), 124 on the time limit,
  // 128 + signal when kfrun was signalled.
  std::optional<int> failure() const;
  // Copies the remaining output (at most 1 s more) and flushes; returns failure().value_or(0).
  int finish();
  // A "[kfrun] ..." line on stderr unless quiet.
  void say(const std::string& line) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kf
