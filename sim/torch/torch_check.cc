// check_torch_task_in_child: the check in a forked child, so that the caller (kfsim about to fork
// its --jobs workers) never starts an interpreter itself.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "sim/torch/torch_task.h"

namespace kf {

void check_torch_task_in_child(const TorchTaskSpec& spec) {
  int fds[2];
  if (::pipe(fds) != 0) throw TorchTaskError("workload.torch: cannot make a pipe");
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw TorchTaskError("workload.torch: cannot fork to check the task");
  }
  if (pid == 0) {
    ::close(fds[0]);
    int code = 0;
    std::string message;
    try {
      check_torch_task(spec);
    } catch (const std::exception& e) {
      message = e.what();
      code = 1;
    }
    for (std::size_t done = 0; done < message.size();) {
      const ssize_t n = ::write(fds[1], message.data() + done, message.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::_exit(code);  // no atexit handlers, no static destructors: the parent's, not ours
  }
  ::close(fds[1]);
  std::string message;
  char buffer[4096];
  for (;;) {
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n > 0) {
      message.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
  if (message.empty()) {
    message = "task module " + spec.module + ": checking it killed its process" +
              (WIFSIGNALED(status) ? " (signal " + std::to_string(WTERMSIG(status)) + ")" : "");
  }
  throw TorchTaskError(message);
}

}  // namespace kf
