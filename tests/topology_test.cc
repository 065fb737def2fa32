#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "topology/forest.h"
#include "topology/graph.h"
#include "topology/strategy.h"

namespace {

using kf::Algorithm;
using kf::Graph;
using kf::GraphError;
using kf::GraphPair;
using kf::Strategy;
using kf::StrategyName;
using Edges = std::vector<std::pair<int, int>>;

// Expects `fn` to throw GraphError whose message contains `needle`.
void ExpectGraphError(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected GraphError containing \"" << needle << "\"";
  } catch (const GraphError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message \"" << e.what() << "\" lacks \"" << needle << "\"";
  }
}

Graph MakeGraph(int n, const Edges& edges) {
  Graph g(n);
  for (auto [a, b] : edges)
    g.add_edge(a, b);
  return g;
}

Edges SelfLoops(int n) {
  Edges e;
  for (int v = 0; v < n; ++v)
    e.emplace_back(v, v);
  return e;
}

// ---------------------------------------------------------------------------------------------
// Graph

TEST(GraphTest, AddEdgeIgnoresDuplicatesAndSorts) {
  Graph g(3);
  g.add_edge(1, 1);
  g.add_edge(0, 2);
  g.add_edge(0, 1);
  g.add_edge(0, 2);
  EXPECT_EQ(g.size(), 3);
  EXPECT_EQ(g.edges(), (Edges{{0, 1}, {0, 2}, {1, 1}}));
  EXPECT_EQ(g.to_string(), "0->1 0->2 1->1");
  EXPECT_TRUE(g.has_self_loop(1));
  EXPECT_FALSE(g.has_self_loop(0));
  EXPECT_EQ(g.nexts(0), (std::vector<int>{1, 2}));
  EXPECT_EQ(g.prevs(1), (std::vector<int>{0}));  // self-loop excluded
  EXPECT_TRUE(g.nexts(1).empty());
}

TEST(GraphTest, AddEdgeOutOfRangeThrows) {
  Graph g(2);
  ExpectGraphError([&] { g.add_edge(0, 2); }, "node 2");
  ExpectGraphError([&] { g.add_edge(-1, 0); }, "node -1");
}

TEST(GraphTest, ReversedKeepsSelfLoops) {
  Graph g = MakeGraph(3, {{0, 1}, {1, 2}, {2, 2}});
  EXPECT_EQ(g.reversed().edges(), (Edges{{1, 0}, {2, 1}, {2, 2}}));
}

TEST(GraphTest, RelabeledPermutes) {
  Graph g = MakeGraph(3, {{0, 1}, {0, 2}, {0, 0}});
  const std::vector<int> label = {2, 0, 1};
  EXPECT_EQ(g.relabeled(label).edges(), (Edges{{2, 0}, {2, 1}, {2, 2}}));
}

TEST(GraphTest, RelabeledRejectsNonPermutation) {
  Graph g(3);
  const std::vector<int> dup = {0, 0, 1};
  const std::vector<int> out = {0, 1, 3};
  const std::vector<int> short_label = {0, 1};
  ExpectGraphError([&] { (void)g.relabeled(dup); }, "label 0");
  ExpectGraphError([&] { (void)g.relabeled(out); }, "node 2");
  ExpectGraphError([&] { (void)g.relabeled(short_label); }, "2 labels");
}

// ---------------------------------------------------------------------------------------------
// Strategy names

TEST(StrategyNameTest, RoundTripsAndIsCaseInsensitive) {
  std::set<std::string_view> seen;
  for (StrategyName s : kf::kAllStrategyNames) {
    const auto name = kf::strategy_name(s);
    EXPECT_TRUE(seen.insert(name).second) << name;
    EXPECT_EQ(kf::parse_strategy_name(name), s);
    std::string lower(name);
    for (char& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(kf::parse_strategy_name(lower), s);
  }
  EXPECT_EQ(kf::parse_strategy_name("Binary_Tree_Star"), StrategyName::binary_tree_star);
  EXPECT_EQ(kf::strategy_name(StrategyName::automatic), "AUTO");
  EXPECT_EQ(kf::strategy_name(StrategyName::ring_rs_ag), "RING_RS_AG");
  EXPECT_EQ(kf::parse_strategy_name("NOPE"), std::nullopt);
  EXPECT_EQ(kf::parse_strategy_name(""), std::nullopt);
  EXPECT_EQ(kf::parse_strategy_name("STAR "), std::nullopt);
}

TEST(StrategyTest, HostMasters) {
  EXPECT_EQ(kf::host_masters(std::vector<int>{0, 0, 1, 1, 2}), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(kf::host_masters(std::vector<int>{0, 1, 2, 0, 1, 2}), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(kf::host_masters(std::vector<int>{5, 3, 5, 3}), (std::vector<int>{0, 1}));
}

// ---------------------------------------------------------------------------------------------
// Every strategy x size x host layout

enum class Layout { one_host, host_per_rank, two_per_host, interleaved };

std::vector<int> HostOf(Layout layout, int n) {
  std::vector<int> host_of(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    int h = 0;
    switch (layout) {
      case Layout::one_host:
        h = 0;
        break;
      case Layout::host_per_rank:
        h = r;
        break;
      case Layout::two_per_host:
        h = r / 2;
        break;
      case Layout::interleaved:
        h = r % 3;
        break;
    }
    host_of[static_cast<std::size_t>(r)] = h;
  }
  return host_of;
}

std::size_t ExpectedPairs(StrategyName s, std::size_t n, std::size_t hosts) {
  switch (s) {
    case StrategyName::multi_star:
    case StrategyName::multi_binary_tree_star:
      return hosts;
    case StrategyName::clique:
    case StrategyName::ring:
      return n;
    default:
      return 1;
  }
}

class AllStrategiesTest : public ::testing::TestWithParam<std::tuple<StrategyName, int, Layout>> {};

TEST_P(AllStrategiesTest, BuildsValidSpanningPairs) {
  const auto [name, n, layout] = GetParam();
  const auto host_of = HostOf(layout, n);
  const auto hosts = kf::host_masters(host_of).size();
  Strategy s;
  ASSERT_NO_THROW(s = kf::make_strategy(name, host_of));
  EXPECT_EQ(s.name, kf::strategy_name(name));
  ASSERT_EQ(s.pairs.size(), ExpectedPairs(name, static_cast<std::size_t>(n), hosts));
  for (const GraphPair& pair : s.pairs) {
    EXPECT_NO_THROW(kf::validate_graph_pair(pair));
    ASSERT_EQ(pair.broadcast.size(), n);
    ASSERT_EQ(pair.reduce.size(), n);
    // A spanning tree: n - 1 edges, every node but the root has one prev.
    EXPECT_EQ(pair.broadcast.edges().size(), static_cast<std::size_t>(n - 1));
    const int root = pair.root();
    for (int v = 0; v < n; ++v) {
      EXPECT_TRUE(pair.reduce.has_self_loop(v));
      EXPECT_EQ(pair.broadcast.prevs(v).size(), v == root ? 0u : 1u) << "node " << v;
    }
  }
}

std::string ParamName(const ::testing::TestParamInfo<std::tuple<StrategyName, int, Layout>>& info) {
  static constexpr const char* kLayouts[] = {"OneHost", "HostPerRank", "TwoPerHost", "Interleaved"};
  return std::string(kf::strategy_name(std::get<0>(info.param))) + "_n" +
         std::to_string(std::get<1>(info.param)) + "_" +
         kLayouts[static_cast<int>(std::get<2>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(
    Topology, AllStrategiesTest,
    ::testing::Combine(::testing::ValuesIn(kf::kAllStrategyNames),
                       ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16),
                       ::testing::Values(Layout::one_host, Layout::host_per_rank,
                                         Layout::two_per_host, Layout::interleaved)),
    ParamName);

// ---------------------------------------------------------------------------------------------
// Hand-checked edges

TEST(StrategyTest, StarN4) {
  const auto s = kf::make_strategy(StrategyName::star, std::vector<int>{0, 1, 2, 3});
  ASSERT_EQ(s.pairs.size(), 1u);
  EXPECT_EQ(s.pairs[0].broadcast.to_string(), "0->1 0->2 0->3");
  EXPECT_EQ(s.pairs[0].reduce.to_string(), "0->0 1->0 1->1 2->0 2->2 3->0 3->3");
  EXPECT_EQ(s.pairs[0].root(), 0);
  EXPECT_EQ(s.algorithm, Algorithm::graph_pairs);
}

TEST(StrategyTest, SingleNode) {
  for (StrategyName name : kf::kAllStrategyNames) {
    const auto s = kf::make_strategy(name, std::vector<int>{0});
    ASSERT_EQ(s.pairs.size(), 1u) << kf::strategy_name(name);
    EXPECT_EQ(s.pairs[0].broadcast.to_string(), "");
    EXPECT_EQ(s.pairs[0].reduce.to_string(), "0->0");
    EXPECT_EQ(s.pairs[0].root(), 0);
  }
}

TEST(StrategyTest, BinaryTreeStarSixRanksThreeHosts) {
  const std::vector<int> host_of = {0, 0, 1, 1, 2, 2};
  const auto s = kf::make_strategy(StrategyName::binary_tree_star, host_of);
  ASSERT_EQ(s.pairs.size(), 1u);
  // Masters 0, 2, 4: 0 -> 2, 0 -> 4; each master -> its one local.
  EXPECT_EQ(s.pairs[0].broadcast.edges(), (Edges{{0, 1}, {0, 2}, {0, 4}, {2, 3}, {4, 5}}));
  Edges reduce = {{1, 0}, {2, 0}, {3, 2}, {4, 0}, {5, 4}};
  for (auto e : SelfLoops(6))
    reduce.push_back(e);
  std::sort(reduce.begin(), reduce.end());
  EXPECT_EQ(s.pairs[0].reduce.edges(), reduce);
}

TEST(StrategyTest, BinaryTreeHeap) {
  const auto s = kf::make_strategy(StrategyName::binary_tree, std::vector<int>(6, 0));
  EXPECT_EQ(s.pairs[0].broadcast.to_string(), "0->1 0->2 1->3 1->4 2->5");
}

TEST(StrategyTest, TreeAndMultiStar) {
  const std::vector<int> host_of = {0, 0, 1, 1, 2};
  const auto tree = kf::make_strategy(StrategyName::tree, host_of);
  EXPECT_EQ(tree.pairs[0].broadcast.to_string(), "0->1 0->2 0->4 2->3");
  const auto ms = kf::make_strategy(StrategyName::multi_star, host_of);
  ASSERT_EQ(ms.pairs.size(), 3u);
  EXPECT_EQ(ms.pairs[0].broadcast.to_string(), "0->1 0->2 0->4 2->3");
  EXPECT_EQ(ms.pairs[1].broadcast.to_string(), "0->1 2->0 2->3 2->4");
  EXPECT_EQ(ms.pairs[2].broadcast.to_string(), "0->1 2->3 4->0 4->2");
  EXPECT_EQ(ms.pairs[2].root(), 4);
}

TEST(StrategyTest, RingN3Pair1) {
  const auto s = kf::make_strategy(StrategyName::ring, std::vector<int>{0, 0, 0});
  ASSERT_EQ(s.pairs.size(), 3u);
  const GraphPair& p = s.pairs[1];
  EXPECT_EQ(p.broadcast.to_string(), "1->2 2->0");
  EXPECT_EQ(p.reduce.to_string(), "0->0 0->1 1->1 2->0 2->2");  // 2 -> 0 -> 1
  EXPECT_EQ(p.root(), 1);
  EXPECT_TRUE(p.reduce.nexts(1).empty());
}

TEST(StrategyTest, CliqueRoots) {
  const auto s = kf::make_strategy(StrategyName::clique, std::vector<int>{0, 1, 2, 3});
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(s.pairs[static_cast<std::size_t>(r)].root(), r);
  EXPECT_EQ(s.pairs[2].broadcast.to_string(), "2->0 2->1 2->3");
}

TEST(StrategyTest, MultiBinaryTreeStarRotatesMasters) {
  // Hosts {0,1}, {2,3}, {4,5}, {6}: masters 0, 2, 4, 6.
  const std::vector<int> host_of = {0, 0, 1, 1, 2, 2, 3};
  const auto s = kf::make_strategy(StrategyName::multi_binary_tree_star, host_of);
  ASSERT_EQ(s.pairs.size(), 4u);
  // Rotation 0: 0 -> 2, 4; 2 -> 6.
  EXPECT_EQ(s.pairs[0].broadcast.to_string(), "0->1 0->2 0->4 2->3 2->6 4->5");
  // Rotation 1: masters 2, 4, 6, 0: 2 -> 4, 6; 4 -> 0.
  EXPECT_EQ(s.pairs[1].broadcast.to_string(), "0->1 2->3 2->4 2->6 4->0 4->5");
  // Rotation 3: masters 6, 0, 2, 4: 6 -> 0, 2; 0 -> 4.
  EXPECT_EQ(s.pairs[3].broadcast.to_string(), "0->1 0->4 2->3 4->5 6->0 6->2");
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(s.pairs[k].root(), kf::host_masters(host_of)[k]);
  }
  const auto bts = kf::make_strategy(StrategyName::binary_tree_star, host_of);
  EXPECT_EQ(bts.pairs[0].broadcast, s.pairs[0].broadcast);
}

TEST(StrategyTest, AutoAndAlgorithms) {
  const auto one = kf::make_strategy(StrategyName::automatic, std::vector<int>{0, 0, 0});
  EXPECT_EQ(one.name, "AUTO");
  EXPECT_EQ(one.pairs[0].broadcast.to_string(), "0->1 0->2");
  const std::vector<int> host_of = {0, 0, 1, 1};
  const auto multi = kf::make_strategy(StrategyName::automatic, host_of);
  const auto bts = kf::make_strategy(StrategyName::binary_tree_star, host_of);
  EXPECT_EQ(multi.name, "AUTO");
  EXPECT_EQ(one.algorithm, Algorithm::by_size);    // doubling when tiny, else the star
  EXPECT_EQ(multi.algorithm, Algorithm::by_size);  // doubling, trees or a ring by size
  EXPECT_EQ(multi.pairs[0].broadcast, bts.pairs[0].broadcast);
  const auto rs = kf::make_strategy(StrategyName::ring_rs_ag, host_of);
  EXPECT_EQ(rs.algorithm, Algorithm::ring_rs_ag);
  EXPECT_EQ(rs.pairs[0].broadcast, bts.pairs[0].broadcast);
  const auto hd = kf::make_strategy(StrategyName::halving_doubling, host_of);
  EXPECT_EQ(hd.algorithm, Algorithm::halving_doubling);
}

TEST(StrategyTest, BadHostOfThrows) {
  ExpectGraphError([] { (void)kf::make_strategy(StrategyName::star, std::vector<int>{}); },
                   "empty");
  ExpectGraphError(
      [] {
        (void)kf::make_strategy(StrategyName::star, std::vector<int>{0, -1});
      },
      "rank 1");
}

// ---------------------------------------------------------------------------------------------
// Digest

TEST(DigestTest, EqualForEqualDifferentOtherwise) {
  const std::vector<int> a = {0, 0, 1, 1};
  const std::vector<int> b = {0, 1, 0, 1};
  EXPECT_EQ(kf::make_strategy(StrategyName::star, a).digest(),
            kf::make_strategy(StrategyName::star, a).digest());
  std::set<std::uint64_t> digests;
  for (StrategyName s : kf::kAllStrategyNames) {
    EXPECT_TRUE(digests.insert(kf::make_strategy(s, a).digest()).second) << kf::strategy_name(s);
  }
  EXPECT_NE(kf::make_strategy(StrategyName::binary_tree_star, a).digest(),
            kf::make_strategy(StrategyName::binary_tree_star, b).digest());
  EXPECT_NE(kf::make_strategy(StrategyName::star, std::vector<int>{0, 0, 0}).digest(),
            kf::make_strategy(StrategyName::star, std::vector<int>{0, 0, 0, 0}).digest());
}

TEST(DigestTest, StableAndSensitiveToEveryField) {
  const auto s = kf::make_strategy(StrategyName::ring, std::vector<int>{0, 0, 1});
  const std::uint64_t d = s.digest();
  EXPECT_EQ(d, s.digest());
  Strategy renamed = s;
  renamed.name = "RING2";
  EXPECT_NE(renamed.digest(), d);
  Strategy algo = s;
  algo.algorithm = Algorithm::ring_rs_ag;
  EXPECT_NE(algo.digest(), d);
  Strategy edge = s;
  edge.pairs[2].reduce.add_edge(0, 2);
  EXPECT_NE(edge.digest(), d);
}

// ---------------------------------------------------------------------------------------------
// Forests

TEST(ForestTest, RejectsMalformed) {
  ExpectGraphError(
      [] {
        kf::validate_forest(std::vector<int>{0, 0, 0, 9, 0});
      },
      "parent of node 3 is 9, outside 0..4");
  ExpectGraphError(
      [] {
        kf::validate_forest(std::vector<int>{0, 0, -1});
      },
      "parent of node 2 is -1");
  ExpectGraphError(
      [] {
        kf::validate_forest(std::vector<int>{0, 2, 1});
      },
      "nodes 1 -> 2 -> 1 form a cycle");
  ExpectGraphError(
      [] {
        kf::validate_forest(std::vector<int>{0, 3, 1, 4, 2});
      },
      "nodes 1 -> 3 -> 4 -> 2 -> 1 form a cycle");
  ExpectGraphError([] { kf::validate_forest(std::vector<int>{1, 2, 0}); }, "no root");
  ExpectGraphError([] { kf::validate_forest(std::vector<int>{1, 2, 0}); }, "nodes 0 -> 1 -> 2");
  ExpectGraphError([] { kf::validate_forest(std::vector<int>{}); }, "empty");
  ExpectGraphError([] { (void)kf::graph_pair_from_forest(std::vector<int>{0, 2, 1}); }, "cycle");
}

TEST(ForestTest, StrategyNeedsOneRoot) {
  ExpectGraphError(
      [] {
        (void)kf::strategy_from_forest(std::vector<int>{0, 0, 0, 3, 3});
      },
      "forest has 2 roots (0, 3); a strategy needs exactly one");
}

TEST(ForestTest, AcceptsValid) {
  EXPECT_NO_THROW(kf::validate_forest(std::vector<int>{0}));
  EXPECT_NO_THROW(kf::validate_forest(std::vector<int>{1, 1, 1, 2}));
  const auto s = kf::strategy_from_forest(std::vector<int>{1, 1, 1, 2});
  EXPECT_EQ(s.name, "FOREST");
  ASSERT_EQ(s.pairs.size(), 1u);
  EXPECT_EQ(s.pairs[0].root(), 1);
  EXPECT_EQ(s.pairs[0].broadcast.to_string(), "1->0 1->2 2->3");
  EXPECT_EQ(s.pairs[0].reduce.to_string(), "0->0 0->1 1->1 2->1 2->2 3->2 3->3");
  // A star rooted at 1, the adaptation example.
  const auto star1 = kf::strategy_from_forest(std::vector<int>{1, 1, 1, 1});
  EXPECT_EQ(star1.pairs[0].broadcast.to_string(), "1->0 1->2 1->3");
}

TEST(ForestTest, TwoTreesValidateOnlyAsForest) {
  const auto pair = kf::graph_pair_from_forest(std::vector<int>{0, 0, 0, 3, 3});
  EXPECT_NO_THROW(kf::validate_graph_pair(pair, /*spanning=*/false));
  ExpectGraphError([&] { kf::validate_graph_pair(pair, /*spanning=*/true); }, "roots (0, 3)");
  EXPECT_EQ(pair.root(), 0);  // the smallest root
}

// ---------------------------------------------------------------------------------------------
// validate_graph_pair on hand-made bad pairs

GraphPair StarPair4() {
  return kf::make_strategy(StrategyName::star, std::vector<int>(4, 0)).pairs[0];
}

TEST(ValidateGraphPairTest, MissingSelfLoop) {
  GraphPair p = StarPair4();
  p.reduce = MakeGraph(4, {{0, 0}, {1, 0}, {1, 1}, {2, 0}, {3, 0}, {3, 3}});
  ExpectGraphError([&] { kf::validate_graph_pair(p); }, "node 2 has no self-loop");
}

TEST(ValidateGraphPairTest, UnreachableInBroadcast) {
  GraphPair p = StarPair4();
  // 3 hangs off a 2-cycle with 2, so every node has one prev except 0 but 2, 3 are lost.
  p.broadcast = MakeGraph(4, {{0, 1}, {2, 3}, {3, 2}});
  ExpectGraphError([&] { kf::validate_graph_pair(p); }, "node 2 is unreachable");
}

TEST(ValidateGraphPairTest, TwoPrevsInBroadcast) {
  GraphPair p = StarPair4();
  p.broadcast.add_edge(1, 3);
  ExpectGraphError([&] { kf::validate_graph_pair(p); }, "node 3 has 2 prevs (0, 1)");
}

TEST(ValidateGraphPairTest, DifferentRoots) {
  GraphPair p = StarPair4();
  Edges reduce = {{0, 1}, {2, 1}, {3, 1}};
  for (auto e : SelfLoops(4))
    reduce.push_back(e);
  p.reduce = MakeGraph(4, reduce);
  ExpectGraphError([&] { kf::validate_graph_pair(p); }, "broadcast root(s) 0 differ");
}

TEST(ValidateGraphPairTest, ReduceNodeNotReachingRoot) {
  GraphPair p = StarPair4();
  p.reduce = MakeGraph(4, {{0, 0}, {1, 0}, {1, 1}, {2, 3}, {3, 2}, {2, 2}, {3, 3}});
  ExpectGraphError([&] { kf::validate_graph_pair(p); }, "node 2 does not reach the root");
}

TEST(ValidateGraphPairTest, OtherShapes) {
  GraphPair p = StarPair4();
  p.reduce.add_edge(1, 2);
  ExpectGraphError([&] { kf::validate_graph_pair(p); }, "node 1 has 2 nexts");
  GraphPair q = StarPair4();
  q.broadcast.add_edge(2, 2);
  ExpectGraphError([&] { kf::validate_graph_pair(q); }, "self-loop on node 2");
  GraphPair sized = StarPair4();
  sized.reduce = Graph(3);
  ExpectGraphError([&] { kf::validate_graph_pair(sized); }, "3 nodes");
  const GraphPair empty;
  ExpectGraphError([&] { kf::validate_graph_pair(empty); }, "empty");
}

// ---------------------------------------------------------------------------------------------
// Re-rooting

TEST(RerootedTest, MovesRoot) {
  const std::vector<int> host_of = {0, 0, 1, 1, 2, 2};
  for (StrategyName name : {StrategyName::star, StrategyName::binary_tree_star, StrategyName::ring,
                            StrategyName::binary_tree}) {
    const auto s = kf::make_strategy(name, host_of);
    for (int r = 0; r < 6; ++r) {
      const GraphPair p = kf::rerooted(s.pairs[0], r);
      EXPECT_EQ(p.root(), r) << kf::strategy_name(name);
      EXPECT_NO_THROW(kf::validate_graph_pair(p));
    }
  }
  const auto star = kf::make_strategy(StrategyName::star, std::vector<int>(3, 0));
  EXPECT_EQ(kf::rerooted(star.pairs[0], 2).broadcast.to_string(), "2->0 2->1");
  ExpectGraphError([&] { (void)kf::rerooted(star.pairs[0], 3); }, "new root 3");
  ExpectGraphError([&] { (void)kf::rerooted(star.pairs[0], -1); }, "new root -1");
}

// ---------------------------------------------------------------------------------------------
// Minimum spanning tree

TEST(MinimumSpanningTreeTest, KnownTree) {
  // Cheap links: 0-2 (1), 2-1 (2), 1-3 (1); everything else is expensive.
  const std::vector<std::vector<double>> latency = {
      {0, 9, 1, 8},
      {9, 0, 2, 1},
      {1, 2, 0, 7},
      {8, 1, 7, 0},
  };
  EXPECT_EQ(kf::minimum_spanning_tree(latency), (std::vector<int>{0, 2, 0, 1}));
  EXPECT_NO_THROW(kf::strategy_from_forest(kf::minimum_spanning_tree(latency)));
}

TEST(MinimumSpanningTreeTest, AsymmetricUsesMinimum) {
  // 0->1 is slow but 1->0 fast; 2 is cheapest via 1 only in one direction.
  const std::vector<std::vector<double>> latency = {
      {0, 50, 5},
      {1, 0, 9},
      {5, 2, 0},
  };
  EXPECT_EQ(kf::minimum_spanning_tree(latency), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(kf::minimum_spanning_tree({{0}}), (std::vector<int>{0}));
}

TEST(MinimumSpanningTreeTest, RejectsBadMatrices) {
  ExpectGraphError([] { (void)kf::minimum_spanning_tree({}); }, "empty");
  ExpectGraphError([] { (void)kf::minimum_spanning_tree({{0, 1}, {1}}); }, "row 1");
  ExpectGraphError([] { (void)kf::minimum_spanning_tree({{0, 1}, {1, 0}, {1, 1}}); }, "row 0");
  ExpectGraphError([] { (void)kf::minimum_spanning_tree({{0, -1}, {1, 0}}); }, "latency[0][1]");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  ExpectGraphError([&] { (void)kf::minimum_spanning_tree({{0, 1}, {nan, 0}}); }, "latency[1][0]");
  ExpectGraphError([&] { (void)kf::minimum_spanning_tree({{inf, 1}, {1, 0}}); }, "latency[0][0]");
}

}  // namespace

namespace kf {
namespace {

TEST(SharedStrategy, OneCopyPerNameAndLayoutWhileHeld) {
  const std::vector<int> two_hosts{0, 0, 1, 1};
  const auto a = shared_strategy(StrategyName::binary_tree_star, two_hosts);
  const auto b = shared_strategy(StrategyName::binary_tree_star, two_hosts);
  EXPECT_EQ(a.get(), b.get());
  EXPECT_EQ(a->digest(), make_strategy(StrategyName::binary_tree_star, two_hosts).digest());
  const auto other_layout =
      shared_strategy(StrategyName::binary_tree_star, std::vector{0, 1, 2, 3});
  const auto other_name = shared_strategy(StrategyName::star, two_hosts);
  EXPECT_NE(other_layout.get(), a.get());
  EXPECT_NE(other_name.get(), a.get());
  EXPECT_EQ(other_name->name, "STAR");
  EXPECT_THROW(shared_strategy(StrategyName::star, std::vector{0, -1}), GraphError);
}

}  // namespace
}  // namespace kf
