#include "runtime/peer_bytes.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kf {
namespace {

TEST(PeerBytes, TotalsAreExactWhateverTheOrderOfPeersAndReads) {
  PeerBytes counted;
  PeerValues<std::uint64_t> expected;
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    // Runs of one peer (as a ring sends) mixed with switches and reads in between.
    const int peer = static_cast<int>(rng() % 5);
    for (int k = static_cast<int>(rng() % 4); k >= 0; --k) {
      const std::uint64_t bytes = rng() % 1000;
      counted.add(peer, bytes);
      if (bytes > 0) expected[peer] += bytes;
    }
    if (rng() % 7 == 0) {
      ASSERT_EQ(counted.totals(), expected) << "after " << i;
    }
  }
  EXPECT_EQ(counted.totals(), expected);
  EXPECT_EQ(counted.totals(), expected);  // reading twice does not count twice
}

TEST(PeerBytes, NamesOnlyPeersThatBytesWentTo) {
  PeerBytes counted;
  EXPECT_TRUE(counted.totals().empty());
  counted.add(4, 0);
  counted.add(2000, 7);
  counted.add(4, 0);
  EXPECT_EQ(counted.totals(), (PeerValues<std::uint64_t>{{2000, 7}}));
}

TEST(PeerValues, KeepsPeersInOrderAndAnswersForMissingOnes) {
  PeerValues<double> v{{5, 1.5}, {1, 2.0}, {3, 0.5}, {1, 4.0}};
  std::vector<int> peers;
  for (const auto& [peer, value] : v)
    peers.push_back(peer);
  EXPECT_EQ(peers, (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(v.get(1), 4.0);  // the last value given
  EXPECT_EQ(v.get(2), 0.0);
  EXPECT_EQ(v.get(2, -1.0), -1.0);
  EXPECT_EQ(v.sum(), 6.0);
  v[2] += 1.0;
  EXPECT_EQ(v.size(), 4u);
  EXPECT_EQ(v.get(2), 1.0);
}

}  // namespace
}  // namespace kf
