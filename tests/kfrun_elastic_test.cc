// kfrun -w (elastic mode) end to end over loopback, with elastic_fake_worker standing in for a
// training program: kfrun starts the initial workers, starts the ones a resized cluster adds
// (KUNGFU_JOINING=1, the new peer list), leaves the dropped one to exit 0, and exits 0 at the
// end; a failing worker fails the job; a dropped worker that stays is stopped; a runner with no
// initial worker picks up growth onto its host. Also the launch plan's elastic pieces.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "launch/config_server.h"
#include "launch/launch_plan.h"
#include "net_helpers.h"

namespace kf {
namespace {

// Every command here needs a shell (variables, pipes): bash -c, 60 s at most.
testing::CommandResult run_command(const std::string& cmd, int limit_s = 60) {
  return testing::run_command(cmd, limit_s, true);
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

class KfrunElastic : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          fmt::format("kfrun_elastic_{}_{}", ::getpid(),
                      ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    base = testing::free_port_base(8);
    ASSERT_NE(base, 0);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  // "kfrun -w ... elastic_fake_worker MODE DIR"
  std::string kfrun(const std::string& flags, const std::string& mode,
                    const std::string& timeout = "50s") const {
    return fmt::format("{} -w -timeout {} -port-range {}-{} {} {} {} {}", KFRUN, timeout, base,
                       base + 7, flags, FAKE_WORKER, mode, dir.string());
  }
  std::string worker(int i, const std::string& host = "127.0.0.1") const {
    return fmt::format("{}:{}", host, base + i);
  }
  std::string tag(int i, const std::string& host = "127.0.0.1") const {
    return fmt::format("[{}.{}::stdout] ", host, base + i);
  }

  std::filesystem::path dir;
  std::uint16_t base = 0;
};

TEST_F(KfrunElastic, GrowsToFourThenShrinksToThreeAndExitsZero) {
  const auto config_port = testing::free_port_base(1);
  ASSERT_NE(config_port, 0);
  const auto r =
      run_command("KUNGFU_SECRET=s3cret " +
                  kfrun(fmt::format("-np 2 -H 127.0.0.1:4 -builtin-config-port {}", config_port),
                        "grow-shrink"));
  EXPECT_EQ(r.code, 0) << r.output;
  const std::string common =
      fmt::format("elastic=1 host_slots=127.0.0.1:4 port_range={}-{}", base, base + 7);
  const std::string v0 = fmt::format("{},{}", worker(0), worker(1));
  const std::string v1 = fmt::format("{},{},{},{}", worker(0), worker(1), worker(2), worker(3));
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(has(r.output, fmt::format("{}start self={} version=0 joining=0 {} peers={}", tag(i),
                                          worker(i), common, v0)))
        << i << "\n"
        << r.output;
  }
  for (int i = 2; i < 4; ++i) {
    EXPECT_TRUE(has(r.output, fmt::format("{}start self={} version=1 joining=1 {} peers={}", tag(i),
                                          worker(i), common, v1)))
        << i << "\n"
        << r.output;
  }
  EXPECT_TRUE(has(
      r.output, fmt::format("cluster version 0: 2 workers; starting {}, {}", worker(0), worker(1))))
      << r.output;
  EXPECT_TRUE(has(
      r.output, fmt::format("cluster version 1: 4 workers; starting {}, {}", worker(2), worker(3))))
      << r.output;
  EXPECT_TRUE(has(r.output, "cluster version 2: 3 workers")) << r.output;
  EXPECT_TRUE(has(r.output, tag(3) + "detached at version 2")) << r.output;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(has(r.output, fmt::format("{}done at version 2 as rank {} of 3", tag(i), i)))
        << r.output;
  }
  EXPECT_TRUE(has(r.output, fmt::format("({}) exited with code 0", worker(3)))) << r.output;
  EXPECT_TRUE(has(r.output, "every worker on 127.0.0.1 exited 0: done")) << r.output;
  // Each worker ran once: one that finished before kfrun saw version 2 is not started again.
  EXPECT_EQ(count(r.output, "[kfrun] started rank"), 4) << r.output;
  EXPECT_EQ(count(r.output, "start self="), 4) << r.output;
}

TEST_F(KfrunElastic, ExternalServerIsInitialisedAndGrowthReachesAnIdleHost) {
  // Two runners on two loopback "hosts"; 127.0.0.2 has no initial worker and picks up growth.
  ConfigServer server({.port = 0, .token = "tok"});
  const std::string url = fmt::format("http://127.0.0.1:{}/config", server.port());
  const std::string flags = fmt::format("-np 2 -H 127.0.0.1:2,127.0.0.2:2 -config-server {}", url);
  const std::string a = kfrun(flags + " -self 127.0.0.1", "grow-shrink");
  const std::string b = kfrun(flags + " -self 127.0.0.2", "grow-shrink");
  const auto log_a = (dir / "a.log").string(), log_b = (dir / "b.log").string();
  // The idle runner starts first and initialises the server (POST); the other finds it there.
  const auto r = run_command(fmt::format(
      "export KUNGFU_SECRET=tok; {} >{} 2>&1 & pb=$!; sleep 0.3; {} >{} 2>&1; ra=$?; wait $pb; "
      "echo codes $ra $?",
      b, log_b, a, log_a));
  const auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  const std::string out_a = read(log_a), out_b = read(log_b);
  EXPECT_TRUE(has(r.output, "codes 0 0")) << r.output << "\n--- a:\n"
                                          << out_a << "\n--- b:\n"
                                          << out_b;
  // resized(4) puts workers 2 and 3 on the runner with none: 127.0.0.2, ports base, base+1.
  const std::string v1 = fmt::format("{},{},{},{}", worker(0), worker(1), worker(0, "127.0.0.2"),
                                     worker(1, "127.0.0.2"));
  EXPECT_TRUE(has(out_b, "cluster version 0: 2 workers; nothing to start on 127.0.0.2")) << out_b;
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(has(out_b, fmt::format("{}start self={} version=1 joining=1", tag(i, "127.0.0.2"),
                                       worker(i, "127.0.0.2"))))
        << out_b;
    EXPECT_TRUE(has(out_b, "peers=" + v1)) << out_b;
  }
  EXPECT_TRUE(has(out_b, tag(1, "127.0.0.2") + "detached at version 2")) << out_b;
  EXPECT_TRUE(has(out_a, tag(0) + "done at version 2 as rank 0 of 3")) << out_a;
  const auto stored = server.current();
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(stored->version(), 2u);
  EXPECT_EQ(stored->size(), 3);
}

TEST_F(KfrunElastic, AJoinedWorkerFailingFailsTheJob) {
  const auto config_port = testing::free_port_base(1);
  ASSERT_NE(config_port, 0);
  const auto r = run_command(
      kfrun(fmt::format("-np 2 -H 127.0.0.1:4 -builtin-config-port {}", config_port), "grow-fail"));
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_TRUE(has(r.output, tag(3) + "joined worker failing on purpose")) << r.output;
  EXPECT_TRUE(has(r.output, fmt::format("({}) failed with exit code 5", worker(3)))) << r.output;
}

TEST_F(KfrunElastic, AnInitialWorkerFailingFailsTheJob) {
  const auto config_port = testing::free_port_base(1);
  ASSERT_NE(config_port, 0);
  const auto r =
      run_command(kfrun(fmt::format("-np 2 -builtin-config-port {}", config_port), "fail"));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_TRUE(has(r.output, fmt::format("({}) failed with exit code 3", worker(1)))) << r.output;
}

TEST_F(KfrunElastic, ADroppedWorkerThatStaysIsStopped) {
  const auto config_port = testing::free_port_base(1);
  ASSERT_NE(config_port, 0);
  const auto started = std::chrono::steady_clock::now();
  const auto r = run_command(kfrun(
      fmt::format("-np 2 -H 127.0.0.1:4 -builtin-config-port {} -detach-timeout 1s", config_port),
      "stubborn"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30));
  EXPECT_TRUE(has(r.output, tag(3) + "dropped at version 2, staying anyway")) << r.output;
  EXPECT_TRUE(has(r.output, fmt::format("{} is still running 1 s after cluster version 2 dropped "
                                        "it: stopping it",
                                        worker(3))))
      << r.output;
}

TEST_F(KfrunElastic, GrowthSeenOnlyAfterEveryWorkerLeftStillStartsTheNewOnes) {
  // Rank 0 PUTs 4 workers and everyone exits at once: the final fresh GET must catch version 1.
  const auto config_port = testing::free_port_base(1);
  ASSERT_NE(config_port, 0);
  const auto r = run_command(kfrun(
      fmt::format("-np 2 -H 127.0.0.1:4 -builtin-config-port {}", config_port), "put-and-exit"));
  EXPECT_EQ(r.code, 0) << r.output;
  for (int i = 2; i < 4; ++i)
    EXPECT_TRUE(
        has(r.output, fmt::format("{}start self={} version=1 joining=1", tag(i), worker(i))))
        << r.output;
  EXPECT_EQ(count(r.output, "[kfrun] started rank"), 4) << r.output;
  EXPECT_TRUE(has(r.output, "cluster version 1: every worker on 127.0.0.1 exited 0: done"))
      << r.output;
}

TEST_F(KfrunElastic, AWorkerDroppedAndAddedBackIsStartedAgain) {
  // Two resizes drop the second host's only worker and add it back; the worker exits 0 as told.
  // Rounds 0 and 1: both at once, the worker gone right after them, so its runner often learns
  // of both only from its fresh GET once nothing runs there: it must still apply version 1
  // before 2 and start the worker again. Round 2: version 2 a second later, so the runner first
  // sees its host left out of the latest cluster: it must keep watching for growth, not stop.
  // (Both found by tests/chaos/.)
  const auto config_port = testing::free_port_base(3);
  ASSERT_NE(config_port, 0);
  for (int round = 0; round < 3; ++round) {
    const std::string mode = round < 2 ? "drop-readd" : "drop-readd-later";
    const auto sub = dir / std::to_string(round);
    std::filesystem::create_directories(sub);
    const auto runner = [&](const std::string& self, const std::string& config) {
      return fmt::format(
          "{} -w -timeout 50s -port-range {}-{} -np 2 -H 127.0.0.1:1,127.0.0.2:1 -self {} {} {} "
          "{} {}",
          KFRUN, base, base + 7, self, config, FAKE_WORKER, mode, sub.string());
    };
    const int port = config_port + round;
    const std::string a = runner("127.0.0.1", fmt::format("-builtin-config-port {}", port));
    const std::string b =
        runner("127.0.0.2", fmt::format("-config-server http://127.0.0.1:{}/config", port));
    const auto r = run_command(fmt::format(
        "export KUNGFU_SECRET=tok; {} >{}/a.log 2>&1 & pa=$!; {} >{}/b.log 2>&1; rb=$?; "
        "wait $pa; echo codes $? $rb; cat {}/a.log {}/b.log",
        a, sub.string(), b, sub.string(), sub.string(), sub.string()));
    EXPECT_TRUE(has(r.output, "codes 0 0")) << mode << "\n" << r.output;
    EXPECT_TRUE(has(r.output, fmt::format("{}start self={} version=2 joining=1",
                                          tag(0, "127.0.0.2"), worker(0, "127.0.0.2"))))
        << mode << "\n"
        << r.output;
    EXPECT_TRUE(has(r.output, "the re-added worker started again")) << mode << "\n" << r.output;
  }
}

TEST_F(KfrunElastic, SigtermIsForwarded) {
  const auto config_port = testing::free_port_base(1);
  ASSERT_NE(config_port, 0);
  const auto r = run_command(
      fmt::format("{} & p=$!; sleep 1; kill -TERM $p; wait $p; echo code $?",
                  kfrun(fmt::format("-np 2 -builtin-config-port {}", config_port), "wait")));
  EXPECT_TRUE(has(r.output, "code 143")) << r.output;
  EXPECT_TRUE(has(r.output, "got signal 15, forwarding it to the workers")) << r.output;
}

TEST_F(KfrunElastic, AnIdleRunnerWaitsForGrowthUntilTheTimeout) {
  // 127.0.0.2 has no worker in the initial cluster and nobody grows the job: it keeps watching
  // until -timeout.
  const auto config_port = testing::free_port_base(1);
  ASSERT_NE(config_port, 0);
  const auto started = std::chrono::steady_clock::now();
  const auto r = run_command(
      kfrun(fmt::format("-np 1 -H 127.0.0.1:1,127.0.0.2:1 -self 127.0.0.2 -builtin-config-port {}",
                        config_port),
            "wait", "1s"));
  EXPECT_EQ(r.code, 124) << r.output;
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::seconds(1));
  EXPECT_TRUE(has(r.output, "cluster version 0: 1 workers; nothing to start on 127.0.0.2"))
      << r.output;
}

// The real worker program: scheduled_resize goes 2 -> 4 at step 5, 4 -> 3 at step 10. (A peer
// replacing its transport for the new version used to cut handshakes short, which counted as a
// lost peer; such cuts are now retried within the connect deadline.)
TEST_F(KfrunElastic, KftrainGrowsAndShrinksUnderKfrun) {
  const auto config_port = testing::free_port_base(1);
  ASSERT_NE(config_port, 0);
  const auto r = run_command(
      fmt::format(
          "{} -w -timeout 100s -port-range {}-{} -np 2 -H 127.0.0.1:4 -builtin-config-port {} {} "
          "-model resnet56 -steps 15 -policy scheduled_resize:schedule=5:4,10:3 -out {}/runs",
          KFRUN, base, base + 7, config_port, KFTRAIN, dir.string()),
      110);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(has(
      r.output, fmt::format("cluster version 1: 4 workers; starting {}, {}", worker(2), worker(3))))
      << r.output;
  EXPECT_TRUE(has(r.output, "cluster version 2: 3 workers")) << r.output;
  EXPECT_TRUE(has(r.output, fmt::format("({}) exited with code 0", worker(3)))) << r.output;
  EXPECT_TRUE(has(r.output, "cluster version 2: every worker on 127.0.0.1 exited 0: done"))
      << r.output;
}

TEST(KfrunElasticFlags, WatchWithoutAConfigServerExits2) {
  const auto r = run_command(fmt::format("{} -w -np 1 /bin/true", KFRUN));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "-w needs a config server")) << r.output;
}

TEST(LaunchPlanElastic, EveryHostGetsARunnerAndWorkersTheElasticVariables) {
  const auto hosts = parse_host_list("10.0.0.1:2, 10.0.0.2:2,10.0.0.3");
  const auto c = plan_cluster(hosts, 2, {10000, 11000});
  ASSERT_EQ(c.size(), 2);
  EXPECT_EQ(join_peers(c.runners()), "10.0.0.1:38080,10.0.0.2:38080,10.0.0.3:38080");
  EXPECT_EQ(format_host_list(hosts), "10.0.0.1:2,10.0.0.2:2,10.0.0.3:1");
  EXPECT_EQ(format_port_range({10000, 10010}), "10000-10010");
  // Growth lands on the runners with fewest workers.
  EXPECT_EQ(join_peers(c.resized(4, 10000, 2).workers()),
            "10.0.0.1:10000,10.0.0.1:10001,10.0.0.2:10000,10.0.0.3:10000");

  const ElasticEnv env{.host_slots = "10.0.0.1:2", .port_range = "10000-10010"};
  const auto first = elastic_local_workers(c, "10.0.0.1", "", "http://cfg:1/config", env, false);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[1].env.at("KUNGFU_ELASTIC"), "1");
  EXPECT_EQ(first[1].env.at("KUNGFU_HOST_SLOTS"), "10.0.0.1:2");
  EXPECT_EQ(first[1].env.at("KUNGFU_PORT_RANGE"), "10000-10010");
  EXPECT_EQ(first[1].env.at("KUNGFU_SELF_SPEC"), "10.0.0.1:10001");
  EXPECT_FALSE(first[1].env.contains("KUNGFU_JOINING"));
  const ClusterSpec grown(3, c.runners(), c.resized(3, 10000).workers());
  const auto joining = elastic_local_workers(grown, "10.0.0.2", "", "", env, true);
  ASSERT_EQ(joining.size(), 1u);
  EXPECT_EQ(joining[0].rank, 2);
  EXPECT_EQ(joining[0].env.at("KUNGFU_JOINING"), "1");
  EXPECT_EQ(joining[0].env.at("KUNGFU_INIT_CLUSTER_VERSION"), "3");
  EXPECT_EQ(joining[0].env.at("KUNGFU_INIT_PEERS"), "10.0.0.1:10000,10.0.0.1:10001,10.0.0.2:10000");
  EXPECT_TRUE(elastic_local_workers(c, "10.0.0.3", "", "", env, false).empty());
}

}  // namespace
}  // namespace kf
