#include "launch/preflight.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <system_error>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "launch/launch_plan.h"
#include "launch/supervisor.h"
#include "real/fd.h"
#include "real/sockets.h"

extern char** environ;

namespace kf {
namespace {

constexpr std::string_view kBuild = "kfrun-check build ";
constexpr std::string_view kProblem = "kfrun-check problem ";

// The last non-empty line of `text` (what ssh says when it fails).
std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!line.empty()) last = line;
  return last;
}

}  // namespace

std::string executable_digest() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  if (!in) throw std::runtime_error("cannot read /proc/self/exe");
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0)
    XXH3_64bits_update(state, buf, static_cast<std::size_t>(in.gcount()));
  const auto digest = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return fmt::format("{:016x}", digest);
}

std::vector<std::string> host_problems(const HostCheck& check) {
  std::vector<std::string> out;
  if (!check.nic.empty()) {
    try {
      const std::string ip = interface_ip(check.nic);
      if (ip != check.self) {
        out.push_back(fmt::format("-nic {} has address {}, not {} as in the host list", check.nic,
                                  ip, check.self));
      }
    } catch (const std::invalid_argument& e) {
      out.push_back(e.what());
    }
  }
  for (const auto port : check.ports) {
    for (const bool unix_socket : {false, true}) {
      try {
        (void)net::listen_on({check.self, port, unix_socket});  // closed again at once
      } catch (const std::system_error& e) {
        if (e.code().value() == EADDRNOTAVAIL) {
          out.push_back(
              fmt::format("{} is not an address of this host (is -H right?)", check.self));
          return out;
        }
        out.push_back(fmt::format("port {} is taken: {}", port, e.what()));
      }
    }
  }
  if (const auto problem = worker_command_problem(check.worker_program)) out.push_back(*problem);
  return out;
}

std::string check_report(const std::vector<std::string>& problems) {
  std::string out = fmt::format("{}{}\n", kBuild, executable_digest());
  for (const auto& p : problems)
    out += fmt::format("{}{}\n", kProblem, p);
  return out;
}

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds limit) {
  CommandResult r;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  Fd read_end(p[0]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, p[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, p[1], STDERR_FILENO);
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (auto& a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, cargs[0], &actions, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(p[1]);
  if (rc != 0) {
    r.code = -1;
    r.output = fmt::format("cannot start {}: {}", argv[0], std::strerror(rc));
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds::zero()) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    pollfd fd{read_end.get(), POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    r.output.append(buf, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::vector<std::string> judge_check(const std::string& host, const CommandResult& result,
                                     const std::string& our_digest, const std::string& kfrun,
                                     bool over_ssh) {
  std::vector<std::string> out;
  const auto say = [&](const std::string& why) {
    out.push_back(fmt::format("host {}: {}", host, why));
  };
  if (result.timed_out) {
    say(fmt::format("no answer to the check in time{}", over_ssh ? " (over SSH)" : ""));
    return out;
  }
  std::string digest;
  std::vector<std::string> problems;
  std::istringstream in(result.output);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with(kBuild)) digest = line.substr(kBuild.size());
    if (line.starts_with(kProblem)) problems.push_back(line.substr(kProblem.size()));
  }
  if (digest.empty()) {
    const std::string said = last_line(result.output);
    if (over_ssh && result.code == 255) {
      say(fmt::format("cannot reach it over SSH: {}", said.empty() ? "ssh exited 255" : said));
    } else if (result.code == 126 || result.code == 127) {
      say(fmt::format("cannot run {} there: {}", kfrun, said.empty() ? "not found" : said));
    } else {
      say(fmt::format("its kfrun refused the job (exit code {}): {}", result.code, said));
    }
    return out;
  }
  if (digest != our_digest) {
    say(
        fmt::format("runs another kfrun build ({} there has digest {}, this one {}): install "
                    "the same build on every host",
                    kfrun, digest, our_digest));
  }
  for (const auto& p : problems)
    say(p);
  if (out.empty() && result.code != 0)
    say(fmt::format("the check exited {}: {}", result.code, last_line(result.output)));
  return out;
}

}  // namespace kf
