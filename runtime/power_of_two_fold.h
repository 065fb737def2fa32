// How n ranks fold onto the largest power of two p <= n, for the algorithms that pair ranks by
// the bits of their index (HALVING_DOUBLING, recursive doubling): with r = n - p, the first 2r
// ranks pair up and each odd one of a pair sits out, its data handed to its even partner before
// the exchanges and the result handed back after; the p active ranks are numbered 0..p-1 (their
// virtual ranks).
#pragma once

namespace kf {

struct PowerOfTwoFold {
  PowerOfTwoFold(int n, int rank) {
    while (pow2 * 2 <= n) {
      pow2 *= 2;
      ++levels;
    }
    extra = n - pow2;
    if (rank < 2 * extra) {
      virtual_rank = rank % 2 == 0 ? rank / 2 : -1;
    } else {
      virtual_rank = rank - extra;
    }
  }
  int rank_of_virtual(int v) const { return v < extra ? 2 * v : v + extra; }

  int pow2 = 1;           // p
  int extra = 0;          // r = n - p
  int levels = 0;         // log2(p)
  int virtual_rank = -1;  // this rank among the p active ones, -1 if it sits out
};

}  // namespace kf
