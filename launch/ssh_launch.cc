#include "launch/ssh_launch.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <fmt/format.h>

#include <cstdio>
#include <future>
#include <map>
#include <set>

#include "launch/preflight.h"
#include "launch/supervisor.h"

namespace kf {
namespace {

// The hosts that get a runner: with -w all of them (the job may grow onto any), else those with
// a worker (a runner with none exits 2).
std::vector<std::string> runner_hosts(const SshLaunch& l) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const auto& h : l.hosts) {
    if (seen.contains(h.ip)) continue;
    bool has_worker = false;
    for (const auto& w : l.cluster.workers())
      has_worker = has_worker || w.host == h.ip;
    if (l.elastic || has_worker) {
      out.push_back(h.ip);
      seen.insert(h.ip);
    }
  }
  return out;
}

// A runner's kfrun argv for `host`, `mode` being -ssh-child or -ssh-check.
std::vector<std::string> runner_argv(const SshLaunch& l, const std::string& host, bool first,
                                     const char* mode) {
  std::vector<std::string> a = {l.kfrun};
  a.insert(a.end(), l.runner_flags.begin(), l.runner_flags.end());
  a.push_back("-H=" + format_host_list(l.hosts));
  a.push_back("-self=" + host);
  if (!l.nic.empty() && std::string(mode) == "-ssh-check") a.push_back("-nic=" + l.nic);
  if (l.builtin_config_port != 0) {
    if (!l.elastic || first) {
      a.push_back(fmt::format("-builtin-config-port={}", l.builtin_config_port));
      a.insert(a.end(), l.server_flags.begin(), l.server_flags.end());
    } else {
      a.push_back(fmt::format("-config-server={}://{}:{}/config", l.config_scheme,
                              l.hosts.front().ip, l.builtin_config_port));
    }
  }
  a.push_back(mode);
  a.insert(a.end(), l.command.begin(), l.command.end());
  return a;
}

std::vector<std::string> host_argv(const SshLaunch& l, const SshOptions& ssh,
                                   const std::string& host, bool first, const char* mode) {
  auto remote = runner_argv(l, host, first, mode);
  return is_local_address(host) ? remote : ssh_argv(host, ssh, remote);
}

void say(const SshLaunch& l, const std::string& line) {
  if (!l.quiet) std::fprintf(stderr, "[kfrun] %s\n", line.c_str());
}

std::vector<std::string> preflight(const SshLaunch& l, const SshOptions& ssh,
                                   const std::vector<std::string>& hosts) {
  const std::string ours = executable_digest();
  std::vector<std::future<std::vector<std::string>>> checks;
  for (const auto& host : hosts) {
    const bool first = host == l.hosts.front().ip;
    checks.push_back(std::async(std::launch::async, [&l, &ssh, &ours, host, first] {
      const bool local = is_local_address(host);
      const auto result =
          run_command(host_argv(l, ssh, host, first, "-ssh-check"), l.preflight_limit);
      return judge_check(host, result, ours, l.kfrun, !local);
    }));
  }
  std::vector<std::string> problems;
  for (auto& c : checks)
    for (auto& p : c.get())
      problems.push_back(std::move(p));
  return problems;
}

std::string explain(int code) {
  switch (code) {
    case 255:
      return " (ssh failed: the connection to the host was lost or refused, or its runner was "
             "killed)";
    case 124:
      return " (-timeout passed)";
    case 143:
      return " (its runner was stopped)";
    default:
      return code > 128 ? fmt::format(" (signal {})", code - 128) : "";
  }
}

}  // namespace

bool is_local_address(const std::string& ip) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN];
    ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf);
    found = ip == buf;
  }
  ::freeifaddrs(list);
  return found;
}

int launch_over_ssh(const SshLaunch& l, const SshOptions& ssh) {
  const auto hosts = runner_hosts(l);
  const std::string env = environment_block(kungfu_environment());  // throws before any check
  say(l, fmt::format("pre-flight on {} host{}: reachable, the same kfrun build, ports free{}",
                     hosts.size(), hosts.size() == 1 ? "" : "s",
                     l.nic.empty() ? "" : fmt::format(", -nic {} present", l.nic)));
  if (const auto problems = preflight(l, ssh, hosts); !problems.empty()) {
    std::fprintf(stderr, "kfrun: the pre-flight failed; nothing was started:\n");
    for (const auto& p : problems)
      std::fprintf(stderr, "  %s\n", p.c_str());
    return 2;
  }
  SupervisorOptions options{.command = {}, .prefix = false, .quiet = l.quiet};
  options.grace = l.grace;
  // The runners enforce -timeout; this is the backstop should one not answer.
  if (l.timeout) options.timeout = *l.timeout + l.grace + std::chrono::seconds(5);
  WorkerPool pool(options);
  std::map<PeerID, std::string> host_of;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    const auto& host = hosts[i];
    const bool local = is_local_address(host);
    WorkerLaunch w;
    w.id = PeerID{host, l.cluster.runners().front().port};
    w.rank = static_cast<int>(i);
    w.command = host_argv(l, ssh, host, host == l.hosts.front().ip, "-ssh-child");
    w.stdin_text = env;
    w.name = fmt::format("the runner on {}{}", host, local ? " (this host)" : "");
    w.relay_host = host;
    host_of[w.id] = host;
    pool.start(w);
  }
  bool reported = false;
  while (pool.running() > 0) {
    pool.turn(std::chrono::milliseconds(50));
    for (const auto& [id, code] : pool.take_exits()) {
      if (code == 0 || reported) continue;
      reported = true;
      say(l, fmt::format("host {}: its runner ended with exit code {}{}; stopping every host",
                         host_of[id], code, explain(code)));
    }
  }
  return pool.finish();
}

}  // namespace kf
