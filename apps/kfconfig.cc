// kfconfig: the standalone elastic config server (KungFu's kungfu-config-server), for jobs whose
// runners are started with -config-server URL. Serves one ClusterSpec on /config until SIGINT or
// SIGTERM.
//   kfconfig -port 9100 [-addr 0.0.0.0] [-init cluster.json] [-token-env NAME] [-insecure] [-v]
//            [-tls-cert cert.pem -tls-key key.pem]
// Closed by default: it listens on loopback unless given an address, takes KUNGFU_SECRET (or
// the variable -token-env names) as its bearer token whenever set, and refuses to serve another
// address without a token unless told -insecure. With -tls-cert and -tls-key it serves HTTPS
// only, so the token and the cluster never cross the network in the clear.
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
  std::string addr = "127.0.0.1", init, token_env = "KUNGFU_SECRET", tls_cert, tls_key;
  bool verbose = false, insecure = false;
  app.add_option("--port", port, "port to serve on (0: any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--addr", addr, "address to listen on (default loopback; 0.0.0.0: every one)");
  app.add_option("--init", init, "initial cluster, a JSON file of kf.proto.ClusterSpec");
  app.add_option("--token-env", token_env,
                 "require 'Authorization: Bearer $NAME' on every request when NAME is set "
                 "(default KUNGFU_SECRET); naming another variable makes it required");
  app.add_flag("--insecure", insecure,
               "serve an address other than loopback without a token (anyone who reaches it "
               "can resize or end the job)");
  app.add_flag("--v", verbose, "log every request to stderr");
  app.add_option("--tls-cert", tls_cert,
                 "serve HTTPS with this certificate chain (PEM, the leaf first; with -tls-key)");
  app.add_option("--tls-key", tls_key, "the certificate's private key (PEM, unencrypted)");
  auto args = kf::go_style_args(argc, argv, {"v", "insecure"}, false);
  try {
    app.parse(static_cast<int>(args.argv.size()), args.argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; a bad flag is 2, as every input error
  }
  kf::ConfigServerOptions options{
      .addr = addr, .port = static_cast<std::uint16_t>(port), .verbose = verbose};
  options.tls_cert.path = tls_cert;
  options.tls_key.path = tls_key;
  try {
    if (!init.empty()) options.initial = read_init(init);
    const char* token = token_env.empty() ? nullptr : std::getenv(token_env.c_str());
    if (token != nullptr && *token != '\0') {
      options.token = token;
    } else if (app.count("--token-env") > 0) {
      throw std::invalid_argument(fmt::format("-token-env {}: variable is not set", token_env));
    }
    if (options.token.empty() && !kf::is_loopback_address(addr)) {
      if (!insecure) {
        throw std::invalid_argument(fmt::format(
            "-addr {} without a token: set KUNGFU_SECRET (or -token-env NAME) so that only the "
            "job can change its cluster, or pass -insecure to serve it unauthenticated",
            addr));
      }
      std::fprintf(stderr,
                   "kfconfig: WARNING: serving %s without a token (-insecure): anyone who "
                   "reaches it can resize or end the job\n",
                   addr.c_str());
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
    std::fprintf(stderr, "kfconfig: serving %s://%s:%u/config%s\n", server.scheme(), addr.c_str(),
                 server.port(), options.token.empty() ? "" : " (bearer token required)");
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (verbose) std::fprintf(stderr, "kfconfig: signal %d, stopping\n", sig);
    server.stop();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "kfconfig: %s\n", e.what());  // a TLS file that cannot be used
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfconfig: %s\n", e.what());
    return 1;
  }
  return 0;
}
