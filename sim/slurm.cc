#include "sim/slurm.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace kf {

namespace fs = std::filesystem;

namespace {

struct Captured {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv[0] (looked up on PATH) and captures its standard output and error.
Captured run_capture(const std::vector<std::string>& args) {
  std::array<int, 2> out_pipe{}, err_pipe{};
  if (::pipe2(out_pipe.data(), O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  if (::pipe2(err_pipe.data(), O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    throw std::runtime_error("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  Captured c;
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw std::runtime_error(fmt::format("cannot run {}: {}", args[0], std::strerror(rc)));
  }
  // Both pipes at once, so a command that fills one while we wait on the other cannot stall.
  std::array<pollfd, 2> fds{{{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}}};
  std::array<std::string*, 2> into{&c.out, &c.err};
  int open = 2;
  while (open > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        into[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (const auto& f : fds)
    if (f.fd >= 0) ::close(f.fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return c;
}

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r'))
    s.pop_back();
  return s;
}

// A word for /bin/sh: single-quoted, with single quotes closed, escaped and reopened.
std::string shell_quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

}  // namespace

std::string array_ranges(const std::vector<std::size_t>& indices) {
  std::string list;
  for (std::size_t i = 0; i < indices.size();) {
    std::size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1)
      ++j;
    if (!list.empty()) list += ',';
    list += j > i ? fmt::format("{}-{}", indices[i], indices[j]) : fmt::format("{}", indices[i]);
    i = j + 1;
  }
  return list;
}

bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string dirs = path;
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string dir = dirs.substr(start, end - start);
    const std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return true;
    start = end + 1;
  }
  return false;
}

std::string task_log(const std::string& out, const std::string& job, std::size_t task) {
  return fmt::format("{}/slurm/{}_{}.out", out, job, task);
}

std::string submit_array(const std::string& kfsim_exe, const std::string& out,
                         const std::string& name, const std::vector<std::size_t>& tasks,
                         const std::vector<std::string>& sbatch_args) {
  const fs::path dir = fs::path(out) / "slurm";
  fs::create_directories(dir);
  const std::string script = (dir / "job.sh").string();
  {
    std::ofstream f(script, std::ios::trunc);
    f << "#!/bin/sh\n"
      << "# Written by kfsim --slurm: array task I runs run I of the experiment in this\n"
      << "# directory's parent (its experiment.json) and writes that run's records.\n"
      << "exec " << shell_quoted(kfsim_exe) << " --run-task " << shell_quoted(out)
      << " \"$SLURM_ARRAY_TASK_ID\"\n";
    if (!f.flush()) throw std::runtime_error("cannot write " + script);
  }
  fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  std::vector<std::string> args{
      "sbatch",  "--parsable",        "--job-name", "kfsim:" + name,
      "--array", array_ranges(tasks), "--output",   (dir / "%A_%a.out").string()};
  args.insert(args.end(), sbatch_args.begin(), sbatch_args.end());
  args.push_back(script);
  const Captured c = run_capture(args);
  // --parsable prints "JOBID" or "JOBID;CLUSTER".
  const std::string job = trimmed(c.out.substr(0, c.out.find(';')));
  if (c.exit_code != 0 || job.empty() || job.find_first_not_of("0123456789") != std::string::npos) {
    throw std::runtime_error(fmt::format("sbatch refused the job array (exit {}): {}", c.exit_code,
                                         trimmed(c.err.empty() ? c.out : c.err)));
  }
  return job;
}

bool slurm_job_active(const std::string& job) {
  const Captured c = run_capture({"squeue", "--noheader", "--jobs", job, "--format", "%i"});
  if (c.exit_code == 0) return !trimmed(c.out).empty();
  // Once a finished job is purged from slurmctld, squeue calls its id invalid.
  if (c.err.find("Invalid job id") != std::string::npos) return false;
  throw std::runtime_error(
      fmt::format("squeue --jobs {} failed (exit {}): {}", job, c.exit_code, trimmed(c.err)));
}

}  // namespace kf
