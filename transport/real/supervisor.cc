#include "transport/real/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>

#include "transport/real/fd.h"

namespace kf {
namespace {

int g_signal_pipe = -1;  // written by the signal handler (async-signal-safe)

extern "C" void on_signal(int sig) {
  const int saved = errno;
  const unsigned char s = static_cast<unsigned char>(sig);
  [[maybe_unused]] const auto n = ::write(g_signal_pipe, &s, 1);
  errno = saved;
}

struct Stream {
  Fd fd;
  std::string pending;  // a partial line
  std::string tag;      // "[10.0.0.1.10000::stdout] "
  FILE* sink;           // our stdout or stderr
  std::unique_ptr<std::ofstream> log;
};

struct Child {
  const WorkerLaunch* launch;
  pid_t pid = -1;
  bool running = false;
  int code = 0;
  Stream out, err;
};

class Run {
 public:
  Run(const std::vector<WorkerLaunch>& workers, const SupervisorOptions& options)
      : options_(options) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
    signal_read_.reset(p[0]);
    signal_write_.reset(p[1]);
    g_signal_pipe = signal_write_.get();
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGINT, SIGTERM, SIGCHLD})
      ::sigaction(sig, &sa, nullptr);
    if (!options_.logdir.empty()) ::mkdir(options_.logdir.c_str(), 0755);
    children_.resize(workers.size());
    for (std::size_t i = 0; i < workers.size(); ++i)
      spawn(children_[i], workers[i]);
  }

  ~Run() {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGCHLD})
      ::sigaction(sig, &sa, nullptr);
    g_signal_pipe = -1;
  }

  int wait() {
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    std::optional<Clock::time_point> drain_until;
    for (;;) {
      reap();
      if (running() == 0) {
        if (!drain_until) drain_until = Clock::now() + std::chrono::seconds(1);
        if (open_streams() == 0 || Clock::now() > *drain_until) break;
      }
      if (options_.timeout && !timed_out_ && Clock::now() - start > *options_.timeout) {
        timed_out_ = true;
        say(fmt::format("timeout: {} s passed, stopping all workers",
                        std::chrono::duration<double>(*options_.timeout).count()));
        if (!first_failure_) first_failure_ = 124;
        begin_stop(SIGTERM);
      }
      if (first_failure_ && !stopping_) begin_stop(SIGTERM);
      if (kill_at_ && Clock::now() > *kill_at_) {
        say("grace period over: SIGKILL");
        stop_all(SIGKILL);
        kill_at_.reset();
      }
      poll_once(50);
    }
    flush_all();
    return first_failure_.value_or(0);
  }

 private:
  void say(const std::string& line) {
    if (!options_.quiet) std::fprintf(stderr, "[kfrun] %s\n", line.c_str());
  }

  void spawn(Child& c, const WorkerLaunch& w) {
    c.launch = &w;
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe2 failed");
    }
    // Build argv and envp before fork: the child only calls async-signal-safe functions.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string_view kv(*e);
      const auto key = kv.substr(0, kv.find('='));
      if (!w.env.contains(std::string(key))) env_strings.emplace_back(kv);
    }
    for (const auto& [k, v] : w.env)
      env_strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : env_strings)
      envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = options_.command;
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      struct sigaction sa {};
      sa.sa_handler = SIG_DFL;
      for (int sig : {SIGINT, SIGTERM, SIGCHLD})
        ::sigaction(sig, &sa, nullptr);
      ::execvpe(argv[0], argv.data(), envp.data());
      const char msg[] = "kfrun: cannot execute the worker command\n";
      [[maybe_unused]] const auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here: no race with the first kill
    ::close(out[1]);
    ::close(err[1]);
    c.pid = pid;
    c.running = true;
    const std::string name = fmt::format("{}.{}", w.id.host, w.id.port);
    c.out.fd.reset(out[0]);
    c.err.fd.reset(err[0]);
    c.out.tag = options_.prefix ? fmt::format("[{}::stdout] ", name) : "";
    c.err.tag = options_.prefix ? fmt::format("[{}::stderr] ", name) : "";
    c.out.sink = stdout;
    c.err.sink = stderr;
    if (!options_.logdir.empty()) {
      c.out.log = std::make_unique<std::ofstream>(options_.logdir + "/" + name + ".stdout.log");
      c.err.log = std::make_unique<std::ofstream>(options_.logdir + "/" + name + ".stderr.log");
    }
    say(fmt::format("started rank {} ({}) as pid {}", w.rank, w.id.to_string(), pid));
  }

  int running() const {
    int n = 0;
    for (const auto& c : children_)
      n += c.running ? 1 : 0;
    return n;
  }
  int open_streams() const {
    int n = 0;
    for (const auto& c : children_)
      n += (c.out.fd ? 1 : 0) + (c.err.fd ? 1 : 0);
    return n;
  }

  void reap() {
    for (auto& c : children_) {
      if (!c.running) continue;
      int status = 0;
      if (::waitpid(c.pid, &status, WNOHANG) != c.pid) continue;
      c.running = false;
      c.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      const auto& id = c.launch->id;
      if (c.code != 0 && !stopping_) {
        say(fmt::format("rank {} ({}) failed with exit code {}{}", c.launch->rank, id.to_string(),
                        c.code,
                        WIFSIGNALED(status) ? fmt::format(" (signal {})", WTERMSIG(status)) : ""));
        if (!first_failure_) first_failure_ = c.code;
      } else {
        say(fmt::format("rank {} ({}) exited with code {}", c.launch->rank, id.to_string(),
                        c.code));
      }
    }
  }

  // Asks every worker to stop; those still running after the grace period are killed.
  void begin_stop(int sig) {
    stopping_ = true;
    stop_all(sig);
    if (!kill_at_) kill_at_ = std::chrono::steady_clock::now() + options_.grace;
  }

  void stop_all(int sig) {
    for (auto& c : children_)
      if (c.running) ::kill(-c.pid, sig);
  }

  void emit(Stream& s, std::string_view line) {
    std::fprintf(s.sink, "%s%.*s\n", s.tag.c_str(), static_cast<int>(line.size()), line.data());
    if (s.log) *s.log << line << '\n';
  }

  void drain(Stream& s) {
    char buf[65536];
    const ssize_t n = ::read(s.fd.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      if (!s.pending.empty()) emit(s, s.pending);
      s.pending.clear();
      s.fd.reset();
      return;
    }
    s.pending.append(buf, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos; start = nl + 1)
      emit(s, std::string_view(s.pending).substr(start, nl - start));
    s.pending.erase(0, start);
    std::fflush(s.sink);
  }

  void poll_once(int ms) {
    std::vector<pollfd> fds;
    std::vector<Stream*> streams;
    fds.push_back({signal_read_.get(), POLLIN, 0});
    streams.push_back(nullptr);
    for (auto& c : children_) {
      for (Stream* s : {&c.out, &c.err}) {
        if (!s->fd) continue;
        fds.push_back({s->fd.get(), POLLIN, 0});
        streams.push_back(s);
      }
    }
    if (::poll(fds.data(), fds.size(), ms) <= 0) return;
    if ((fds[0].revents & POLLIN) != 0) {
      unsigned char sigs[64];
      const ssize_t n = ::read(signal_read_.get(), sigs, sizeof sigs);
      for (ssize_t i = 0; i < n; ++i) {
        if (sigs[i] == SIGINT || sigs[i] == SIGTERM) {
          say(fmt::format("got signal {}, forwarding it to the workers", sigs[i]));
          if (!first_failure_) first_failure_ = 128 + sigs[i];
          begin_stop(sigs[i]);
        }
      }
    }
    for (std::size_t i = 1; i < fds.size(); ++i)
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) drain(*streams[i]);
  }

  void flush_all() {
    for (auto& c : children_)
      for (Stream* s : {&c.out, &c.err}) {
        if (!s->pending.empty()) emit(*s, s->pending);
        s->pending.clear();
      }
    std::fflush(stdout);
    std::fflush(stderr);
  }

  const SupervisorOptions& options_;
  Fd signal_read_, signal_write_;
  std::vector<Child> children_;
  std::optional<int> first_failure_;
  bool stopping_ = false;
  bool timed_out_ = false;
  std::optional<std::chrono::steady_clock::time_point> kill_at_;
};

}  // namespace

int supervise(const std::vector<WorkerLaunch>& workers, const SupervisorOptions& options) {
  if (workers.empty()) return 0;
  Run run(workers, options);
  return run.wait();
}

}  // namespace kf
