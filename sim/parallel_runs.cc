#include "sim/parallel_runs.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <exception>
#include <string>
#include <system_error>

namespace kf {

namespace {

// The read end of a child's progress pipe; closes it when the child is done with.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = o.fd_;
      o.fd_ = -1;
    }
    return *this;
  }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Progress lines a child writes: "STEPS_DONE STEPS_TOTAL SIMULATED_SECONDS\n".
void write_progress(int fd, const SimulationProgress& p) {
  const std::string line =
      fmt::format("{} {} {:.17g}\n", p.steps_done, p.steps_total, p.simulated_seconds);
  // A parent that stopped reading is no reason to stop the run: ignore short writes.
  [[maybe_unused]] const ssize_t n = ::write(fd, line.data(), line.size());
}

[[noreturn]] void child_main(const ParallelTask& task, int fd) {
  int code = kTaskCrashed;
  std::int64_t last = -1;
  try {
    code = task([&](const SimulationProgress& p) {
      if (p.steps_done == last) return;  // one line per finished step, not per event
      last = p.steps_done;
      write_progress(fd, p);
    });
  } catch (const std::exception& e) {
    fmt::print(stderr, "kfsim: {}\n", e.what());
    code = kTaskCrashed;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  ::close(fd);
  // _exit: the parent's atexit handlers and static destructors are the parent's business.
  ::_exit(code);
}

struct Child {
  std::size_t task = 0;
  pid_t pid = -1;
  Fd progress;
  std::string buffered;  // a partial line
};

// Parses the complete lines in `c.buffered` and reports each.
void report_lines(Child& c,
                  const std::function<void(std::size_t, const SimulationProgress&)>& on_progress) {
  std::size_t end;
  while ((end = c.buffered.find('\n')) != std::string::npos) {
    SimulationProgress p;
    long long done = 0, total = 0;
    if (std::sscanf(c.buffered.c_str(), "%lld %lld %lf", &done, &total, &p.simulated_seconds) ==
        3) {
      p.steps_done = done;
      p.steps_total = total;
      if (on_progress) on_progress(c.task, p);
    }
    c.buffered.erase(0, end + 1);
  }
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return kTaskCrashed;  // killed by a signal
}

}  // namespace

std::vector<int> run_parallel(
    const std::vector<ParallelTask>& tasks, int jobs,
    const std::function<void(std::size_t, const SimulationProgress&)>& on_progress) {
  std::vector<int> codes(tasks.size(), kTaskCrashed);
  std::vector<Child> running;
  std::size_t next = 0;
  while (next < tasks.size() || !running.empty()) {
    while (next < tasks.size() && static_cast<int>(running.size()) < jobs) {
      int fds[2];
      if (::pipe(fds) != 0) throw std::system_error(errno, std::generic_category(), "pipe");
      // Buffered output would otherwise be written twice, once by the child.
      std::fflush(stdout);
      std::fflush(stderr);
      const pid_t pid = ::fork();
      if (pid < 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        throw std::system_error(errno, std::generic_category(), "fork");
      }
      if (pid == 0) {
        ::close(fds[0]);
        for (auto& c : running)
          c.progress.reset();
        child_main(tasks[next], fds[1]);
      }
      ::close(fds[1]);
      running.push_back({next, pid, Fd(fds[0]), {}});
      ++next;
    }
    // Wait for progress or an end of file (the child is done) from any running child.
    std::vector<pollfd> polls;
    for (const auto& c : running)
      polls.push_back({c.progress.get(), POLLIN, 0});
    if (::poll(polls.data(), polls.size(), -1) < 0) {
      if (errno == EINTR) continue;
      throw std::system_error(errno, std::generic_category(), "poll");
    }
    for (std::size_t i = running.size(); i-- > 0;) {
      if (polls[i].revents == 0) continue;
      Child& c = running[i];
      char buf[4096];
      const ssize_t n = ::read(c.progress.get(), buf, sizeof buf);
      if (n > 0) {
        c.buffered.append(buf, static_cast<std::size_t>(n));
        report_lines(c, on_progress);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      // End of file: the child has exited (or is about to).
      int status = 0;
      while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      codes[c.task] = exit_code(status);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return codes;
}

}  // namespace kf
