// kfrun: KungFu's launcher. Run it once on every host with the same flags; each computes the same
// global worker list, starts its own workers with the KUNGFU_* environment, prefixes their output
// and exits with the first failing worker's code.
//   kfrun -np 4 -H 10.0.0.1:2,10.0.0.2:2 -nic eth0 ./train --epochs 3
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "transport/real/config_server.h"
#include "transport/real/flags.h"
#include "transport/real/launch_plan.h"
#include "transport/real/supervisor.h"

int main(int argc, char** argv) {
  CLI::App app{"kfrun: start KungFu workers on this host (flags as kungfu-run)"};
  int np = 1;
  std::string hosts_text, hostfile, nic, self, port_range = "10000-11000", strategy, logdir;
  std::string timeout_text, config_server;
  bool quiet = false, verbose = true, watch = false;
  int builtin_config_port = 0;
  app.add_option("--np", np, "number of workers in total");
  app.add_option("--H", hosts_text, "hosts as ip:slots,ip:slots (default 127.0.0.1:np)");
  app.add_option("--hostfile", hostfile, "file of lines 'IP slots=N'");
  app.add_option("--nic", nic, "infer this host's IP from this network interface");
  app.add_option("--self", self, "this host's IP (as in -H)");
  app.add_option("--port-range", port_range, "worker ports, BEGIN-END");
  app.add_option("--strategy", strategy, "allreduce strategy (STAR, RING, RING_RS_AG, ...)");
  app.add_option("--logdir", logdir, "also write each worker's output to this directory");
  app.add_flag("--q", quiet, "quiet: no kfrun log lines");
  app.add_option("--timeout", timeout_text, "stop everything after this long (30s, 5m, 1h)");
  app.add_flag("--v", verbose,
               "prefix worker output with [ip.port::stdout] (default; -v=false: off)");
  app.add_flag("--w", watch, "elastic mode (arrives with the elastic issue)");
  app.add_option("--config-server", config_server, "config server URL (elastic mode)");
  app.add_option("--builtin-config-port", builtin_config_port,
                 "serve the planned cluster on this port (a config server for the workers)");
  app.prefix_command();  // everything from the worker program on is the worker's
  app.footer("Everything from the first non-flag word on is the worker command.");
  auto args = kf::go_style_args(argc, argv);
  try {
    app.parse(static_cast<int>(args.argv.size()), args.argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const std::vector<std::string> command = app.remaining();
  if (command.empty()) {
    std::fprintf(stderr, "kfrun: no worker command given\n%s", app.help().c_str());
    return 2;
  }
  try {
    if (watch || !config_server.empty()) {
      std::fprintf(stderr,
                   "[kfrun] -w / -config-server are accepted; elastic watching arrives with the "
                   "adaptation issue, running with a fixed cluster\n");
    }
    if (builtin_config_port < 0 || builtin_config_port > 65535) {
      throw std::invalid_argument(
          fmt::format("-builtin-config-port {}: must be 1..65535", builtin_config_port));
    }
    std::vector<kf::HostSlots> hosts;
    if (!hostfile.empty()) {
      std::ifstream in(hostfile);
      if (!in) throw std::invalid_argument("cannot read -hostfile " + hostfile);
      std::stringstream ss;
      ss << in.rdbuf();
      hosts = kf::parse_hostfile(ss.str());
    } else if (!hosts_text.empty()) {
      hosts = kf::parse_host_list(hosts_text);
    } else {
      hosts = {{"127.0.0.1", np}};
    }
    if (self.empty() && !nic.empty()) self = kf::interface_ip(nic);
    if (self.empty()) {
      if (hosts.size() != 1)
        throw std::invalid_argument("several hosts: say which is this one with -self or -nic");
      self = hosts[0].ip;
    }
    if (!strategy.empty() && !kf::parse_strategy_name(strategy)) {
      throw std::invalid_argument("-strategy " + strategy + ": unknown");
    }
    const auto cluster = kf::plan_cluster(hosts, np, kf::parse_port_range(port_range));
    // -builtin-config-port: this runner serves the planned cluster and its workers are told so.
    std::optional<kf::ConfigServer> builtin_server;
    if (builtin_config_port != 0) {
      const char* secret = std::getenv("KUNGFU_SECRET");
      builtin_server.emplace(
          kf::ConfigServerOptions{.addr = "0.0.0.0",
                                  .port = static_cast<std::uint16_t>(builtin_config_port),
                                  .token = secret != nullptr ? secret : "",
                                  .initial = cluster});
      config_server = fmt::format("http://{}:{}/config", self, builtin_config_port);
      if (!quiet) {
        std::fprintf(stderr, "[kfrun] config server on %s (cluster version %llu)\n",
                     config_server.c_str(), static_cast<unsigned long long>(cluster.version()));
      }
    }
    const auto workers = kf::local_workers(cluster, self, strategy, config_server);
    if (workers.empty()) {
      throw std::invalid_argument(fmt::format("no workers on this host ({}) in {}", self,
                                              kf::join_peers(cluster.workers())));
    }
    kf::SupervisorOptions options{
        .command = command, .prefix = verbose, .quiet = quiet, .logdir = logdir};
    if (!timeout_text.empty()) options.timeout = kf::parse_duration(timeout_text);
    return kf::supervise(workers, options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfrun: %s\n", e.what());
    return 2;
  }
}
