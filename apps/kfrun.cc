// kfrun: KungFu's launcher. Run it once on every host with the same flags; each computes the same
// global worker list, starts its own workers with the KUNGFU_* environment, prefixes their output
// and exits with a failing worker's code (of those failing within 100 ms of the first, the first
// killed by a signal: the others' errors follow from it). With -w (elastic) it also follows the
// config server and starts the workers that a resized cluster adds on its host.
//   kfrun -np 4 -H 10.0.0.1:2,10.0.0.2:2 -nic eth0 ./train --epochs 3
//   kfrun -w -np 2 -H 10.0.0.1:4,10.0.0.2:4 -nic eth0 -config-server http://10.0.0.1:9100 ./train
// HTTPS: -tls-cert/-tls-key make the builtin config server serve it; -tls-ca names the CA that
// the runners' and the workers' config clients check it against (handed over as KUNGFU_TLS_CA).
// -ssh: run once, on one host; it checks every host (pre-flight), then starts the runner on each
// over SSH with the same flags and KUNGFU_* environment (launch/ssh_launch.h):
//   kfrun -ssh -np 8 -hostfile hosts.txt -nic eth0 ./train
// -ssh-child and -ssh-check are that launcher's own: a runner it started, and its pre-flight.
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
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "launch/config_client.h"
#include "launch/config_server.h"
#include "launch/elastic_supervisor.h"
#include "launch/flags.h"
#include "launch/launch_plan.h"
#include "launch/preflight.h"
#include "launch/ssh_launch.h"
#include "launch/ssh_remote.h"
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

// The flags as given, as "-name=value" words, for the runners kfrun -ssh starts, leaving out
// those it sets per host (and -help).
std::vector<std::string> relayed_flags(const CLI::App& app, const std::set<std::string>& omit) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app.get_options()) {
    std::string name = opt->get_name();
    while (name.starts_with("-"))
      name.erase(0, 1);
    if (opt->count() == 0 || omit.contains(name) || name == "help" || name == "h") continue;
    for (const auto& value : opt->results())
      out.push_back(value.empty() ? "-" + name : "-" + name + "=" + value);
  }
  return out;
}

// The absolute path of this kfrun, what the other hosts run unless -ssh-kfrun says otherwise.
std::string own_path() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot read /proc/self/exe: " + ec.message());
  return p.string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kfrun: start KungFu workers on this host (flags as kungfu-run)"};
  int np = 1;
  std::string hosts_text, hostfile, nic, self, port_range = "10000-11000", strategy, logdir;
  std::string timeout_text, config_server, detach_timeout_text = "30s";
  std::string tls_cert, tls_key, tls_ca;
  std::string ssh_kfrun;
  kf::SshOptions ssh_options;
  bool quiet = false, verbose = true, watch = false;
  bool over_ssh = false, ssh_child = false, ssh_check = false;
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
  app.add_flag("--ssh", over_ssh,
               "start the runner on every host of -H / -hostfile over SSH from here, after a "
               "pre-flight of every host (run kfrun once, on one host)");
  app.add_option("--ssh-port", ssh_options.port, "-ssh: the hosts' SSH port (ssh -p)");
  app.add_option("--ssh-identity", ssh_options.identity, "-ssh: the private key (ssh -i)");
  app.add_option("--ssh-config", ssh_options.config, "-ssh: an ssh client config file (ssh -F)");
  app.add_option("--ssh-kfrun", ssh_kfrun,
                 "-ssh: the kfrun to run on the hosts (default: this one's absolute path)");
  app.add_flag("--ssh-child", ssh_child, "")->group("");  // a runner kfrun -ssh started
  app.add_flag("--ssh-check", ssh_check, "")->group("");  // kfrun -ssh's pre-flight of a host
  app.prefix_command();  // everything from the worker program on is the worker's
  app.footer("Everything from the first non-flag word on is the worker command.");
  auto args = kf::go_style_args(argc, argv, {"q", "w", "v", "ssh", "ssh-child", "ssh-check"});
  try {
    app.parse(static_cast<int>(args.argv.size()), args.argv.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help is 0; a bad flag is 2, as every input error
  }
  const std::vector<std::string> command = app.remaining();
  if (over_ssh + ssh_child + ssh_check > 1) {
    std::fprintf(stderr, "kfrun: -ssh, -ssh-child and -ssh-check exclude each other\n");
    return 2;
  }
  if (ssh_child) {
    // Started by kfrun -ssh: the job's environment (the secret too) comes on stdin, and the end
    // of stdin is the order to stop.
    try {
      for (const auto& [k, v] : kf::read_environment_block(STDIN_FILENO))
        ::setenv(k.c_str(), v.c_str(), 1);
      kf::stop_when_stdin_closes();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kfrun -ssh-child: %s\n", e.what());
      return 2;
    }
  }
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
  // (-ssh checks it on every host, in its pre-flight, -ssh-check being that check.)
  const auto problem =
      over_ssh || ssh_check ? std::nullopt : kf::worker_command_problem(command[0]);
  if (problem) {
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
    if (!strategy.empty() && !kf::parse_strategy_name(strategy)) {
      throw std::invalid_argument("-strategy " + strategy + ": unknown");
    }
    if (over_ssh) {
      const auto ports = kf::parse_port_range(port_range);
      kf::SshLaunch launch{
          .hosts = hosts,
          .cluster = kf::plan_cluster(hosts, np, ports, static_cast<std::uint16_t>(runner_port)),
          .elastic = watch,
          .command = command,
          .nic = nic,
          .builtin_config_port = builtin_config_port,
          .config_scheme = tls_cert.empty() ? "http" : "https",
          .kfrun = ssh_kfrun.empty() ? own_path() : ssh_kfrun,
          .quiet = quiet};
      launch.runner_flags =
          relayed_flags(app, {"H", "hostfile", "self", "nic", "ssh", "ssh-port", "ssh-identity",
                              "ssh-config", "ssh-kfrun", "ssh-child", "ssh-check",
                              "builtin-config-port", "tls-cert", "tls-key"});
      if (!tls_cert.empty()) launch.server_flags = {"-tls-cert=" + tls_cert, "-tls-key=" + tls_key};
      if (!timeout_text.empty()) launch.timeout = positive_duration("-timeout", timeout_text);
      if (!ssh_options.port.empty()) {
        const auto p = ssh_options.port;
        if (p.find_first_not_of("0123456789") != std::string::npos || p.size() > 5 ||
            std::stoi(p) < 1 || std::stoi(p) > 65535)
          throw std::invalid_argument(fmt::format("-ssh-port {}: expected a port, 1..65535", p));
      }
      // One secret for the whole job, made here when none is set, handed to every runner on
      // its stdin.
      const char* secret = std::getenv("KUNGFU_SECRET");
      if (secret == nullptr || *secret == '\0')
        ::setenv("KUNGFU_SECRET", kf::random_secret().c_str(), 1);
      return kf::launch_over_ssh(launch, ssh_options);
    }
    if (self.empty() && !nic.empty()) self = kf::interface_ip(nic);
    if (self.empty()) {
      if (hosts.size() != 1)
        throw std::invalid_argument("several hosts: say which is this one with -self or -nic");
      self = hosts[0].ip;
    }
    const auto ports = kf::parse_port_range(port_range);
    const auto cluster =
        kf::plan_cluster(hosts, np, ports, static_cast<std::uint16_t>(runner_port));
    if (ssh_check) {
      // kfrun -ssh's pre-flight of this host: what would stop this runner, on stdout.
      kf::HostCheck check{.self = self, .nic = nic, .worker_program = command[0]};
      if (watch) {  // the job may grow onto every slot of this host
        for (const auto& h : hosts)
          for (int j = 0; h.ip == self && j < h.slots; ++j)
            check.ports.push_back(static_cast<std::uint16_t>(ports.begin + j));
      } else {
        for (const auto& id : cluster.workers())
          if (id.host == self) check.ports.push_back(id.port);
      }
      if (builtin_config_port != 0)
        check.ports.push_back(static_cast<std::uint16_t>(builtin_config_port));
      const auto problems = kf::host_problems(check);
      std::fputs(kf::check_report(problems).c_str(), stdout);
      return problems.empty() ? 0 : 1;
    }
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
