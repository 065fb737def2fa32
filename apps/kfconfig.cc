// kfconfig: the standalone elastic config server (KungFu's kungfu-config-server), for jobs whose
// runners are started with -config-server URL. Serves one ClusterSpec on /config until SIGINT or
// SIGTERM.
//   kfconfig -port 9100 [-addr 0.0.0.0] [-init cluster.json] [-token-env KUNGFU_SECRET] [-v]
#include <fmt/format.h>
#include <signal.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "launch/cluster_json.h"
#include "launch/config_server.h"
#include "launch/flags.h"

namespace {

// The -init file as a valid cluster; throws std::invalid_argument naming the file.
kf::ClusterSpec read_init(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument(fmt::format("-init {}: cannot read file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    auto spec = kf::cluster_from_json(ss.str());
    if (auto problem = spec.problem()) throw std::invalid_argument("invalid cluster: " + *problem);
    return spec;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("-init {}: {}", path, e.what()));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kfconfig: the elastic config server (REST /config holding one cluster)"};
  int port = 9100;
  std::string addr = "0.0.0.0", init, token_env;
  bool verbose = false;
  app.add_option("--port", port, "port to serve on (0: any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--addr", addr, "address to listen on");
  app.add_option("--init", init, "initial cluster, a JSON file of kf.proto.ClusterSpec");
  app.add_option("--token-env", token_env,
                 "require 'Authorization: Bearer $NAME' on every request (e.g. KUNGFU_SECRET)");
  app.add_flag("--v", verbose, "log every request to stderr");
  auto args = kf::go_style_args(argc, argv, {"v"}, false);
  try {
    app.parse(static_cast<int>(args.argv.size()), args.argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  kf::ConfigServerOptions options{
      .addr = addr, .port = static_cast<std::uint16_t>(port), .verbose = verbose};
  try {
    if (!init.empty()) options.initial = read_init(init);
    if (!token_env.empty()) {
      const char* token = std::getenv(token_env.c_str());
      if (token == nullptr || *token == '\0') {
        throw std::invalid_argument(fmt::format("-token-env {}: variable is not set", token_env));
      }
      options.token = token;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfconfig: %s\n", e.what());
    return 2;
  }
  // Block the stop signals in every thread (the server's inherit the mask) and wait for one here.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  try {
    kf::ConfigServer server(options);
    std::fprintf(stderr, "kfconfig: serving http://%s:%u/config%s\n", addr.c_str(), server.port(),
                 options.token.empty() ? "" : " (bearer token required)");
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (verbose) std::fprintf(stderr, "kfconfig: signal %d, stopping\n", sig);
    server.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfconfig: %s\n", e.what());
    return 1;
  }
  return 0;
}
