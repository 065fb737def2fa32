// kfrun -ssh's pre-flight: before anything starts, every host is asked (over SSH, by running its
// kfrun with -ssh-check and the flags its runner would get) whether the job can start there:
// reachable, the same kfrun build (a digest of the executable), the worker ports (and the config
// server's) free, the -nic present with the host's address, the worker command found. Any
// problem names the host and the reason, and nothing is started.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kf {

// ---- the host side (kfrun -ssh-check) ----

// XXH3-64 of this process's executable (/proc/self/exe), 16 hex digits: same digest, same build.
std::string executable_digest();

struct HostCheck {
  std::string self;                  // the host's IP in -H
  std::string nic;                   // -nic; empty: not checked
  std::vector<std::uint16_t> ports;  // must be free on `self` (TCP) and as workers' Unix names
  std::string worker_program;        // the worker command's first word
};
// What stands in the way of the job on this host; empty when nothing does.
std::vector<std::string> host_problems(const HostCheck& check);
// What kfrun -ssh-check prints: "kfrun-check build DIGEST" and a "kfrun-check problem TEXT" line
// per problem.
std::string check_report(const std::vector<std::string>& problems);

// ---- the launcher side ----

struct CommandResult {
  int code = 0;        // the exit code; 128 + signal; -1 when it could not start
  std::string output;  // stdout and stderr, interleaved
  bool timed_out = false;
};
// Runs argv (stdin /dev/null) to its end or for at most `limit` (then SIGKILL).
CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds limit);

// The problems a host's check reveals, each "host IP: reason": `result` is the check's run over
// SSH (or locally), `our_digest` the launcher's executable_digest(), `kfrun` the path run there.
std::vector<std::string> judge_check(const std::string& host, const CommandResult& result,
                                     const std::string& our_digest, const std::string& kfrun,
                                     bool over_ssh);

}  // namespace kf
