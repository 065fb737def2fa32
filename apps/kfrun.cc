// kfrun: KungFu's launcher. Run it once on every host with the same flags; each computes the same
// global worker list, starts its own workers with the KUNGFU_* environment, prefixes their output
// and exits with a failing worker's code (of those failing within 100 ms of the first, the first
// killed by a signal: the others' errors follow from it). With -w (elastic) it also follows the
// config server and starts the workers that a resized cluster adds on its host.
//   kfrun -np 4 -H 10.0.0.1:2,10.0.0.2:2 -nic eth0 ./train --epochs 3
//   kfrun -w -np 2 -H 10.0.0.1:4,10.0.0.2:4 -nic eth0 -config-server http://10.0.0.1:9100 ./train
// HTTPS: -tls-cert/-tls-key make the builtin config server serve it; -tls-ca names the CA that
// the runners' and the workers' config clients check it against (handed over as KUNGFU_TLS_CA).
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "launch/config_client.h"
#include "launch/config_server.h"
#include "launch/elastic_supervisor.h"
#include "launch/flags.h"
#include "launch/launch_plan.h"
#include "launch/supervisor.h"
#include "policies/registry.h"
#include "real/tls_context.h"

namespace {

// A duration flag that must be above zero; the flag is named in the error.
std::chrono::milliseconds positive_duration(const char* flag, const std::string& text) {
  std::chrono::milliseconds d{};
  try {
    d = kf::parse_flag_duration(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(fmt::format("{} {}: {}", flag, text, e.what()));
  }
  if (d <= std::chrono::milliseconds::zero())
    throw std::invalid_argument(fmt::format("{} {}: must be above zero", flag, text));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kfrun: start KungFu workers on this host (flags as kungfu-run)"};
  int np = 1;
  std::string hosts_text, hostfile, nic, self, port_range = "10000-11000", strategy, logdir;
  std::string timeout_text, config_server, detach_timeout_text = "30s";
  std::string tls_cert, tls_key, tls_ca;
  bool quiet = false, verbose = true, watch = false;
  int builtin_config_port = 0, runner_port = 0;
  app.add_option("--np", np, "number of workers in total");
  app.add_option("--H", hosts_text, "hosts as ip:slots,ip:slots (default 127.0.0.1:np)");
  app.add_option("--hostfile", hostfile, "file of lines 'IP slots=N'");
  app.add_option("--nic", nic, "infer this host's IP from this network interface");
  app.add_option("--self", self, "this host's IP (as in -H)");
  app.add_option("--port-range", port_range, "worker ports, BEGIN-END");
  app.add_option("--runner-port", runner_port,
                 "the runners' port in the cluster spec (default 38080, or the port after "
                 "-port-range when that holds 38080)")
      ->check(CLI::Range(1, 65535));
  app.add_option("--strategy", strategy, "allreduce strategy (STAR, RING, RING_RS_AG, ...)");
  app.add_option("--logdir", logdir, "also write each worker's output to this directory");
  app.add_flag("--q", quiet, "quiet: no kfrun log lines");
  app.add_option("--timeout", timeout_text, "stop everything after this long (30s, 5m, 1h)");
  app.add_flag("--v", verbose,
               "prefix worker output with [ip.port::stdout] (default; -v=false: off)");
  app.add_flag("--w", watch,
               "elastic: watch the config server, start the workers a new cluster version adds "
               "on this host (needs -builtin-config-port or -config-server)");
  app.add_option("--detach-timeout", detach_timeout_text,
                 "-w: stop a worker still running this long after a version dropped it (30s)");
  app.add_option("--config-server", config_server, "config server URL (elastic mode)");
  app.add_option("--builtin-config-port", builtin_config_port,
                 "serve the planned cluster on this port (a config server for the workers)");
  app.add_option(
      "--tls-cert", tls_cert,
      "the builtin config server serves HTTPS with this certificate (PEM; with -tls-key)");
  app.add_option("--tls-key", tls_key, "the certificate's private key (PEM, unencrypted)");
  app.add_option("--tls-ca", tls_ca,
                 "check an https config server against this CA (PEM); handed to the workers as "
                 "KUNGFU_TLS_CA");
  std::vector<std::string> policies;
  app.add_option("--policy", policies,
                 "an adaptation policy for the workers, e.g. adaptive_strategy:threshold=0.8 "
                 "(repeatable; passed as KUNGFU_POLICY)")
      ->allow_extra_args(false);
  app.prefix_command();  // everything from the worker program on is the worker's
  app.footer("Everything from the first non-flag word on is the worker command.");
  auto args = kf::go_style_args(argc, argv);
  try {
    app.parse(static_cast<int>(args.argv.size()), args.argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; a bad flag is 2, as every input error
  }
  const std::vector<std::string> command = app.remaining();
  if (!policies.empty()) {
    // Checked here so a typo stops the job before any worker starts.
    std::string joined;
    for (const auto& p : policies) {
      try {
        (void)kf::make_policy(kf::parse_policy_flag(p));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "kfrun: -policy %s: %s\n", p.c_str(), e.what());
        return 2;
      }
      joined += (joined.empty() ? "" : ";") + p;
    }
    ::setenv("KUNGFU_POLICY", joined.c_str(), 1);  // inherited by every worker
  }
  if (command.empty()) {
    std::fprintf(stderr, "kfrun: no worker command given\n%s", app.help().c_str());
    return 2;
  }
  if (const auto problem = kf::worker_command_problem(command[0])) {
    std::fprintf(stderr, "kfrun: %s\n", problem->c_str());
    return 2;
  }
  try {
    if (watch && config_server.empty() && builtin_config_port == 0) {
      std::fprintf(stderr,
                   "kfrun: -w needs a config server: -builtin-config-port PORT (serve one here) "
                   "or -config-server URL\n");
      return 2;
    }
    if (builtin_config_port < 0 || builtin_config_port > 65535) {
      throw std::invalid_argument(
          fmt::format("-builtin-config-port {}: must be 1..65535", builtin_config_port));
    }
    if ((!tls_cert.empty() || !tls_key.empty()) && builtin_config_port == 0) {
      throw std::invalid_argument(
          "-tls-cert and -tls-key are for the builtin config server: "
          "give -builtin-config-port too");
    }
    if (!tls_ca.empty()) {
      kf::tls::check_ca_file({tls_ca, "-tls-ca"});
      ::setenv("KUNGFU_TLS_CA", tls_ca.c_str(), 1);  // this runner's clients and every worker's
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
    const auto ports = kf::parse_port_range(port_range);
    const auto cluster =
        kf::plan_cluster(hosts, np, ports, static_cast<std::uint16_t>(runner_port));
    // Every job is authenticated: with no KUNGFU_SECRET, a job on this host alone gets a fresh
    // secret, handed to its workers through the environment (never on a command line). Runners
    // on several hosts cannot share one they each made: there the user sets it on every host.
    const char* secret_env = std::getenv("KUNGFU_SECRET");
    std::string secret = secret_env != nullptr ? secret_env : "";
    if (secret.empty()) {
      if (hosts.size() == 1) {
        secret = kf::random_secret();
        ::setenv("KUNGFU_SECRET", secret.c_str(), 1);
      } else if (!quiet) {
        std::fprintf(stderr,
                     "[kfrun] WARNING: no KUNGFU_SECRET: the workers%s accept anyone who reaches "
                     "them; set the same KUNGFU_SECRET on every host\n",
                     builtin_config_port != 0 ? " and the config server" : "");
      }
    }
    // -builtin-config-port: this runner serves the planned cluster and its workers are told so.
    std::optional<kf::ConfigServer> builtin_server;
    if (builtin_config_port != 0) {
      kf::ConfigServerOptions server_options{
          .addr = self,  // the address the workers are given
          .port = static_cast<std::uint16_t>(builtin_config_port),
          .token = secret,
          .initial = cluster};
      server_options.tls_cert.path = tls_cert;
      server_options.tls_key.path = tls_key;
      builtin_server.emplace(std::move(server_options));
      config_server =
          fmt::format("{}://{}:{}/config", builtin_server->scheme(), self, builtin_config_port);
      if (!tls_cert.empty()) {
        // The workers check the certificate as this client does: one that names another host,
        // or that the CA did not sign, stops the job here rather than in every worker.
        try {
          (void)kf::ConfigClient(config_server, secret, std::chrono::seconds(5)).get();
        } catch (const std::runtime_error& e) {
          throw std::invalid_argument(fmt::format("-tls-cert {}: {}", tls_cert, e.what()));
        }
      }
      if (!quiet) {
        std::fprintf(stderr, "[kfrun] config server on %s (cluster version %llu)\n",
                     config_server.c_str(), static_cast<unsigned long long>(cluster.version()));
      }
    }
    kf::SupervisorOptions options{
        .command = command, .prefix = verbose, .quiet = quiet, .logdir = logdir};
    if (!timeout_text.empty()) options.timeout = positive_duration("-timeout", timeout_text);
    if (!logdir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(logdir, ec);
      if (ec || ::access(logdir.c_str(), W_OK) != 0) {
        throw std::invalid_argument(fmt::format("-logdir {}: cannot write there: {}", logdir,
                                                ec ? ec.message() : std::strerror(errno)));
      }
    }
    if (watch) {
      options.detach_timeout = positive_duration("-detach-timeout", detach_timeout_text);
      const kf::ElasticOptions elastic{.self = self,
                                       .strategy = strategy,
                                       .config_server = config_server,
                                       .token = secret,
                                       .env = {.host_slots = kf::format_host_list(hosts),
                                               .port_range = kf::format_port_range(ports)}};
      // The builtin server already holds the planned cluster; an external one is initialised by
      // the first runner to find it empty.
      const auto initial =
          builtin_server ? cluster
                         : kf::initial_cluster(
                               kf::ConfigClient(config_server, secret, elastic.request_timeout),
                               cluster, elastic.server_lost_after);
      return kf::supervise_elastic(initial, elastic, options);
    }
    const auto workers = kf::local_workers(cluster, self, strategy, config_server);
    if (workers.empty()) {
      throw std::invalid_argument(fmt::format("no workers on this host ({}) in {}", self,
                                              kf::join_peers(cluster.workers())));
    }
    return kf::supervise(workers, options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kfrun: %s\n", e.what());
    return 2;
  }
}
