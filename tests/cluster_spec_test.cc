#include "runtime/cluster_spec.h"

#include <gtest/gtest.h>

#include "proto/cluster.pb.h"

namespace kf {
namespace {

ClusterSpec two_hosts() {
  return ClusterSpec(7, {{"10.0.0.1", 9000}, {"10.0.0.2", 9000}},
                     {{"10.0.0.1", 10000},
                      {"10.0.0.2", 10000},
                      {"10.0.0.1", 10001},
                      {"10.0.0.2", 10001},
                      {"10.0.0.2", 10002}});
}

TEST(PeerID, ParsesAndPrints) {
  const auto id = PeerID::parse("10.0.0.1:10000");
  EXPECT_EQ(id.host, "10.0.0.1");
  EXPECT_EQ(id.port, 10000);
  EXPECT_EQ(id.to_string(), "10.0.0.1:10000");
  for (const char* bad :
       {"10.0.0.1", ":10000", "10.0.0.1:", "10.0.0.1:0", "10.0.0.1:70000", "10.0.0.1:12x"}) {
    EXPECT_THROW(PeerID::parse(bad), std::invalid_argument) << bad;
  }
  // Hosts travel in comma-separated lists (tests/fuzz found ones that did not come back).
  for (const char* bad : {"a,b:1", "a b:1", "tab\t:1", "\x7f:1", "\xc3\xa9:1"}) {
    EXPECT_THROW(PeerID::parse(bad), std::invalid_argument) << bad;
  }
  EXPECT_EQ(PeerID::parse("node-1.cluster:1").host, "node-1.cluster");
  EXPECT_EQ(PeerID::parse("::1:10000").host, "::1");
}

TEST(ClusterSpec, RanksLocalRanksAndHosts) {
  const auto spec = two_hosts();
  EXPECT_EQ(spec.size(), 5);
  EXPECT_EQ(spec.rank_of({"10.0.0.2", 10001}), 3);
  EXPECT_FALSE(spec.rank_of({"10.0.0.3", 10000}));
  EXPECT_EQ(spec.local_rank(0), 0);
  EXPECT_EQ(spec.local_rank(2), 1);
  EXPECT_EQ(spec.local_rank(4), 2);
  EXPECT_EQ(spec.local_size(4), 3);
  EXPECT_EQ(spec.host_of(), (std::vector<int>{0, 1, 0, 1, 1}));
  EXPECT_EQ(spec.host_count(), 2);
  EXPECT_FALSE(spec.problem());
}

TEST(ClusterSpec, ProblemsAreNamed) {
  EXPECT_EQ(ClusterSpec(0, {}, {}).problem(), "no workers");
  EXPECT_EQ(ClusterSpec(0, {}, {{"a", 1}, {"a", 1}}).problem(), "duplicate worker a:1");
  EXPECT_EQ(ClusterSpec(0, {{"a", 9}}, {{"a", 1}, {"b", 1}}).problem(),
            "worker b:1 has no runner on its host");
  EXPECT_EQ(ClusterSpec(0, {{"a", 9}, {"a", 8}}, {{"a", 1}}).problem(), "two runners on host a");
  EXPECT_EQ(ClusterSpec(0, {}, {{"a,b", 1}}).problem(),
            "worker 'a,b:1' has a bad host (printable ASCII, no spaces or commas)");
  EXPECT_EQ(ClusterSpec(0, {{"", 9}}, {{"a", 1}}).problem(),
            "runner ':9' has a bad host (printable ASCII, no spaces or commas)");
  EXPECT_EQ(ClusterSpec(0, {{"a", 0}}, {{"a", 1}}).problem(), "runner a:0 has port 0");
}

// The layout and the problem are worked out once per spec and shared by its copies: a copy, an
// assignment and a resize must each answer for their own workers, an empty spec too.
TEST(ClusterSpec, CopiesAssignmentsAndResizesAnswerForTheirOwnWorkers) {
  const ClusterSpec a(1, {{"h1", 9}, {"h2", 9}}, {{"h1", 1}, {"h2", 1}});
  const ClusterSpec grown = a.resized(5, 10);
  EXPECT_EQ(grown.host_of(), (std::vector<int>{0, 1, 0, 1, 0}));
  EXPECT_EQ(grown.host_count(), 2);
  EXPECT_FALSE(grown.problem());
  ClusterSpec c = a;
  EXPECT_EQ(c.host_of(), (std::vector<int>{0, 1}));
  c = ClusterSpec(2, {{"h1", 9}}, {{"h1", 1}, {"h3", 1}});
  EXPECT_EQ(c.host_of(), (std::vector<int>{0, 1}));
  EXPECT_EQ(c.problem(), "worker h3:1 has no runner on its host");
  EXPECT_FALSE(a.problem());  // the first spec kept its own
  const ClusterSpec empty;
  EXPECT_EQ(empty.problem(), "no workers");
  EXPECT_TRUE(empty.host_of().empty());
  EXPECT_EQ(empty.host_count(), 0);
  EXPECT_EQ(ClusterSpec(), ClusterSpec(0, {}, {}));
}

TEST(ClusterSpec, ProtobufRoundTrip) {
  const auto spec = two_hosts();
  const auto proto = spec.to_proto();
  EXPECT_EQ(proto.version(), 7u);
  EXPECT_EQ(proto.workers_size(), 5);
  std::string wire;
  ASSERT_TRUE(proto.SerializeToString(&wire));
  proto::ClusterSpec back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(ClusterSpec::from_proto(back), spec);
}

TEST(ClusterSpec, LocalCluster) {
  const auto spec = ClusterSpec::local(3);
  EXPECT_EQ(spec.size(), 3);
  EXPECT_EQ(spec.host_count(), 1);
  EXPECT_EQ(spec.local_rank(2), 2);
  EXPECT_FALSE(spec.problem());
}

}  // namespace
}  // namespace kf
