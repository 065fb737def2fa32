#include "launch/ssh_remote.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace kf {

std::string shell_quote(std::string_view word) {
  std::string out = "'";
  for (const char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string shell_command(const std::vector<std::string>& argv) {
  std::string out = "exec";
  for (const auto& a : argv) {
    out += ' ';
    out += shell_quote(a);
  }
  return out;
}

std::vector<std::string> ssh_argv(const std::string& host, const SshOptions& options,
                                  const std::vector<std::string>& remote) {
  std::vector<std::string> argv = {
      "ssh", "-T",
      "-o",  "BatchMode=yes",
      "-o",  fmt::format("ConnectTimeout={}", options.connect_timeout.count()),
      "-o",  fmt::format("ServerAliveInterval={}", options.alive_interval_s),
      "-o",  fmt::format("ServerAliveCountMax={}", options.alive_count)};
  if (!options.config.empty()) argv.insert(argv.end(), {"-F", options.config});
  if (!options.port.empty()) argv.insert(argv.end(), {"-p", options.port});
  if (!options.identity.empty()) argv.insert(argv.end(), {"-i", options.identity});
  argv.push_back(host);
  argv.push_back(shell_command(remote));
  return argv;
}

EnvMap kungfu_environment() {
  EnvMap env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view kv(*e);
    const auto eq = kv.find('=');
    if (eq == std::string_view::npos || !kv.starts_with("KUNGFU_")) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

std::string environment_block(const EnvMap& env) {
  std::string out;
  for (const auto& [k, v] : env) {
    if (k.empty() || k.find_first_of("=\n") != std::string::npos) {
      throw std::invalid_argument(fmt::format("environment variable '{}': not a valid name", k));
    }
    if (v.find('\n') != std::string::npos) {
      throw std::invalid_argument(
          fmt::format("environment variable {}: its value holds a newline, which kfrun -ssh "
                      "cannot hand to the other hosts",
                      k));
    }
    out += fmt::format("{}={}\n", k, v);
  }
  out += '\n';
  return out;
}

EnvMap read_environment_block(int fd) {
  constexpr std::size_t kMax = 1u << 20;
  EnvMap env;
  std::string line;
  std::size_t total = 0;
  for (;;) {
    char c = 0;
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw std::runtime_error(
          fmt::format("reading the environment from stdin: {}", std::strerror(errno)));
    }
    if (n == 0) throw std::runtime_error("stdin ended before the environment block did");
    if (++total > kMax) throw std::runtime_error("the environment block on stdin is over 1 MiB");
    if (c != '\n') {
      line += c;
      continue;
    }
    if (line.empty()) return env;
    const auto eq = line.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw std::runtime_error(
          fmt::format("environment block on stdin: '{}' is not KEY=VALUE", line));
    }
    env[line.substr(0, eq)] = line.substr(eq + 1);
    line.clear();
  }
}

void stop_when_stdin_closes() {
  const int watched = ::fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
  if (watched < 0) throw std::runtime_error("cannot duplicate stdin");
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null < 0 || ::dup2(null, STDIN_FILENO) < 0) throw std::runtime_error("cannot open /dev/null");
  ::close(null);
  // The thread must not take kfrun's signals (its supervisor's handler runs on the main thread).
  sigset_t all, old;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  std::thread([watched] {
    char buf[256];
    for (;;) {
      const ssize_t n = ::read(watched, buf, sizeof buf);
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      break;  // the end: the launcher closed it, died, or its SSH connection dropped
    }
    ::kill(::getpid(), SIGTERM);
  }).detach();
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

}  // namespace kf
