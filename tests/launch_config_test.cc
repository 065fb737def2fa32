// Pure parts of the launcher and of worker identity: host lists, hostfiles, port ranges, the
// cluster plan every runner derives, the KUNGFU_* environment, and identity from kfrun's,
// torchrun's, Open MPI's and Slurm's variables.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "launch/flags.h"
#include "launch/launch_plan.h"
#include "launch/startup_report.h"
#include "launch/worker_env.h"

namespace kf {
namespace {

TEST(LaunchPlan, ParsesHostListsAndHostfiles) {
  EXPECT_EQ(parse_host_list("10.0.0.1:2,10.0.0.2:3"),
            (std::vector<HostSlots>{{"10.0.0.1", 2}, {"10.0.0.2", 3}}));
  EXPECT_EQ(parse_host_list("10.0.0.1"), (std::vector<HostSlots>{{"10.0.0.1", 1}}));
  EXPECT_THROW(parse_host_list("10.0.0.1:x"), std::invalid_argument);
  EXPECT_THROW(parse_host_list(""), std::invalid_argument);
  EXPECT_EQ(
      parse_hostfile("# cluster\n10.0.0.1 slots=4\n\n10.0.0.2 slots=2  # gpu box\n10.0.0.3\n"),
      (std::vector<HostSlots>{{"10.0.0.1", 4}, {"10.0.0.2", 2}, {"10.0.0.3", 1}}));
  EXPECT_THROW(parse_hostfile("10.0.0.1 cores=4\n"), std::invalid_argument);
  const auto r = parse_port_range("12000-12010");
  EXPECT_EQ(r.begin, 12000);
  EXPECT_EQ(r.end, 12010);
  EXPECT_THROW(parse_port_range("12010-12000"), std::invalid_argument);
}

TEST(LaunchPlan, EveryRunnerDerivesTheSameCluster) {
  const auto c = plan_cluster({{"10.0.0.1", 2}, {"10.0.0.2", 2}}, 3, {10000, 11000});
  ASSERT_EQ(c.size(), 3);
  EXPECT_EQ(c.worker(0).to_string(), "10.0.0.1:10000");
  EXPECT_EQ(c.worker(1).to_string(), "10.0.0.1:10001");
  EXPECT_EQ(c.worker(2).to_string(), "10.0.0.2:10000");
  EXPECT_EQ(c.runners().size(), 2u);
  EXPECT_THROW(plan_cluster({{"10.0.0.1", 2}}, 3, {10000, 11000}), std::invalid_argument);
  EXPECT_THROW(plan_cluster({{"10.0.0.1", 4}}, 4, {10000, 10002}), std::invalid_argument);

  const auto local = local_workers(c, "10.0.0.2", "RING", "http://cfg:9100/config");
  ASSERT_EQ(local.size(), 1u);
  EXPECT_EQ(local[0].rank, 2);
  EXPECT_EQ(local[0].env.at("KUNGFU_SELF_SPEC"), "10.0.0.2:10000");
  EXPECT_EQ(local[0].env.at("KUNGFU_INIT_PEERS"), "10.0.0.1:10000,10.0.0.1:10001,10.0.0.2:10000");
  EXPECT_EQ(local[0].env.at("KUNGFU_INIT_RUNNERS"), "10.0.0.1:38080,10.0.0.2:38080");
  EXPECT_EQ(local[0].env.at("KUNGFU_ALLREDUCE_STRATEGY"), "RING");
  EXPECT_EQ(local[0].env.at("KUNGFU_CONFIG_SERVER"), "http://cfg:9100/config");

  // The environment kfrun writes is read back into the same identity.
  const auto back = worker_config_from(local[0].env);
  EXPECT_EQ(back.source, "kungfu");
  EXPECT_EQ(back.rank, 2);
  EXPECT_EQ(back.cluster, c);
  EXPECT_EQ(back.strategy, StrategyName::ring);
}

TEST(LaunchPlan, TheRunnerPortIsNeverAWorkersPort) {
  EXPECT_EQ(runner_port_clear_of(10000, 11000), kDefaultRunnerPort);
  EXPECT_EQ(runner_port_clear_of(38078, 38090), 38091);
  EXPECT_EQ(runner_port_clear_of(38000, 65535), 37999);
  EXPECT_THROW(runner_port_clear_of(1, 65535), std::invalid_argument);  // no port left
  // Worker ranges around 38080 plan valid clusters (ClusterSpec::problem() checks).
  const auto c = plan_cluster({{"127.0.0.1", 4}}, 4, {38078, 38090});
  EXPECT_EQ(c.runners().at(0).port, 38091);
  EXPECT_EQ(plan_cluster({{"127.0.0.1", 2}}, 2, {20000, 20010}, 20011).runners().at(0).port, 20011);
  EXPECT_THROW(plan_cluster({{"127.0.0.1", 2}}, 2, {38078, 38090}, 38080), std::invalid_argument);
  // So do launchers' variables with ports around it.
  const auto mpi = worker_config_from({{"OMPI_COMM_WORLD_RANK", "0"},
                                       {"OMPI_COMM_WORLD_SIZE", "4"},
                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                                       {"KUNGFU_PORT_BASE", "38078"}});
  EXPECT_EQ(mpi.cluster.problem(), std::nullopt);
  EXPECT_EQ(mpi.cluster.runners().at(0).port, 38082);
}

TEST(LaunchPlan, NicGivesItsAddress) {
  EXPECT_EQ(interface_ip("lo"), "127.0.0.1");
  EXPECT_THROW(interface_ip("no-such-nic0"), std::invalid_argument);
}

TEST(WorkerEnv, SinglePeerWithoutVariables) {
  const auto c = worker_config_from({{"HOME", "/root"}});
  EXPECT_EQ(c.source, "single");
  EXPECT_EQ(c.cluster.size(), 1);
  EXPECT_EQ(c.rank, 0);
}

TEST(WorkerEnv, Torchrun) {
  const auto c = worker_config_from({{"RANK", "3"},
                                     {"WORLD_SIZE", "4"},
                                     {"LOCAL_RANK", "1"},
                                     {"LOCAL_WORLD_SIZE", "2"},
                                     {"MASTER_ADDR", "10.0.0.1"},
                                     {"MASTER_PORT", "29500"},
                                     {"KUNGFU_HOSTS", "10.0.0.1,10.0.0.2"}});
  EXPECT_EQ(c.source, "torchrun");
  EXPECT_EQ(c.rank, 3);
  ASSERT_EQ(c.cluster.size(), 4);
  EXPECT_EQ(c.cluster.worker(0).to_string(), "10.0.0.1:29501");
  EXPECT_EQ(c.cluster.worker(3).to_string(), "10.0.0.2:29502");
  // One node: everyone on MASTER_ADDR.
  const auto one = worker_config_from(
      {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(one.cluster.worker(1).to_string(), "127.0.0.1:1236");
  // Several nodes without KUNGFU_HOSTS: an error that says what to set.
  try {
    worker_config_from({{"RANK", "0"}, {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "2"}});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("KUNGFU_HOSTS"), std::string::npos) << e.what();
  }
}

TEST(WorkerEnv, OpenMpiAndSlurm) {
  const auto mpi = worker_config_from({{"OMPI_COMM_WORLD_RANK", "2"},
                                       {"OMPI_COMM_WORLD_SIZE", "3"},
                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                       {"KUNGFU_PORT_BASE", "15000"}});
  EXPECT_EQ(mpi.source, "mpi");
  EXPECT_EQ(mpi.rank, 2);
  EXPECT_EQ(mpi.cluster.worker(2).to_string(), "127.0.0.1:15002");
  const auto slurm = worker_config_from({{"SLURM_PROCID", "1"},
                                         {"SLURM_NTASKS", "2"},
                                         {"SLURM_LOCALID", "0"},
                                         {"SLURM_NTASKS_PER_NODE", "1"},
                                         {"KUNGFU_HOSTS", "10.1.0.1,10.1.0.2"},
                                         {"KUNGFU_ALLREDUCE_STRATEGY", "ring_rs_ag"}});
  EXPECT_EQ(slurm.source, "slurm");
  EXPECT_EQ(slurm.rank, 1);
  EXPECT_EQ(slurm.cluster.worker(1).to_string(), "10.1.0.2:10000");
  EXPECT_EQ(slurm.strategy, StrategyName::ring_rs_ag);
  // KUNGFU_* wins over the others.
  const auto kf = worker_config_from({{"KUNGFU_SELF_SPEC", "127.0.0.1:10001"},
                                      {"KUNGFU_INIT_PEERS", "127.0.0.1:10000,127.0.0.1:10001"},
                                      {"SLURM_PROCID", "0"},
                                      {"SLURM_NTASKS", "2"}});
  EXPECT_EQ(kf.source, "kungfu");
  EXPECT_EQ(kf.rank, 1);
}

TEST(WorkerEnv, RejectsBadValues) {
  EXPECT_THROW(worker_config_from({{"RANK", "4"}, {"WORLD_SIZE", "4"}}), std::invalid_argument);
  EXPECT_THROW(worker_config_from(
                   {{"KUNGFU_SELF_SPEC", "127.0.0.1:1"}, {"KUNGFU_INIT_PEERS", "127.0.0.1:2"}}),
               std::invalid_argument);
  EXPECT_THROW(worker_config_from(
                   {{"KUNGFU_SELF_SPEC", "127.0.0.1:1"}, {"KUNGFU_ALLREDUCE_STRATEGY", "NOPE"}}),
               std::invalid_argument);
}

// torchrun's MASTER_PORT goes above rank 0's host's highest worker port, or below its lowest when
// that is 65535 (it wrapped to 0 before).
TEST(LaunchPlan, TheStorePortNeverWraps) {
  const ClusterSpec top(1, {{"127.0.0.1", 38080}}, {{"127.0.0.1", 65534}, {"127.0.0.1", 65535}});
  for (const auto& w : local_workers(top, "127.0.0.1", "", ""))
    EXPECT_EQ(w.env.at("MASTER_PORT"), "65533");
  const ClusterSpec low(1, {{"127.0.0.1", 38080}}, {{"127.0.0.1", 10000}, {"127.0.0.1", 10001}});
  EXPECT_EQ(local_workers(low, "127.0.0.1", "", "").at(0).env.at("MASTER_PORT"), "10002");
}

// Found by tests/fuzz/fuzz_cluster_json: the config server stores any 64-bit version, and the
// workers kfrun starts for it must read it back.
TEST(WorkerEnv, AnyClusterVersionTheConfigServerHolds) {
  const ClusterSpec spec(std::numeric_limits<std::uint64_t>::max(), {{"127.0.0.1", 38080}},
                         {{"127.0.0.1", 10000}, {"127.0.0.1", 10001}});
  for (const auto& w : local_workers(spec, "127.0.0.1", "", "")) {
    const auto c = worker_config_from(w.env);
    EXPECT_EQ(c.cluster, spec);
    EXPECT_EQ(c.rank, w.rank);
  }
  EXPECT_THROW(worker_config_from({{"KUNGFU_SELF_SPEC", "127.0.0.1:1"},
                                   {"KUNGFU_INIT_CLUSTER_VERSION", "18446744073709551616"}}),
               std::invalid_argument);
  EXPECT_THROW(worker_config_from(
                   {{"KUNGFU_SELF_SPEC", "127.0.0.1:1"}, {"KUNGFU_INIT_CLUSTER_VERSION", "-1"}}),
               std::invalid_argument);
}

// Found by tests/fuzz/fuzz_worker_env: a host with a comma was accepted, then split in two when
// kfrun passed the cluster on in KUNGFU_INIT_PEERS.
TEST(WorkerEnv, RejectsHostsThatCannotBeListed) {
  EXPECT_THROW(worker_config_from({{"KUNGFU_SELF_SPEC",
                                    "128.0.0.1=127.0.0.1:10000,127.0.0OMPI_COMM_WORLD_LOCAL_RANK=."
                                    "1:10001"}}),
               std::invalid_argument);
  EXPECT_THROW(worker_config_from(
                   {{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"MASTER_ADDR", "10.0.0.1 10.0.0.2"}}),
               std::invalid_argument);
}

// Found by tests/fuzz/fuzz_worker_env: workers on every port from 1 to 65535 left their runner
// port 0 (runner_port_clear_of has no port to give); refused now, naming it.
TEST(WorkerEnv, RejectsARunnerWithNoPortLeft) {
  try {
    worker_config_from({{"RANK", "0"}, {"WORLD_SIZE", "65535"}, {"KUNGFU_PORT_BASE", "1"}});
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("leaves no port for the runner"), std::string::npos)
        << e.what();
  }
}

TEST(StartupReport, NamesTheMissingPeersByHost) {
  const auto cluster = plan_cluster({{"10.0.0.1", 2}, {"10.0.0.3", 2}, {"10.0.0.4", 1}}, 5,
                                    parse_port_range("10000-10010"));
  EXPECT_EQ(describe_unconnected(cluster, 0, {4, 2, 3}),
            "3 of 4 peers not connected yet, from 2 hosts: 10.0.0.3 (rank 2 :10000, rank 3 "
            ":10001), 10.0.0.4 (rank 4 :10000)");
  EXPECT_EQ(describe_unconnected(cluster, 0, {4}),
            "1 of 4 peers not connected yet, from 1 host: 10.0.0.4 (rank 4 :10000)");
  EXPECT_EQ(waiting_line(cluster, 1, {4}, std::chrono::milliseconds(5000)),
            "rank 1 (10.0.0.1:10001) waiting 5 s: 1 of 4 peers not connected yet, from 1 host: "
            "10.0.0.4 (rank 4 :10000)");
  const auto last = gave_up_line(cluster, 0, {2, 3}, std::chrono::milliseconds(30200));
  EXPECT_TRUE(
      last.starts_with("rank 0 (10.0.0.1:10000) gave up after 30 s: 2 of 4 peers not "
                       "connected yet, from 1 host: 10.0.0.3 (rank 2 :10000, rank 3 "
                       ":10001)"))
      << last;
}

TEST(Flags, GoStyleArgsStopAtTheWorkerCommand) {
  std::vector<std::string> in = {"kfrun",   "-np", "4",        "-q",  "-port-range=1-2",
                                 "python3", "-u",  "train.py", "-lr", "0.1"};
  std::vector<char*> argv;
  for (auto& s : in)
    argv.push_back(s.data());
  const auto out = go_style_args(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(out.storage, (std::vector<std::string>{"kfrun", "--np", "4", "--q", "--port-range=1-2",
                                                   "python3", "-u", "train.py", "-lr", "0.1"}));
}

}  // namespace
}  // namespace kf
