#include "launch/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <stdexcept>
#include <utility>

#include "real/fd.h"

namespace kf {

std::optional<std::string> worker_command_problem(const std::string& program) {
  if (program.starts_with("-")) {
    return fmt::format(
        "unknown flag {} (the worker command starts at the first word that is not one of "
        "kfrun's flags; kfrun -h lists them)",
        program);
  }
  if (program.find('/') != std::string::npos) {
    if (::access(program.c_str(), X_OK) != 0)
      return fmt::format("worker command {}: {}", program, std::strerror(errno));
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  std::string_view dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  while (true) {
    const auto colon = dirs.find(':');
    const std::string dir(dirs.substr(0, colon));
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return std::nullopt;
    if (colon == std::string_view::npos) break;
    dirs.remove_prefix(colon + 1);
  }
  return fmt::format("worker command {}: not found on PATH", program);
}
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
  std::string pending;    // a partial line
  std::string tag;        // "[10.0.0.1.10000::stdout] "
  std::string kfrun_tag;  // relayed output: "[kfrun@10.0.0.2] " replaces a line's "[kfrun] "
  FILE* sink;             // our stdout or stderr
  std::unique_ptr<std::ofstream> log;
};

struct Child {
  WorkerLaunch launch;
  pid_t pid = -1;
  bool running = false;
  bool retired = false;  // asked to stop by retire(): its exit is no failure
  std::optional<std::chrono::steady_clock::time_point> kill_at;  // retire()'s SIGKILL
  int code = 0;
  Stream out, err;
  Fd in;  // the write end of its stdin (WorkerLaunch::stdin_text); closed to stop it

  std::string label() const {
    return launch.name.empty() ? fmt::format("rank {} ({})", launch.rank, launch.id.to_string())
                               : launch.name;
  }
  // Asks it to stop: closes its stdin when it has one of ours, else `sig` to its group (and
  // SIGCONT, so a stopped one receives it).
  void stop(int sig) {
    if (launch.stdin_text) {
      in.reset();
      return;
    }
    ::kill(-pid, sig);
    ::kill(-pid, SIGCONT);
  }
};

}  // namespace

struct WorkerPool::Impl {
  using Clock = std::chrono::steady_clock;

  explicit Impl(SupervisorOptions o) : options(std::move(o)), start_time(Clock::now()) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error("pipe2 failed");
    signal_read.reset(p[0]);
    signal_write.reset(p[1]);
    g_signal_pipe = signal_write.get();
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int sig : {SIGINT, SIGTERM, SIGCHLD})
      ::sigaction(sig, &sa, nullptr);
    // A write to the stdin of a child that has gone fails with EPIPE instead of killing kfrun.
    sa.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &sa, &saved_sigpipe);
    if (!options.logdir.empty()) ::mkdir(options.logdir.c_str(), 0755);
  }

  ~Impl() {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGCHLD})
      ::sigaction(sig, &sa, nullptr);
    ::sigaction(SIGPIPE, &saved_sigpipe, nullptr);
    g_signal_pipe = -1;
  }

  void turn(std::chrono::milliseconds wait) {
    reap();
    const auto now = Clock::now();
    if (options.timeout && !timed_out && now - start_time > *options.timeout) {
      timed_out = true;
      say(fmt::format("timeout: {} s passed, stopping all workers",
                      std::chrono::duration<double>(*options.timeout).count()));
      if (!first_failure) first_failure = 124;
      begin_stop(SIGTERM);
    }
    // A worker killed by a signal takes its peers down with errors of their own, which can reach
    // us first: failures are gathered for a moment before the job's exit code is chosen.
    if (!first_failure && !failures.empty() && now - failures.front().at >= kSettle) decide();
    if (first_failure && !stopping) begin_stop(SIGTERM);
    if (kill_at && now > *kill_at) {
      say("grace period over: SIGKILL");
      stop_all(SIGKILL);
      kill_at.reset();
    }
    for (auto& c : children) {
      if (c->running && c->kill_at && now > *c->kill_at) {
        say(fmt::format("{} still running after the grace period: SIGKILL",
                        c->launch.id.to_string()));
        ::kill(-c->pid, SIGKILL);
        c->kill_at.reset();
      }
    }
    poll_once(static_cast<int>(wait.count()));
  }

  int finish() {
    if (!first_failure && !failures.empty()) decide();
    const auto drain_until = Clock::now() + std::chrono::seconds(1);
    while (open_streams() > 0 && Clock::now() <= drain_until) {
      reap();
      poll_once(50);
    }
    flush_all();
    return first_failure.value_or(0);
  }

  void say(const std::string& line) const {
    if (!options.quiet) std::fprintf(stderr, "[kfrun] %s\n", line.c_str());
  }

  void spawn(const WorkerLaunch& w) {
    auto child = std::make_unique<Child>();
    Child& c = *child;
    c.launch = w;
    int out[2], err[2], in[2] = {-1, -1};
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
    if (::pipe2(err, O_CLOEXEC) != 0 || (w.stdin_text && ::pipe2(in, O_CLOEXEC) != 0)) {
      for (int fd : {out[0], out[1], err[0], err[1], in[0], in[1]})
        if (fd >= 0) ::close(fd);
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
    std::vector<std::string> args = w.command.empty() ? options.command : w.command;
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (int fd : {out[0], out[1], err[0], err[1], in[0], in[1]})
        if (fd >= 0) ::close(fd);
      throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
      // A worker dies with its launcher (kfrun killed by anything, SIGKILL included): the kernel
      // sends SIGKILL when kfrun goes, and a kfrun gone before this line is seen by getppid().
      // Workers never train on unsupervised. (The signal follows the thread that forked, which is
      // kfrun's main thread for the life of the job.)
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(137);
      ::setpgid(0, 0);
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      if (in[0] >= 0) ::dup2(in[0], STDIN_FILENO);
      struct sigaction sa {};
      sa.sa_handler = SIG_DFL;
      for (int sig : {SIGINT, SIGTERM, SIGCHLD, SIGPIPE})
        ::sigaction(sig, &sa, nullptr);
      ::execvpe(argv[0], argv.data(), envp.data());
      const char msg[] = "kfrun: cannot execute the worker command\n";
      [[maybe_unused]] const auto n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
      ::_exit(127);
    }
    ::setpgid(pid, pid);  // also here: no race with the first kill
    ::close(out[1]);
    ::close(err[1]);
    if (in[0] >= 0) {
      ::close(in[0]);
      c.in.reset(in[1]);
      // Small (an environment block): the pipe holds it. A child gone already is its exit's
      // business, not a write error's (the pool ignores SIGPIPE: EPIPE comes back instead).
      std::string_view rest = *w.stdin_text;
      while (!rest.empty()) {
        const ssize_t n = ::write(in[1], rest.data(), rest.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        rest.remove_prefix(static_cast<std::size_t>(n));
      }
    }
    c.pid = pid;
    c.running = true;
    const std::string name = fmt::format("{}.{}", w.id.host, w.id.port);
    c.out.fd.reset(out[0]);
    c.err.fd.reset(err[0]);
    const bool prefix = options.prefix && w.relay_host.empty();
    c.out.tag = prefix ? fmt::format("[{}::stdout] ", name) : "";
    c.err.tag = prefix ? fmt::format("[{}::stderr] ", name) : "";
    if (!w.relay_host.empty()) {
      c.out.kfrun_tag = c.err.kfrun_tag = fmt::format("[kfrun@{}] ", w.relay_host);
    }
    c.out.sink = stdout;
    c.err.sink = stderr;
    if (!options.logdir.empty()) {
      // A worker started again (elastic mode) appends to its files.
      const auto mode = started.insert(w.id).second ? std::ios::out : std::ios::app;
      c.out.log =
          std::make_unique<std::ofstream>(options.logdir + "/" + name + ".stdout.log", mode);
      c.err.log =
          std::make_unique<std::ofstream>(options.logdir + "/" + name + ".stderr.log", mode);
    }
    children.push_back(std::move(child));
    say(fmt::format("started {} as pid {}", c.label(), pid));
  }

  Child* find_running(const PeerID& id) const {
    for (const auto& c : children)
      if (c->running && c->launch.id == id) return c.get();
    return nullptr;
  }

  void retire(const PeerID& id) {
    Child* c = find_running(id);
    if (c == nullptr || c->retired) return;
    c->retired = true;
    c->stop(SIGTERM);
    c->kill_at = Clock::now() + options.grace;
  }

  int running() const {
    int n = 0;
    for (const auto& c : children)
      n += c->running ? 1 : 0;
    return n;
  }
  int open_streams() const {
    int n = 0;
    for (const auto& c : children)
      n += (c->out.fd ? 1 : 0) + (c->err.fd ? 1 : 0);
    return n;
  }

  void reap() {
    for (auto& c : children) {
      if (!c->running) continue;
      int status = 0;
      if (::waitpid(c->pid, &status, WNOHANG) != c->pid) continue;
      c->running = false;
      c->code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      exits.emplace_back(c->launch.id, c->code);
      if (c->code != 0 && !stopping && !c->retired) {
        say(fmt::format("{} failed with exit code {}{}", c->label(), c->code,
                        WIFSIGNALED(status) ? fmt::format(" (signal {})", WTERMSIG(status)) : ""));
        failures.push_back({c->label(), c->code, WIFSIGNALED(status), Clock::now()});
      } else {
        say(fmt::format("{} exited with code {}", c->label(), c->code));
      }
      c->in.reset();
    }
  }

  // The job's exit code: the first worker killed by a signal (a crash, the OOM killer, kill -9),
  // else the first to fail.
  void decide() {
    const auto signaled =
        std::find_if(failures.begin(), failures.end(), [](const Failure& f) { return f.signaled; });
    const Failure& cause = signaled != failures.end() ? *signaled : failures.front();
    first_failure = cause.code;
    if (failures.size() > 1)
      say(fmt::format("{} workers failed; exit code {} is {}'s{}", failures.size(), cause.code,
                      cause.label, cause.signaled ? ", killed by a signal" : ", the first"));
  }

  // Asks every worker to stop; those still running after the grace period are killed.
  void begin_stop(int sig) {
    stopping = true;
    stop_all(sig);
    if (!kill_at) kill_at = Clock::now() + options.grace;
  }

  void stop_all(int sig) {
    // A stopped worker (SIGSTOP, a debugger) would only see the signal once continued: stop()
    // sends SIGCONT too, so it handles it now instead of waiting for the SIGKILL.
    for (auto& c : children)
      if (c->running) c->stop(sig);
  }

  void emit(Stream& s, std::string_view line) {
    constexpr std::string_view kKfrun = "[kfrun] ";
    if (!s.kfrun_tag.empty() && line.starts_with(kKfrun)) {
      line.remove_prefix(kKfrun.size());
      std::fprintf(s.sink, "%s", s.kfrun_tag.c_str());
    }
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
      if (s.log) s.log->flush();
      return;
    }
    s.pending.append(buf, static_cast<std::size_t>(n));
    std::size_t begin = 0;
    for (std::size_t nl; (nl = s.pending.find('\n', begin)) != std::string::npos; begin = nl + 1)
      emit(s, std::string_view(s.pending).substr(begin, nl - begin));
    s.pending.erase(0, begin);
    std::fflush(s.sink);
  }

  void poll_once(int ms) {
    std::vector<pollfd> fds;
    std::vector<Stream*> streams;
    fds.push_back({signal_read.get(), POLLIN, 0});
    streams.push_back(nullptr);
    for (auto& c : children) {
      for (Stream* s : {&c->out, &c->err}) {
        if (!s->fd) continue;
        fds.push_back({s->fd.get(), POLLIN, 0});
        streams.push_back(s);
      }
    }
    if (::poll(fds.data(), fds.size(), ms) <= 0) return;
    if ((fds[0].revents & POLLIN) != 0) {
      unsigned char sigs[64];
      const ssize_t n = ::read(signal_read.get(), sigs, sizeof sigs);
      for (ssize_t i = 0; i < n; ++i) {
        if (sigs[i] == SIGINT || sigs[i] == SIGTERM) {
          say(fmt::format("got signal {}, forwarding it to the workers", sigs[i]));
          if (!first_failure) first_failure = 128 + sigs[i];
          begin_stop(sigs[i]);
        }
      }
    }
    for (std::size_t i = 1; i < fds.size(); ++i)
      if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) drain(*streams[i]);
  }

  void flush_all() {
    for (auto& c : children)
      for (Stream* s : {&c->out, &c->err}) {
        if (!s->pending.empty()) emit(*s, s->pending);
        s->pending.clear();
      }
    std::fflush(stdout);
    std::fflush(stderr);
  }

  const SupervisorOptions options;
  const Clock::time_point start_time;
  Fd signal_read, signal_write;
  struct sigaction saved_sigpipe {};
  std::vector<std::unique_ptr<Child>> children;
  std::set<PeerID> started;
  std::vector<std::pair<PeerID, int>> exits;
  struct Failure {
    std::string label;
    int code;
    bool signaled;
    Clock::time_point at;
  };
  static constexpr std::chrono::milliseconds kSettle{100};
  std::vector<Failure> failures;  // seen before the stop began
  std::optional<int> first_failure;
  bool stopping = false;
  bool timed_out = false;
  std::optional<Clock::time_point> kill_at;
};

WorkerPool::WorkerPool(const SupervisorOptions& options) : impl_(std::make_unique<Impl>(options)) {}
WorkerPool::~WorkerPool() = default;

void WorkerPool::start(const WorkerLaunch& worker) {
  impl_->spawn(worker);
}
void WorkerPool::turn(std::chrono::milliseconds wait) {
  impl_->turn(wait);
}
void WorkerPool::retire(const PeerID& id) {
  impl_->retire(id);
}
bool WorkerPool::is_running(const PeerID& id) const {
  return impl_->find_running(id) != nullptr;
}
int WorkerPool::running() const {
  return impl_->running();
}
std::vector<std::pair<PeerID, int>> WorkerPool::take_exits() {
  return std::exchange(impl_->exits, {});
}
std::optional<int> WorkerPool::failure() const {
  if (!impl_->first_failure && !impl_->failures.empty()) return impl_->failures.front().code;
  return impl_->first_failure;
}
int WorkerPool::finish() {
  return impl_->finish();
}
void WorkerPool::say(const std::string& line) const {
  impl_->say(line);
}

int supervise(const std::vector<WorkerLaunch>& workers, const SupervisorOptions& options) {
  if (workers.empty()) return 0;
  WorkerPool pool(options);
  for (const auto& w : workers)
    pool.start(w);
  while (pool.running() > 0)
    pool.turn(std::chrono::milliseconds(50));
  return pool.finish();
}

}  // namespace kf
