// Every collective operation besides allreduce, across strategies and cluster sizes; concurrency
// of named collectives; argument errors; phantom buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <tuple>

#include "harness.h"
#include "runtime/chunking.h"
#include "topology/strategy.h"

namespace kf {
namespace {

using testing::expect_all_ok;
using testing::make_input;
using testing::matches_reference;
using testing::run_on_all;

constexpr std::size_t kChunk = 4096;  // small chunks: many pieces even for modest buffers

// Element counts that sit on every boundary the chunking has: none, one, just under and just over
// one chunk, and several chunks plus a remainder.
std::vector<std::size_t> sizes_around_chunks(DType t) {
  const std::size_t chunk = kChunk / dtype_size(t);
  return {0, 1, 7, chunk - 1, chunk + 1, 3 * chunk + 5};
}

// even_part computes what split_even lists: the same ranges, tiling [offset, offset + count).
TEST(Chunking, EvenPartIsSplitEvenRangeByRange) {
  for (const std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{1023},
                                  std::size_t{1024}, std::size_t{25557032}}) {
    for (const int parts : {1, 2, 3, 7, 1024}) {
      const std::vector<Range> all = split_even(17, count, parts);
      ASSERT_EQ(all.size(), static_cast<std::size_t>(parts));
      std::size_t next = 17;
      for (int p = 0; p < parts; ++p) {
        const Range r = even_part(17, count, parts, p);
        EXPECT_EQ(r.first, all[static_cast<std::size_t>(p)].first) << count << "/" << parts;
        EXPECT_EQ(r.count, all[static_cast<std::size_t>(p)].count) << count << "/" << parts;
        EXPECT_EQ(r.first, next);
        EXPECT_LE(r.count, count / static_cast<std::size_t>(parts) + 1);
        next += r.count;
      }
      EXPECT_EQ(next, 17 + count);
    }
  }
  // The first count % parts ranges hold the extra elements: 10 over 3 is 4, 3, 3.
  EXPECT_EQ(even_part(17, 10, 3, 0).first, 17u);
  EXPECT_EQ(even_part(17, 10, 3, 0).count, 4u);
  EXPECT_EQ(even_part(17, 10, 3, 1).first, 21u);
  EXPECT_EQ(even_part(17, 10, 3, 1).count, 3u);
  EXPECT_EQ(even_part(17, 10, 3, 2).first, 24u);
  EXPECT_EQ(even_part(17, 10, 3, 2).count, 3u);
}

// (strategy, n, zero copy): with zero copy on, payloads are borrowed from the senders' buffers and
// read straight from there (InprocOptions::zero_copy), as between processes on one host.
using OpParam = std::tuple<StrategyName, int, bool>;

class Operations : public ::testing::TestWithParam<OpParam> {
 protected:
  InprocWorld make_world() {
    const auto [strategy, n, zero_copy] = GetParam();
    std::vector<PeerID> workers, runners;
    for (int r = 0; r < n; ++r) {  // three hosts, interleaved, to stress host-aware graphs
      const std::string host = "10.0.1." + std::to_string(r % 3 + 1);
      workers.push_back({host, static_cast<std::uint16_t>(10000 + r)});
      if (r < 3) runners.push_back({host, 9999});
    }
    return InprocWorld(ClusterSpec(1, runners, workers),
                       {.chunk_bytes = kChunk, .strategy = strategy}, {.zero_copy = zero_copy});
  }
  int n() const { return std::get<1>(GetParam()); }
  std::vector<int> roots() const {
    std::vector<int> r{0, n() - 1, n() / 2};
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    return r;
  }
};

TEST_P(Operations, BroadcastFromAnyRoot) {
  auto world = make_world();
  for (int root : roots()) {
    for (std::size_t count : sizes_around_chunks(DType::i32)) {
      std::vector<Buffer> in, out;
      for (int r = 0; r < n(); ++r) {
        in.push_back(make_input(r, count, DType::i32, ReduceOp::sum));
        out.emplace_back(count, DType::i32);
      }
      expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
        broadcast(e,
                  {.name = "b",
                   .input = in[e.rank()].view(),
                   .output = out[e.rank()].view(),
                   .root = root},
                  done);
      }));
      for (int r = 0; r < n(); ++r) {
        EXPECT_TRUE(matches_reference(out[r].view(), {root}, ReduceOp::sum))
            << "root " << root << " rank " << r << " count " << count;
      }
    }
  }
}

TEST_P(Operations, ReduceToAnyRoot) {
  auto world = make_world();
  for (int root : roots()) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) {
      for (std::size_t count : sizes_around_chunks(DType::f64)) {
        std::vector<Buffer> in, out;
        for (int r = 0; r < n(); ++r) {
          in.push_back(make_input(r, count, DType::f64, op));
          out.emplace_back(count, DType::f64);
        }
        expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
          reduce(e,
                 {.name = "r",
                  .input = in[e.rank()].view(),
                  .output = out[e.rank()].view(),
                  .op = op,
                  .root = root},
                 done);
        }));
        EXPECT_TRUE(matches_reference(out[root].view(), testing::all_ranks(n()), op))
            << "root " << root << " op " << reduce_op_name(op) << " count " << count;
      }
    }
  }
}

TEST_P(Operations, GatherToAnyRoot) {
  auto world = make_world();
  for (int root : roots()) {
    for (std::size_t count : sizes_around_chunks(DType::u16)) {
      std::vector<Buffer> in, out;
      for (int r = 0; r < n(); ++r) {
        in.push_back(make_input(r, count, DType::u16, ReduceOp::sum));
        out.emplace_back(r == root ? count * static_cast<std::size_t>(n()) : 0, DType::u16);
      }
      expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
        gather(e,
               {.name = "g",
                .input = in[e.rank()].view(),
                .output = out[e.rank()].view(),
                .root = root},
               done);
      }));
      for (int r = 0; r < n(); ++r) {
        EXPECT_TRUE(matches_reference(out[root].view().slice(r * count, count), {r}, ReduceOp::sum))
            << "block " << r << " at root " << root << " count " << count;
      }
    }
  }
}

TEST_P(Operations, Allgather) {
  auto world = make_world();
  for (std::size_t count : sizes_around_chunks(DType::f32)) {
    std::vector<Buffer> in, out;
    for (int r = 0; r < n(); ++r) {
      in.push_back(make_input(r, count, DType::f32, ReduceOp::sum));
      out.emplace_back(count * static_cast<std::size_t>(n()), DType::f32);
    }
    expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
      allgather(e, {.name = "ag", .input = in[e.rank()].view(), .output = out[e.rank()].view()},
                done);
    }));
    for (int r = 0; r < n(); ++r) {
      for (int b = 0; b < n(); ++b) {
        EXPECT_TRUE(matches_reference(out[r].view().slice(b * count, count), {b}, ReduceOp::sum))
            << "rank " << r << " block " << b;
      }
    }
  }
}

TEST_P(Operations, BarrierWaitsForEveryPeer) {
  auto world = make_world();
  // Rank 0 enters late; nobody may leave before it has entered.
  std::atomic<bool> last_entered{false};
  std::atomic<int> left_early{0};
  const auto statuses = run_on_all(world, [&](Engine& e, DoneCallback done) {
    auto enter = [&, &e = e, done] {
      if (e.rank() == 0) last_entered = true;
      barrier(e, "step", [&, done](Status s) {
        if (!last_entered) ++left_early;
        done(std::move(s));
      });
    };
    if (e.rank() == 0) {
      e.executor().post_after(std::chrono::milliseconds(50), enter);
    } else {
      enter();
    }
  });
  expect_all_ok(statuses);
  EXPECT_EQ(left_early, 0);
}

TEST_P(Operations, ConsensusAgreesOnlyWhenEqualEverywhere) {
  auto world = make_world();
  struct Case {
    const char* name;
    std::function<std::string(int)> bytes_of;
    bool want;
  };
  const std::vector<Case> cases = {
      {"equal", [](int) { return std::string("BINARY_TREE_STAR:v3"); }, true},
      {"empty", [](int) { return std::string(); }, true},
      {"one-differs", [&](int r) { return std::string(r == n() - 1 ? "STAR" : "RING"); }, n() == 1},
      {"length-differs", [&](int r) { return std::string(r == 0 ? "ab" : "abc"); }, n() == 1},
  };
  for (const auto& c : cases) {
    std::vector<std::string> bytes;
    for (int r = 0; r < n(); ++r)
      bytes.push_back(c.bytes_of(r));
    std::vector<int> agreed(static_cast<std::size_t>(n()), -1);
    expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
      const auto& b = bytes[e.rank()];
      consensus(e, c.name,
                ConstBufferView(reinterpret_cast<const std::byte*>(b.data()), b.size(), DType::u8),
                [&, done, r = e.rank()](Status s, bool ok) {
                  agreed[r] = ok;
                  done(std::move(s));
                });
    }));
    for (int r = 0; r < n(); ++r)
      EXPECT_EQ(agreed[r], c.want ? 1 : 0) << c.name << " rank " << r;
  }
}

TEST_P(Operations, SubsetAllreduceOverAForest) {
  auto world = make_world();
  // Two trees: even ranks under 0 (a chain), odd ranks under 1 (a star); a singleton when n == 1.
  std::vector<int> forest(static_cast<std::size_t>(n()));
  for (int r = 0; r < n(); ++r)
    forest[r] = r < 2 ? r : (r % 2 == 0 ? r - 2 : 1);
  for (std::size_t count : sizes_around_chunks(DType::f32)) {
    for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
      std::vector<Buffer> in, out;
      for (int r = 0; r < n(); ++r) {
        in.push_back(make_input(r, count, DType::f32, op));
        out.emplace_back(count, DType::f32);
      }
      expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
        subset_allreduce(e,
                         {.name = "subset",
                          .input = in[e.rank()].view(),
                          .output = out[e.rank()].view(),
                          .op = op,
                          .forest = forest},
                         done);
      }));
      for (int r = 0; r < n(); ++r) {
        std::vector<int> group;
        for (int q = 0; q < n(); ++q) {
          if (q % 2 == r % 2) group.push_back(q);
        }
        EXPECT_TRUE(matches_reference(out[r].view(), group, op))
            << "rank " << r << " count " << count;
      }
    }
  }
}

TEST_P(Operations, PeerToPeerVersionedBlobs) {
  auto world = make_world();
  if (n() == 1) {  // nobody else to ask: an argument error, not a hang
    std::promise<Status> rejected;
    world.post(0, [&](Engine& e) {
      request_blob(e, {.peer = 0, .name = "model"}, [&](Status s, Blob) { rejected.set_value(s); });
    });
    const Status s = rejected.get_future().get();
    EXPECT_EQ(s.code(), ErrorCode::invalid_argument) << s.to_string();
    return;
  }
  // Every rank saves versions 1..4 of "model"; only the last three are kept.
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    for (int v = 1; v <= 4; ++v) {
      const std::string text =
          "model of rank " + std::to_string(e.rank()) + " v" + std::to_string(v);
      save_blob(
          e, "model",
          ConstBufferView(reinterpret_cast<const std::byte*>(text.data()), text.size(), DType::u8));
    }
    done(Status{});
  }));
  std::vector<std::string> latest(n()), v2(n());
  std::vector<Status> v1(n());
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    const int r = e.rank();
    const int peer = (r + 1) % n();
    auto pending = std::make_shared<int>(3);
    auto step = [pending, done] {
      if (--*pending == 0) done(Status{});
    };
    auto text = [](const Blob& b) {
      return std::string(reinterpret_cast<const char*>(b.bytes->data()), b.bytes->size());
    };
    request_blob(e, {.peer = peer, .name = "model"}, [&, r, step, text](Status s, Blob b) {
      if (s.ok()) latest[r] = text(b) + " @" + std::to_string(b.version);
      step();
    });
    request_blob(e, {.peer = peer, .name = "model", .version = 2},
                 [&, r, step, text](Status s, Blob b) {
                   if (s.ok()) v2[r] = text(b);
                   step();
                 });
    request_blob(e, {.peer = peer, .name = "model", .version = 1}, [&, r, step](Status s, Blob) {
      v1[r] = s;
      step();
    });
  }));
  for (int r = 0; r < n(); ++r) {
    const int peer = (r + 1) % n();
    EXPECT_EQ(latest[r], "model of rank " + std::to_string(peer) + " v4 @4");
    EXPECT_EQ(v2[r], "model of rank " + std::to_string(peer) + " v2");
    EXPECT_EQ(v1[r].code(), ErrorCode::not_found) << v1[r].to_string();
  }
}

TEST_P(Operations, ManyNamedCollectivesInDifferentOrders) {
  auto world = make_world();
  constexpr int kOps = 12;
  const std::size_t count = kChunk / 4 * 2 + 3;
  std::vector<std::vector<Buffer>> in(n()), out(n());
  for (int r = 0; r < n(); ++r) {
    for (int k = 0; k < kOps; ++k) {
      in[r].push_back(make_input(r + k, count, DType::i64, ReduceOp::sum));
      out[r].emplace_back(count, DType::i64);
    }
  }
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    std::vector<int> order(kOps);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(static_cast<unsigned>(e.rank() * 7919 + 1));
    std::shuffle(order.begin(), order.end(), rng);
    auto pending = std::make_shared<int>(kOps);
    auto error = std::make_shared<Status>();
    for (int k : order) {
      allreduce(e,
                {.name = "tensor/" + std::to_string(k),
                 .input = in[e.rank()][k].view(),
                 .output = out[e.rank()][k].view()},
                [pending, error, done](Status s) {
                  if (!s.ok()) *error = s;
                  if (--*pending == 0) done(*error);
                });
    }
  }));
  for (int r = 0; r < n(); ++r) {
    for (int k = 0; k < kOps; ++k) {
      std::vector<int> shifted;
      for (int q = 0; q < n(); ++q)
        shifted.push_back(q + k);
      EXPECT_TRUE(matches_reference(out[r][k].view(), shifted, ReduceOp::sum)) << "op " << k;
    }
  }
}

TEST_P(Operations, SameNameReusedStepAfterStep) {
  // A training loop reuses "grad" every step; fast peers start step t+1 while slow ones finish t.
  auto world = make_world();
  constexpr int kSteps = 20;
  const std::size_t count = 777;
  std::vector<std::vector<Buffer>> in(n()), out(n());
  for (int r = 0; r < n(); ++r) {
    for (int t = 0; t < kSteps; ++t) {
      in[r].push_back(make_input(r * 3 + t, count, DType::i32, ReduceOp::sum));
      out[r].emplace_back(count, DType::i32);
    }
  }
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    auto step = std::make_shared<std::function<void(int)>>();
    *step = [&, &e = e, step, done](int t) {
      if (t == kSteps) {
        done(Status{});
        *step = nullptr;  // break the self-reference
        return;
      }
      allreduce(
          e, {.name = "grad", .input = in[e.rank()][t].view(), .output = out[e.rank()][t].view()},
          [step, done, t](Status s) {
            if (!s.ok()) {
              done(s);
              return;
            }
            (*step)(t + 1);
          });
    };
    (*step)(0);
  }));
  for (int r = 0; r < n(); ++r) {
    for (int t = 0; t < kSteps; ++t) {
      std::vector<int> ranks;
      for (int q = 0; q < n(); ++q)
        ranks.push_back(q * 3 + t);
      EXPECT_TRUE(matches_reference(out[r][t].view(), ranks, ReduceOp::sum)) << "step " << t;
    }
  }
}

TEST_P(Operations, PhantomBuffersFlowWithoutData) {
  auto world = make_world();
  const std::size_t count = (std::size_t{64} << 20) / 4;  // 64 MiB of f32 that does not exist
  const auto phantom = BufferView::phantom(count, DType::f32);
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    allreduce(e, {.name = "ghost", .input = phantom, .output = phantom}, done);
  }));
  expect_all_ok(run_on_all(world, [&](Engine& e, DoneCallback done) {
    broadcast(e, {.name = "ghost-b", .input = phantom, .output = phantom, .root = n() - 1}, done);
  }));
}

std::string op_param_name(const ::testing::TestParamInfo<OpParam>& p) {
  return std::string(strategy_name(std::get<0>(p.param))) + "_n" +
         std::to_string(std::get<1>(p.param)) + (std::get<2>(p.param) ? "_zero_copy" : "");
}

INSTANTIATE_TEST_SUITE_P(AllStrategies, Operations,
                         ::testing::Combine(::testing::ValuesIn(kAllStrategyNames),
                                            ::testing::Values(1, 2, 3, 4, 5, 7, 8, 16),
                                            ::testing::Values(false)),
                         op_param_name);
INSTANTIATE_TEST_SUITE_P(ZeroCopy, Operations,
                         ::testing::Combine(::testing::ValuesIn(kAllStrategyNames),
                                            ::testing::Values(2, 3, 5), ::testing::Values(true)),
                         op_param_name);

// ---- argument errors ----

TEST(OperationErrors, BadArgumentsAreReportedNotGuessed) {
  InprocWorld world(3);
  Buffer i32(4, DType::i32), f32(4, DType::f32), f32_short(3, DType::f32);
  const auto expect_invalid = [&](const std::function<void(Engine&, DoneCallback)>& start,
                                  const std::string& needle) {
    const auto statuses = run_on_all(world, start);
    for (const auto& s : statuses) {
      EXPECT_EQ(s.code(), ErrorCode::invalid_argument) << s.to_string();
      EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
    }
  };
  expect_invalid(
      [&](Engine& e, DoneCallback d) {
        allreduce(e, {.name = "a", .input = i32.view(), .output = i32.view(), .op = ReduceOp::avg},
                  d);
      },
      "avg is not defined for i32");
  expect_invalid(
      [&](Engine& e, DoneCallback d) {
        allreduce(e, {.name = "b", .input = f32.view(), .output = f32_short.view()}, d);
      },
      "input has 4 elements but output has 3");
  expect_invalid(
      [&](Engine& e, DoneCallback d) {
        allreduce(e, {.name = "c", .input = f32.view(), .output = i32.view()}, d);
      },
      "input is f32 but output is i32");
  expect_invalid(
      [&](Engine& e, DoneCallback d) {
        broadcast(e, {.name = "d", .input = f32.view(), .output = f32.view(), .root = 3}, d);
      },
      "root 3 outside 0..2");
  expect_invalid(
      [&](Engine& e, DoneCallback d) {
        subset_allreduce(
            e, {.name = "e", .input = f32.view(), .output = f32.view(), .forest = {1, 0, 2}}, d);
      },
      "cycle");
  expect_invalid(
      [&](Engine& e, DoneCallback d) {
        allgather(e, {.name = "f", .input = f32.view(), .output = f32.view()}, d);
      },
      "output must hold 3 x 4 f32 elements");
}

TEST(OperationErrors, ANameAlreadyInFlightIsRejected) {
  InprocWorld world(2);
  Buffer a(4, DType::f32), b(4, DType::f32);
  std::promise<Status> second;
  world.post(0, [&](Engine& e) {
    allreduce(e, {.name = "dup", .input = a.view(), .output = a.view()}, [](Status) {});
    allreduce(e, {.name = "dup", .input = b.view(), .output = b.view()},
              [&](Status s) { second.set_value(s); });
  });
  const Status s = second.get_future().get();
  EXPECT_EQ(s.code(), ErrorCode::invalid_argument);
  EXPECT_NE(s.message().find("already in flight"), std::string::npos) << s.message();
  // Let rank 1 join so the first one completes before the world goes away.
  std::promise<Status> first_peer;
  world.post(1, [&](Engine& e) {
    allreduce(e, {.name = "dup", .input = b.view(), .output = b.view()},
              [&](Status st) { first_peer.set_value(st); });
  });
  EXPECT_TRUE(first_peer.get_future().get().ok());
}

}  // namespace
}  // namespace kf
