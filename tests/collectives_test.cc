// Allreduce across every strategy, cluster size, size class, dtype and op, against a serial
// reference, in the in-process world.
#include <gtest/gtest.h>

#include <tuple>

#include "harness.h"
#include "runtime/ring_collective.h"
#include "topology/strategy.h"

namespace kf {
namespace {

using testing::expect_all_ok;
using testing::make_input;
using testing::run_on_all;

constexpr std::size_t kChunkBytes = std::size_t{1} << 20;

enum class SizeClass { zero, one, seven, chunk_minus_1, chunk_plus_1, big };

std::size_t element_count(SizeClass s, DType t) {
  const std::size_t chunk = kChunkBytes / dtype_size(t);
  switch (s) {
    case SizeClass::zero:
      return 0;
    case SizeClass::one:
      return 1;
    case SizeClass::seven:
      return 7;
    case SizeClass::chunk_minus_1:
      return chunk - 1;
    case SizeClass::chunk_plus_1:
      return chunk + 1;
    case SizeClass::big:
      return (std::size_t{4} << 20) + 3;  // 4 Mi + 3 elements
  }
  return 0;
}

const char* size_label(SizeClass s) {
  switch (s) {
    case SizeClass::zero:
      return "0";
    case SizeClass::one:
      return "1";
    case SizeClass::seven:
      return "7";
    case SizeClass::chunk_minus_1:
      return "chunk_minus_1";
    case SizeClass::chunk_plus_1:
      return "chunk_plus_1";
    case SizeClass::big:
      return "4Mi_plus_3";
  }
  return "?";
}

// Hosts of k workers each, so host-aware strategies (TREE, *_STAR) see several hosts.
ClusterSpec per_host(int n, int k) {
  std::vector<PeerID> workers, runners;
  for (int r = 0; r < n; ++r) {
    const std::string host = "10.0.0." + std::to_string(r / k + 1);
    workers.push_back({host, static_cast<std::uint16_t>(10000 + r % k)});
    if (r % k == 0) runners.push_back({host, 9999});
  }
  return ClusterSpec(1, runners, workers);
}

ClusterSpec two_per_host(int n) {
  return per_host(n, 2);
}

// Runs one allreduce of (dtype, op) per entry of `cases` concurrently (distinct names) and checks
// every rank's result.
void check_allreduce(InprocWorld& world, const std::vector<std::pair<DType, ReduceOp>>& cases,
                     SizeClass size) {
  const int n = world.size();
  struct PerRank {
    std::vector<Buffer> in, out;
  };
  std::vector<PerRank> data(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    for (const auto& [t, op] : cases) {
      const std::size_t count = element_count(size, t);
      data[static_cast<std::size_t>(r)].in.push_back(make_input(r, count, t, op));
      data[static_cast<std::size_t>(r)].out.emplace_back(count, t);
    }
  }
  const auto statuses = run_on_all(world, [&](Engine& e, DoneCallback done) {
    auto& mine = data[static_cast<std::size_t>(e.rank())];
    auto pending = std::make_shared<int>(static_cast<int>(cases.size()));
    auto first_error = std::make_shared<Status>();
    for (std::size_t k = 0; k < cases.size(); ++k) {
      allreduce(e,
                {.name = "grad/" + std::to_string(k),
                 .input = mine.in[k].view(),
                 .output = mine.out[k].view(),
                 .op = cases[k].second},
                [pending, first_error, done](Status s) {
                  if (!s.ok() && first_error->ok()) *first_error = s;
                  if (--*pending == 0) done(*first_error);
                });
    }
  });
  expect_all_ok(statuses);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto [t, op] = cases[k];
    const auto want =
        testing::reference_values(testing::all_ranks(n), element_count(size, t), op, t);
    for (int r = 0; r < n; ++r) {
      EXPECT_TRUE(
          testing::matches_values(data[static_cast<std::size_t>(r)].out[k].view(), want, op))
          << "rank " << r << " " << dtype_name(t) << " " << reduce_op_name(op);
    }
  }
}

// ---- every strategy x n x size ----

using MatrixParam = std::tuple<StrategyName, int, SizeClass>;

class AllreduceMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(AllreduceMatrix, MatchesSerialReference) {
  const auto [strategy, n, size] = GetParam();
  InprocWorld world(two_per_host(n), {.chunk_bytes = kChunkBytes, .strategy = strategy});
  // f32 sum always, plus one more (dtype, op) rotating over the matrix so that across the
  // strategies every kind of arithmetic travels every algorithm.
  static const std::pair<DType, ReduceOp> rotation[] = {
      {DType::i32, ReduceOp::sum}, {DType::f32, ReduceOp::avg},  {DType::u8, ReduceOp::max},
      {DType::f64, ReduceOp::sum}, {DType::i64, ReduceOp::prod}, {DType::bf16, ReduceOp::min},
      {DType::f16, ReduceOp::sum}, {DType::u16, ReduceOp::prod}, {DType::i8, ReduceOp::min},
      {DType::u64, ReduceOp::max}, {DType::f32, ReduceOp::prod}};
  const std::size_t pick = (static_cast<std::size_t>(strategy) * 7 +
                            static_cast<std::size_t>(n) * 3 + static_cast<std::size_t>(size)) %
                           std::size(rotation);
  std::vector<std::pair<DType, ReduceOp>> cases = {{DType::f32, ReduceOp::sum}, rotation[pick]};
  if (size == SizeClass::big) cases.resize(1);  // keep the big case to one 16 MiB buffer
  check_allreduce(world, cases, size);
}

std::string matrix_name(const ::testing::TestParamInfo<MatrixParam>& info) {
  const auto [strategy, n, size] = info.param;
  return std::string(strategy_name(strategy)) + "_n" + std::to_string(n) + "_" + size_label(size);
}

INSTANTIATE_TEST_SUITE_P(
    AllStrategies, AllreduceMatrix,
    ::testing::Combine(::testing::ValuesIn(kAllStrategyNames),
                       ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16),
                       ::testing::Values(SizeClass::zero, SizeClass::one, SizeClass::seven,
                                         SizeClass::chunk_minus_1, SizeClass::chunk_plus_1,
                                         SizeClass::big)),
    matrix_name);

// ---- zero copy: payloads borrowed from the senders' buffers, read straight from there ----

class AllreduceZeroCopy : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(AllreduceZeroCopy, MatchesSerialReference) {
  const auto [strategy, n, size] = GetParam();
  InprocWorld world(two_per_host(n), {.chunk_bytes = kChunkBytes, .strategy = strategy},
                    {.zero_copy = true});
  std::vector<std::pair<DType, ReduceOp>> cases = {{DType::f32, ReduceOp::sum},
                                                   {DType::f16, ReduceOp::avg}};
  if (size == SizeClass::big) cases.resize(1);
  check_allreduce(world, cases, size);
  // In place, the buffer a piece was lent from is overwritten later in the same operation: only
  // once the peer has read it, which each algorithm's data flow must guarantee (TSan checks).
  const std::size_t count = element_count(size, DType::f32);
  std::vector<Buffer> data;
  for (int r = 0; r < n; ++r)
    data.push_back(make_input(r, count, DType::f32, ReduceOp::sum));
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    const BufferView v = data[static_cast<std::size_t>(e.rank())].view();
    allreduce(e, {.name = "in-place", .input = v, .output = v}, std::move(done));
  }));
  const auto want =
      testing::reference_values(testing::all_ranks(n), count, ReduceOp::sum, DType::f32);
  for (int r = 0; r < n; ++r) {
    EXPECT_TRUE(
        testing::matches_values(data[static_cast<std::size_t>(r)].view(), want, ReduceOp::sum))
        << "rank " << r << " in place";
  }
}

INSTANTIATE_TEST_SUITE_P(
    ZeroCopy, AllreduceZeroCopy,
    ::testing::Combine(::testing::ValuesIn(kAllStrategyNames), ::testing::Values(2, 3, 4, 7),
                       ::testing::Values(SizeClass::one, SizeClass::chunk_plus_1, SizeClass::big)),
    matrix_name);

// ---- every dtype x every op, on the algorithm families ----

using DTypeParam = std::tuple<DType, ReduceOp, StrategyName>;

class AllreduceDTypes : public ::testing::TestWithParam<DTypeParam> {};

TEST_P(AllreduceDTypes, MatchesSerialReference) {
  const auto [t, op, strategy] = GetParam();
  if (!reduce_op_supports(op, t)) {
    // Unsupported combinations are an error, not a silent wrong answer.
    InprocWorld world(3, {.strategy = strategy});
    Buffer in(4, t), out(4, t);
    const auto statuses = run_on_all(world, [&](Engine& e, DoneCallback done) {
      allreduce(e, {.name = "bad", .input = in.view(), .output = out.view(), .op = op}, done);
    });
    for (const auto& s : statuses)
      EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
    return;
  }
  for (int n : {3, 4}) {
    InprocWorld world(two_per_host(n), {.chunk_bytes = 4096, .strategy = strategy});
    for (SizeClass size : {SizeClass::seven, SizeClass::chunk_plus_1}) {
      // chunk_plus_1 here is relative to the 1 MiB class; with 4 KiB chunks it spans many chunks.
      check_allreduce(world, {{t, op}}, size);
    }
  }
}

std::string dtype_name_of(const ::testing::TestParamInfo<DTypeParam>& info) {
  const auto [t, op, strategy] = info.param;
  return std::string(dtype_name(t)) + "_" + std::string(reduce_op_name(op)) + "_" +
         std::string(strategy_name(strategy));
}

INSTANTIATE_TEST_SUITE_P(
    EveryDTypeAndOp, AllreduceDTypes,
    ::testing::Combine(::testing::ValuesIn(kAllDTypes), ::testing::ValuesIn(kAllReduceOps),
                       ::testing::Values(StrategyName::binary_tree_star, StrategyName::clique,
                                         StrategyName::ring_rs_ag, StrategyName::halving_doubling,
                                         StrategyName::automatic)),
    dtype_name_of);

// ---- RING_RS_AG with fewer elements than ranks ----

// Messages all ranks sent for one f64 sum allreduce of `count` elements over the world's n ranks,
// after checking every rank's result.
std::uint64_t allreduce_messages(InprocWorld& world, std::size_t count) {
  const int n = world.size();
  std::vector<std::vector<double>> in(static_cast<std::size_t>(n)), out(in.size());
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count; ++i)
      in[static_cast<std::size_t>(r)].push_back(static_cast<double>(r * 100 + i));
    out[static_cast<std::size_t>(r)].resize(count);
  }
  const std::uint64_t before = world.messages_sent();
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    const auto r = static_cast<std::size_t>(e.rank());
    allreduce(e,
              {.name = "small",
               .input = ConstBufferView::of(std::span<const double>(in[r]), DType::f64),
               .output = BufferView::of(std::span<double>(out[r]), DType::f64)},
              done);
  }));
  for (int r = 0; r < n; ++r) {
    for (std::size_t i = 0; i < count; ++i) {
      EXPECT_EQ(out[static_cast<std::size_t>(r)][i],
                100.0 * n * (n - 1) / 2 + static_cast<double>(n * i))
          << "rank " << r << " element " << i;
    }
  }
  return world.messages_sent() - before;
}

std::uint64_t ring_allreduce_messages(int n, std::size_t count) {
  InprocWorld world(n, {.strategy = StrategyName::ring_rs_ag});
  return allreduce_messages(world, count);
}

TEST(RingAllreduce, FewerElementsThanRanksGoOverTheStrategysTreesNotAroundTheRing) {
  const int n = 16;
  // One number (a policy's vote) or n - 1: the ring would send 2(n - 1) messages per rank,
  // mostly empty; the trees send one up and one down per rank but the root.
  EXPECT_EQ(ring_allreduce_messages(n, 1), 2u * (n - 1));
  EXPECT_EQ(ring_allreduce_messages(n, n - 1), 2u * (n - 1));
  // From n elements every part holds one: the ring, 2(n - 1) messages per rank.
  EXPECT_EQ(ring_allreduce_messages(n, n), 2u * n * (n - 1));
}

// Bytes each rank sent to its right neighbour (rank + 1) and to its left (rank - 1) during one
// allreduce of `count` doubles, sums checked.
std::vector<std::pair<std::uint64_t, std::uint64_t>> ring_neighbour_bytes(InprocWorld& world,
                                                                          std::size_t count) {
  const int n = world.size();
  const auto sent = [&world, n](int r, int to) {
    return world.loop(r).call(
        [&world, r, to, n] { return world.engine(r).egress_bytes().get(wrap_rank(to, n)); });
  };
  std::vector<std::pair<std::uint64_t, std::uint64_t>> before, after;
  for (int r = 0; r < n; ++r)
    before.emplace_back(sent(r, r + 1), sent(r, r - 1));
  allreduce_messages(world, count);
  for (int r = 0; r < n; ++r) {
    const auto& b = before[static_cast<std::size_t>(r)];
    after.emplace_back(sent(r, r + 1) - b.first, sent(r, r - 1) - b.second);
  }
  return after;
}

TEST(RingAllreduce, BothWaysEveryOtherSliceGoesRoundBackwards) {
  const int n = 5;
  const std::size_t chunk = 8;  // doubles: a slice is n x 8 doubles
  InprocWorld one_way(
      n, {.chunk_bytes = chunk * sizeof(double), .strategy = StrategyName::ring_rs_ag});
  InprocWorld both_ways(
      n, {.chunk_bytes = chunk * sizeof(double), .strategy = StrategyName::ring_rs_ag_bidir});
  // Four slices: RING_RS_AG sends everything to the right, RING_RS_AG_BIDIR half each way. Every
  // rank sends 2(n - 1) parts of each slice, a part being 8 doubles.
  const std::uint64_t slice_bytes = 2 * (n - 1) * chunk * sizeof(double);
  for (const auto& [right, left] : ring_neighbour_bytes(one_way, 4 * n * chunk)) {
    EXPECT_EQ(right, 4 * slice_bytes);
    EXPECT_EQ(left, 0u);
  }
  for (const auto& [right, left] : ring_neighbour_bytes(both_ways, 4 * n * chunk)) {
    EXPECT_EQ(right, 2 * slice_bytes);
    EXPECT_EQ(left, 2 * slice_bytes);
  }
  // Three slices: two forwards, one backwards. One slice: forwards, as the plain ring.
  for (const auto& [right, left] : ring_neighbour_bytes(both_ways, 3 * n * chunk)) {
    EXPECT_EQ(right, 2 * slice_bytes);
    EXPECT_EQ(left, slice_bytes);
  }
  for (const auto& [right, left] : ring_neighbour_bytes(both_ways, n * chunk)) {
    EXPECT_EQ(right, slice_bytes);
    EXPECT_EQ(left, 0u);
  }
  // Uneven slices and parts: sums right (allreduce_messages checks them).
  EXPECT_EQ(allreduce_messages(both_ways, 3 * n * chunk + 7), 4u * n * 2 * (n - 1));
}

TEST(RingAllreduce, BothWaysBetweenTwoRanksIsTheRing) {
  // Between 2 ranks both neighbours are the same rank, so there is no other way round.
  InprocWorld world(2, {.chunk_bytes = 64, .strategy = StrategyName::ring_rs_ag_bidir});
  const auto bytes = ring_neighbour_bytes(world, 64);
  EXPECT_EQ(bytes[0].first, bytes[0].second);            // the same peer
  EXPECT_EQ(allreduce_messages(world, 64), 2u * 4 * 2);  // 2 ranks, 4 slices, 2 steps each
}

// ---- AUTO: recursive doubling for tiny allreduces, trees, a ring for large ones ----

TEST(AutoStrategy, AcrossHostsTinyGoByDoublingSmallOverTreesLargeRoundARing) {
  const int n = 8;  // 4 hosts
  InprocWorld world(two_per_host(n), {.strategy = StrategyName::automatic,
                                      .auto_ring_part_bytes = 64 * sizeof(double),
                                      .auto_doubling_bytes = 8 * sizeof(double)});
  // Up to 8 doubles, recursive doubling: log2(8) = 3 messages per rank.
  EXPECT_EQ(allreduce_messages(world, 1), 3u * n);
  EXPECT_EQ(allreduce_messages(world, 8), 3u * n);
  // Then, under 64 doubles per rank, BINARY_TREE_STAR's graphs: one message up and one down per
  // rank but the root. From there, the ring: 2(n - 1) messages per rank (two ranks a host: not
  // halving-doubling, whatever auto_halving_doubling_bytes says).
  EXPECT_EQ(allreduce_messages(world, 9), 2u * (n - 1));
  EXPECT_EQ(allreduce_messages(world, 64 * n - 1), 2u * (n - 1));
  EXPECT_EQ(allreduce_messages(world, 64 * n), 2u * n * (n - 1));
  EXPECT_EQ(allreduce_messages(world, 100 * n), 2u * n * (n - 1));
}

TEST(AutoStrategy, AcrossHostsTheRingGoesBothWaysOnOneHostForwards) {
  const int n = 4;
  const std::size_t chunk = 8;  // doubles; four slices of n x 8
  InprocWorld hosts(per_host(n, 1), {.chunk_bytes = chunk * sizeof(double),
                                     .strategy = StrategyName::automatic,
                                     .auto_ring_part_bytes = 8 * sizeof(double),
                                     .auto_halving_doubling_bytes = 0});
  for (const auto& [right, left] : ring_neighbour_bytes(hosts, 4 * n * chunk)) {
    EXPECT_GT(right, 0u);
    EXPECT_EQ(left, right);
  }
  InprocWorld one_host(n, {.chunk_bytes = chunk * sizeof(double),
                           .strategy = StrategyName::automatic,
                           .auto_local_ring_part_bytes = 8 * sizeof(double)});
  for (const auto& [right, left] : ring_neighbour_bytes(one_host, 4 * n * chunk)) {
    EXPECT_GT(right, 0u);
    EXPECT_EQ(left, 0u);
  }
}

TEST(AutoStrategy, AHostEachTakesHalvingDoublingInTheRingsPlaceUpToItsSize) {
  const int n = 8;  // 8 hosts
  InprocWorld world(per_host(n, 1), {.strategy = StrategyName::automatic,
                                     .auto_ring_part_bytes = 64 * sizeof(double),
                                     .auto_halving_doubling_bytes = 100 * n * sizeof(double)});
  EXPECT_EQ(allreduce_messages(world, 64 * n - 1), 2u * (n - 1));  // the trees
  // Halving-doubling up to 100 doubles per rank: log2(8) steps of the reduce-scatter and as many
  // of the all-gather, a message each per rank. Then the ring: 2(n - 1) per rank.
  EXPECT_EQ(allreduce_messages(world, 64 * n), 2u * 3 * n);
  EXPECT_EQ(allreduce_messages(world, 100 * n), 2u * 3 * n);
  EXPECT_EQ(allreduce_messages(world, 100 * n + 1), 2u * n * (n - 1));
}

TEST(AutoStrategy, OnOneHostTinyGoByDoublingSmallOverTheStarLargeRoundTheRing) {
  const int n = 4;
  InprocWorld world(n, {.strategy = StrategyName::automatic,
                        .auto_ring_part_bytes = 1,  // across hosts: not this world
                        .auto_local_ring_part_bytes = 4096,
                        .auto_doubling_bytes = sizeof(double)});
  EXPECT_EQ(allreduce_messages(world, 1), 2u * n);  // log2(4) = 2 per rank
  EXPECT_EQ(allreduce_messages(world, 2), 2u * (n - 1));
  EXPECT_EQ(allreduce_messages(world, 2047), 2u * (n - 1));      // 4,094 bytes per worker
  EXPECT_EQ(allreduce_messages(world, 2048), 2u * (n - 1) * n);  // 4 KiB each: 2(n - 1) per rank
}

TEST(AutoStrategy, DoublingOverRanksThatAreNotAPowerOfTwo) {
  // n = 6: ranks 1 and 3 hand their buffers to 0 and 2 (2 messages), the 4 others run log2(4) = 2
  // steps (8), and 0 and 2 hand the result back (2). n = 5: 1 + 8 + 1.
  for (const auto& [n, messages] : {std::pair{6, 12u}, std::pair{5, 10u}, std::pair{3, 4u}}) {
    InprocWorld world(n, {.strategy = StrategyName::automatic, .auto_doubling_bytes = 4096});
    EXPECT_EQ(allreduce_messages(world, 3), messages) << n << " ranks";
  }
}

TEST(AutoStrategy, DoublingIsOffByDefault) {
  InprocWorld world(4, {.strategy = StrategyName::automatic});
  EXPECT_EQ(allreduce_messages(world, 1), 2u * 3);  // the star
}

TEST(AutoStrategy, TheChoiceBySizeRanksAndHosts) {
  using enum AutoChoice;
  const EngineOptions defaults;
  const std::size_t pair = kDefaultAutoPairDoublingBytes, part = kDefaultAutoRingPartBytes,
                    local = kDefaultAutoLocalRingPartBytes;
  // Two ranks: one simultaneous exchange up to the pair threshold, on one host or across.
  for (int hosts : {1, 2}) {
    EXPECT_EQ(auto_allreduce_choice(defaults, 2, hosts, 8), doubling);
    EXPECT_EQ(auto_allreduce_choice(defaults, 2, hosts, pair), doubling);
  }
  // Above it: trees, then the ring from a part of auto_ring_part_bytes across hosts and of
  // auto_local_ring_part_bytes on one.
  EXPECT_EQ(auto_allreduce_choice(defaults, 2, 2, pair + 1), graphs);
  EXPECT_EQ(auto_allreduce_choice(defaults, 2, 2, 2 * part - 1), graphs);
  EXPECT_EQ(auto_allreduce_choice(defaults, 2, 2, 2 * part), ring);
  EXPECT_EQ(auto_allreduce_choice(defaults, 2, 1, pair + 1), ring);  // 32 KiB parts and more
  EXPECT_EQ(auto_allreduce_choice(defaults, 8, 1, 8 * local - 1), graphs);
  EXPECT_EQ(auto_allreduce_choice(defaults, 8, 1, 8 * local), ring);
  // More ranks: doubling only where auto_doubling_bytes says; trees, then the ring.
  EXPECT_EQ(auto_allreduce_choice(defaults, 4, 4, 8), graphs);
  EXPECT_EQ(auto_allreduce_choice(defaults, 4, 4, 4 * part - 1), graphs);
  EXPECT_EQ(auto_allreduce_choice(defaults, 4, 1, 4 * local - 1), graphs);
  EXPECT_EQ(auto_allreduce_choice(defaults, 4, 1, 4 * local), ring);
  // Among 4, 8, 16... ranks each on a host of its own, halving-doubling in the ring's place up to
  // auto_halving_doubling_bytes; not among 3 or 6, not with two ranks on a host, not on one host,
  // not with it at 0.
  const std::size_t hd = kDefaultAutoHalvingDoublingBytes;
  for (int n : {4, 8, 16}) {
    EXPECT_EQ(auto_allreduce_choice(defaults, n, n, n * part - 1), graphs) << n;
    if (n * part <= hd) {
      EXPECT_EQ(auto_allreduce_choice(defaults, n, n, n * part), halving_doubling) << n;
    }
    EXPECT_EQ(auto_allreduce_choice(defaults, n, n, hd), halving_doubling) << n;
    EXPECT_EQ(auto_allreduce_choice(defaults, n, n, hd + 1), ring) << n;
    EXPECT_EQ(auto_allreduce_choice(defaults, n, 1, hd), ring) << n;
  }
  for (int n : {3, 6})
    EXPECT_EQ(auto_allreduce_choice(defaults, n, n, hd), ring) << n;
  EXPECT_EQ(auto_allreduce_choice(defaults, 8, 4, hd), ring);  // two ranks a host
  EXPECT_EQ(auto_allreduce_choice(defaults, 2, 2, 2 * part), ring);
  const EngineOptions no_hd{.auto_halving_doubling_bytes = 0};
  EXPECT_EQ(auto_allreduce_choice(no_hd, 4, 4, 4 * part), ring);
  // One host with fewer cores than ranks: auto_ring_part_bytes, as across hosts.
  const EngineOptions two_cores{.host_cores = 2}, four_cores{.host_cores = 4};
  EXPECT_EQ(auto_allreduce_choice(two_cores, 2, 1, pair + 1), ring);  // a core each
  EXPECT_EQ(auto_allreduce_choice(two_cores, 4, 1, 4 * local), graphs);
  EXPECT_EQ(auto_allreduce_choice(two_cores, 4, 1, 4 * part), ring);  // one host: no HD
  EXPECT_EQ(auto_allreduce_choice(four_cores, 4, 1, 4 * local), ring);
  EXPECT_EQ(auto_allreduce_choice(two_cores, 4, 4, 4 * part - 1), graphs);
  const EngineOptions busy{.auto_doubling_bytes = kBusyPollAutoDoublingBytes};
  EXPECT_EQ(auto_allreduce_choice(busy, 4, 4, kBusyPollAutoDoublingBytes), doubling);
  EXPECT_EQ(auto_allreduce_choice(busy, 4, 4, kBusyPollAutoDoublingBytes + 1), graphs);
  EXPECT_EQ(auto_allreduce_choice(busy, 2, 2, pair), doubling);  // the larger of the two
  // Both thresholds at 0: never.
  const EngineOptions never{.auto_doubling_bytes = 0, .auto_pair_doubling_bytes = 0};
  EXPECT_EQ(auto_allreduce_choice(never, 2, 1, 8), graphs);
  EXPECT_EQ(auto_allreduce_choice(never, 1, 1, 0), graphs);
}

// Recursive doubling and the trees both send 2 messages between two ranks (the choice test above
// says which goes); the sums must be right either way, on one host and across two.
TEST(AutoStrategy, TwoRanksSumRightOnOneHostAndAcrossTwo) {
  for (bool hosts : {false, true}) {
    const ClusterSpec two_hosts(1, {{"10.0.0.1", 9999}, {"10.0.0.2", 9999}},
                                {{"10.0.0.1", 10000}, {"10.0.0.2", 10000}});
    InprocWorld world(hosts ? two_hosts : ClusterSpec::local(2, 10000),
                      {.strategy = StrategyName::automatic});
    EXPECT_EQ(allreduce_messages(world, 3), 2u);
    // 160 KB: across hosts the trees (one up, one down), on one host the ring (2 x 2 parts, of
    // 80 KB); 800 KB: the ring on one host or two.
    EXPECT_EQ(allreduce_messages(world, 20000), hosts ? 2u : 4u);
    EXPECT_EQ(allreduce_messages(world, 100000), 4u);
  }
}

TEST(AutoStrategy, DoublingGivesEveryDTypeAndOpOnEveryRankCount) {
  for (int n : {1, 2, 3, 4, 5, 7, 8}) {
    InprocWorld world(two_per_host(n), {.strategy = StrategyName::automatic,
                                        .auto_doubling_bytes = std::size_t{1} << 20});
    std::vector<std::pair<DType, ReduceOp>> cases;
    for (DType t : kAllDTypes)
      for (ReduceOp op : kAllReduceOps)
        if (reduce_op_supports(op, t)) cases.emplace_back(t, op);
    // Every supported (dtype, op) at once, as concurrent collectives; every rank's result is
    // checked against the serial reference.
    check_allreduce(world, cases, SizeClass::seven);
    check_allreduce(world, {{DType::f32, ReduceOp::sum}, {DType::f64, ReduceOp::avg}},
                    SizeClass::zero);
  }
}

// ---- results are bit-identical on every rank and across runs ----

TEST(AllreduceDeterminism, FloatSumsAreBitIdenticalEverywhereAndEveryTime) {
  // Values with rounding error, so the order of summation would show if it varied.
  for (StrategyName s : {StrategyName::star, StrategyName::multi_binary_tree_star,
                         StrategyName::ring_rs_ag, StrategyName::halving_doubling}) {
    std::vector<std::vector<float>> first_run;
    for (int run = 0; run < 3; ++run) {
      const int n = 7;
      InprocWorld world(two_per_host(n), {.chunk_bytes = 1024, .strategy = s});
      std::vector<std::vector<float>> in(n), out(n);
      for (int r = 0; r < n; ++r) {
        for (int i = 0; i < 5000; ++i)
          in[r].push_back(1.0f / static_cast<float>(3 + r * 7 + i));
        out[r].resize(in[r].size());
      }
      expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
        allreduce(e,
                  {.name = "x",
                   .input = ConstBufferView::of(std::span<const float>(in[e.rank()]), DType::f32),
                   .output = BufferView::of(std::span<float>(out[e.rank()]), DType::f32)},
                  done);
      }));
      for (int r = 1; r < n; ++r) {
        ASSERT_EQ(0, std::memcmp(out[0].data(), out[r].data(), out[0].size() * 4))
            << strategy_name(s) << ": rank " << r << " differs from rank 0";
      }
      if (run == 0) {
        first_run = out;
      } else {
        ASSERT_EQ(0, std::memcmp(first_run[0].data(), out[0].data(), out[0].size() * 4))
            << strategy_name(s) << ": run " << run << " differs from run 0";
      }
    }
  }
}

}  // namespace
}  // namespace kf
