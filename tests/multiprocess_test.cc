// Multi-process integration over loopback: kfrun starts n worker processes (Unix sockets between
// them), each runs every operation under every strategy through kf::Peer and checks the results.
// Also: kill -9 of one worker mid-allreduce, and kfrun's exit codes, timeout and output prefix.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <cstdio>
#include <sstream>
#include <string>

#include "net_helpers.h"
#include "topology/strategy.h"

namespace kf::testing {
namespace {

std::string kfrun(int np, const std::string& flags, const std::string& worker_args) {
  const auto base = free_port_base(np);
  return fmt::format("{} -np {} -port-range {}-{} {} {} {}", KFRUN, np, base, base + 50, flags,
                     NET_WORKER, worker_args);
}

class EveryStrategy : public ::testing::TestWithParam<std::tuple<int, StrategyName>> {};

TEST_P(EveryStrategy, AllOperationsAreCorrect) {
  const auto [n, strategy] = GetParam();
  const auto r =
      run_command(kfrun(n, fmt::format("-q -strategy {}", strategy_name(strategy)),
                        "allreduce broadcast allgather barrier consensus reduce gather"));
  EXPECT_EQ(r.code, 0) << r.output;
  for (int rank = 0; rank < n; ++rank) {
    const std::string want = fmt::format("::stdout] rank {}: all ok", rank);
    EXPECT_NE(r.output.find(want), std::string::npos) << "missing '" << want << "' in\n"
                                                      << r.output;
  }
}

INSTANTIATE_TEST_SUITE_P(Loopback, EveryStrategy,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::ValuesIn(kAllStrategyNames)),
                         [](const auto& p) {
                           return fmt::format("n{}_{}", std::get<0>(p.param),
                                              strategy_name(std::get<1>(p.param)));
                         });

TEST(Fault, KillNineMidAllreduceIsReportedByEveryOtherWorker) {
  constexpr double kTimeout = 5;
  constexpr int kDead = 2;
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      run_command(kfrun(4, "", fmt::format("--timeout 5 --die-rank {} --ignore-term loop", kDead)));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // The job's exit code is the killed worker's, not that of a peer that failed because of it.
  EXPECT_EQ(r.code, 137) << r.output;
  EXPECT_LT(took, 4 * kTimeout) << r.output;
  int reported = 0;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    // "... rank R: error after T s: WHY"
    const auto at = line.find("rank ");
    const auto mark = line.find(": error after ");
    if (at == std::string::npos || mark == std::string::npos || at > mark) continue;
    const int rank = std::stoi(line.substr(at + 5));
    const double after = std::stod(line.substr(mark + 14));
    const std::string why = line.substr(line.find(" s: ", mark) + 4);
    EXPECT_NE(rank, kDead);
    EXPECT_LT(after, 2 * kTimeout) << why;
    // The error is peer_lost (also where a payload the dead rank lent could not be read any more)
    // and names the lost peer: "rank 2 (127.0.0.1:PORT)".
    EXPECT_EQ(why.rfind("peer_lost", 0), 0u) << why;
    EXPECT_NE(why.find(fmt::format("rank {} (127.0.0.1:", kDead)), std::string::npos) << why;
    ++reported;
  }
  EXPECT_EQ(reported, 3) << r.output;
  EXPECT_NE(r.output.find("failed with exit code 137"), std::string::npos) << r.output;
}

TEST(Api, ReadmeExampleRunsUnderKfrun) {
  const auto base = free_port_base(3);
  const auto r = run_command(
      fmt::format("{} -np 3 -q -port-range {}-{} {}", KFRUN, base, base + 10, API_EXAMPLE));
  EXPECT_EQ(r.code, 0) << r.output;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(r.output.find(
                  fmt::format("rank {} of 3: grad[0] = 1, weights[0] = 0, same model: 1", rank)),
              std::string::npos)
        << r.output;
  }
}

TEST(Kfrun, ExitsWithTheFirstFailureAndStopsTheRest) {
  const auto base = free_port_base(3);
  const auto r =
      run_command(fmt::format("{} -np 3 -port-range {}-{} sh -c '[ \"$KUNGFU_SELF_SPEC\" = "
                              "127.0.0.1:{} ] && exit 7; sleep 30'",
                              KFRUN, base, base + 2, base + 1));
  EXPECT_EQ(r.code, 7) << r.output;
  EXPECT_NE(r.output.find(fmt::format("rank 1 (127.0.0.1:{}) failed with exit code 7", base + 1)),
            std::string::npos)
      << r.output;
}

TEST(Kfrun, PrefixesOutputAndPassesTheEnvironment) {
  char logdir[] = "/tmp/kfrun-logs-XXXXXX";
  ASSERT_NE(::mkdtemp(logdir), nullptr);
  const auto base = free_port_base(2);
  const auto r = run_command(fmt::format(
      "{} -np 2 -q -H 127.0.0.1:2 -nic lo -port-range {}-{} -strategy RING -logdir {} sh "
      "-c 'echo $KUNGFU_INIT_PEERS $KUNGFU_ALLREDUCE_STRATEGY; echo e >&2'",
      KFRUN, base, base + 1, logdir));
  EXPECT_EQ(r.code, 0) << r.output;
  const std::string peers = fmt::format("127.0.0.1:{},127.0.0.1:{}", base, base + 1);
  EXPECT_NE(r.output.find(fmt::format("[127.0.0.1.{}::stdout] {} RING", base, peers)),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(fmt::format("[127.0.0.1.{}::stderr] e", base + 1)), std::string::npos)
      << r.output;
  // -logdir keeps each worker's streams, unprefixed.
  const auto log = run_command(fmt::format("cat {}/127.0.0.1.{}.stdout.log", logdir, base + 1));
  EXPECT_EQ(log.output, peers + " RING\n");
  (void)run_command(fmt::format("rm -rf {}", logdir));
}

TEST(Kfrun, TimeoutStopsEverythingWithNonZeroExit) {
  const auto start = std::chrono::steady_clock::now();
  const auto base = free_port_base(2);
  const auto r = run_command(
      fmt::format("{} -np 2 -timeout 1s -port-range {}-{} sleep 30", KFRUN, base, base + 1));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.code, 124) << r.output;
  EXPECT_LT(took, 10) << r.output;
}

TEST(Kfrun, ForwardsSigterm) {
  const auto base = free_port_base(2);
  const auto r = run_command(fmt::format(
      "sh -c '{} -np 2 -port-range {}-{} sleep 30 & pid=$!; sleep 0.5; kill -TERM $pid; wait "
      "$pid; echo exit=$?'",
      KFRUN, base, base + 1));
  EXPECT_NE(r.output.find("forwarding it to the workers"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("exit=143"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kf::testing
