// Both ends of kfrun -ssh's channel to a host's runner. The launcher starts each host's runner
// with the system's ssh client (its config, keys and known hosts; ssh_argv) and writes the job's
// KUNGFU_* environment, the secret included, to the runner's stdin as a block of KEY=VALUE lines
// ended by an empty line (never on a command line, where ps would show it). The runner
// (kfrun -ssh-child) reads the block, then treats the end of its stdin as the launcher's order to
// stop: that is how a tear-down, a Ctrl-C, a dead launcher and a dropped SSH connection reach it.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "launch/worker_env.h"

namespace kf {

struct SshOptions {
  std::string port;      // -ssh-port (ssh -p); empty: ssh's config or 22
  std::string identity;  // -ssh-identity (ssh -i)
  std::string config;    // -ssh-config (ssh -F); empty: ~/.ssh/config and /etc/ssh/ssh_config
  std::chrono::seconds connect_timeout{10};
  // Keep-alives: a host that stops answering for interval x count drops its connection, which
  // fails the job (ssh exits 255) instead of hanging it.
  int alive_interval_s = 5;
  int alive_count = 3;
};

// `word` quoted for a POSIX shell: 'it'\''s'.
std::string shell_quote(std::string_view word);
// "exec 'argv0' 'argv1' ...": the remote shell becomes the program, so nothing sits between sshd
// and it.
std::string shell_command(const std::vector<std::string>& argv);
// The ssh client's argv that runs `remote` on `host` (no tty, no prompts).
std::vector<std::string> ssh_argv(const std::string& host, const SshOptions& options,
                                  const std::vector<std::string>& remote);

// This process's KUNGFU_* variables.
EnvMap kungfu_environment();
// The block written to a runner's stdin; throws std::invalid_argument naming a variable whose
// value holds a newline (a block cannot carry it).
std::string environment_block(const EnvMap& env);
// Runner side: reads the block from `fd` (byte by byte, so nothing after it is consumed); throws
// std::runtime_error when the input ends before the empty line or a line is not KEY=VALUE.
EnvMap read_environment_block(int fd);
// Runner side: moves stdin out of the workers' way (fd 0 becomes /dev/null) and, on a thread,
// waits for it to end; then this process gets SIGTERM, which kfrun's supervisor forwards to its
// workers (and ends kfrun with 143 when none runs yet).
void stop_when_stdin_closes();

}  // namespace kf
