#include "runtime/peer_bytes.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace kf {
namespace {

TEST(PeerBytes, TotalsAreExactWhateverTheOrderOfPeersAndReads) {
  PeerBytes counted(5);
  std::vector<std::uint64_t> expected(5, 0);
  std::mt19937 rng(3);
  for (int i = 0; i < 2000; ++i) {
    // Runs of one peer (as a ring sends) mixed with switches and reads in between.
    const int peer = static_cast<int>(rng() % 5);
    for (int k = static_cast<int>(rng() % 4); k >= 0; --k) {
      const std::uint64_t bytes = rng() % 1000;
      counted.add(peer, bytes);
      expected[static_cast<std::size_t>(peer)] += bytes;
    }
    if (rng() % 7 == 0) {
      ASSERT_EQ(counted.totals(), expected) << "after " << i;
    }
  }
  EXPECT_EQ(counted.totals(), expected);
  EXPECT_EQ(counted.totals(), expected);  // reading twice does not count twice
}

TEST(PeerBytes, StartsAtZero) {
  EXPECT_EQ(PeerBytes(3).totals(), std::vector<std::uint64_t>(3, 0));
  EXPECT_TRUE(PeerBytes().totals().empty());
}

}  // namespace
}  // namespace kf
