#include "sim/plot.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <vector>

namespace kf {

int plot_records(const std::string& out, bool quiet) {
  namespace fs = std::filesystem;
  fs::path script;
  if (const char* dir = std::getenv("KF_ANALYSIS_DIR")) script = fs::path(dir) / "plot.py";
  std::error_code ec;
  for (fs::path p = fs::read_symlink("/proc/self/exe", ec).parent_path();
       script.empty() && !ec && p.has_relative_path(); p = p.parent_path()) {
    if (fs::exists(p / "analysis" / "plot.py")) script = p / "analysis" / "plot.py";
  }
  if (script.empty() || !fs::exists(script)) {
    fmt::print(stderr, "kfsim --plot: cannot find analysis/plot.py (set KF_ANALYSIS_DIR)\n");
    return 1;
  }
  const std::string python = "/usr/bin/python3", path = script.string();
  std::vector<char*> argv{const_cast<char*>(python.c_str()), const_cast<char*>(path.c_str()),
                          const_cast<char*>("-q"), const_cast<char*>(out.c_str()), nullptr};
  pid_t pid = 0;
  int status = 0;
  if (posix_spawn(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ) != 0 ||
      waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fmt::print(stderr,
               "kfsim --plot: {} {} {} failed; it needs {} with python3-matplotlib and "
               "python3-numpy (./kf setup installs them)\n",
               python, path, out, python);
    return 1;
  }
  if (!quiet) fmt::print("  plots: {}/*.png, *.pdf\n", out);
  return 0;
}

}  // namespace kf
