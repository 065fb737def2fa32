#include "bench/kfbench_soak.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <future>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/kfbench_run.h"
#include "runtime/collectives.h"
#include "topology/strategy.h"

namespace kf::bench {
namespace {

using Clock = std::chrono::steady_clock;

enum Op : std::size_t {
  kAllreduce,
  kBroadcast,
  kReduce,
  kAllgather,
  kGather,
  kConcurrent,
  kConsensus,
  kSubset,
  kBlob,
  kBarrier,
  kStop,
  kOpCount,
};
constexpr std::array<const char*, kOpCount> kOpNames = {
    "allreduce", "broadcast",        "reduce",
    "allgather", "gather",           "concurrent_allreduce",
    "consensus", "subset_allreduce", "blob_p2p",
    "barrier",   "stop_allreduce"};

// The (dtype, op) pairs the rounds take in turn: every reduction op, integer and floating dtypes,
// both 16-bit floats. The inputs of fill_bench_input reduce exactly in each of them.
struct Combo {
  DType dtype;
  ReduceOp op;
};
constexpr Combo kCombos[] = {{DType::f32, ReduceOp::sum},  {DType::f64, ReduceOp::avg},
                             {DType::i32, ReduceOp::max},  {DType::f16, ReduceOp::sum},
                             {DType::bf16, ReduceOp::min}, {DType::u8, ReduceOp::prod},
                             {DType::i64, ReduceOp::sum}};

constexpr std::size_t kInFlight = 3;  // named allreduces in flight at once

std::uint64_t count_differing(const std::byte* got, const std::byte* want, std::size_t count,
                              std::size_t elem) {
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i)
    wrong += std::memcmp(got + i * elem, want + i * elem, elem) != 0 ? 1 : 0;
  return wrong;
}

std::vector<std::size_t> soak_sizes(const SoakBench& b) {
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = std::max<std::size_t>(b.min_bytes, 1); bytes <= b.max_bytes;) {
    sizes.push_back(bytes);
    const std::size_t next = b.step > 0
                                 ? bytes + b.step
                                 : static_cast<std::size_t>(static_cast<double>(bytes) * b.factor);
    if (next <= bytes) break;
    bytes = next;
  }
  if (sizes.empty()) sizes.push_back(std::max<std::size_t>(b.min_bytes, 1));
  return sizes;
}

class Soak {
 public:
  Soak(Peer& peer, const SoakBench& b)
      : peer_(peer), n_(peer.size()), rank_(peer.rank()), sizes_(soak_sizes(b)) {
    // Every buffer is allocated once, for the largest size: what the soak watches is the
    // runtime's memory, not this loop's allocations.
    const std::size_t max_bytes = std::max<std::size_t>(sizes_.back(), 8);
    const auto n = static_cast<std::size_t>(n_);
    in_.resize(max_bytes);
    out_.resize(max_bytes * n);
    want_.resize(max_bytes * n);
    for (std::size_t k = 0; k < kInFlight; ++k) {
      concurrent_in_[k].resize(max_bytes / sizeof(float) + 1);
      concurrent_out_[k].resize(max_bytes / sizeof(float) + 1);
    }
    subset_in_.resize(max_bytes / sizeof(float) + 1);
    subset_out_.resize(max_bytes / sizeof(float) + 1);
    for (int i = 0; i < n_; ++i)
      pairs_.push_back(i - i % 2);  // trees {0, 1}, {2, 3}, ...; an odd last rank alone
  }

  const std::vector<std::size_t>& sizes() const { return sizes_; }
  const std::array<std::uint64_t, kOpCount>& calls() const { return calls_; }
  const std::array<std::uint64_t, kOpCount>& wrong() const { return wrong_; }
  std::uint64_t total_calls() const {
    std::uint64_t t = 0;
    for (auto c : calls_)
      t += c;
    return t;
  }
  std::uint64_t total_wrong() const {
    std::uint64_t t = 0;
    for (auto w : wrong_)
      t += w;
    return t;
  }

  // One round; returns whether every rank agreed to stop after it (`expired`: this rank's clock
  // passed its deadline). The round number is read as mixed-radix digits, size fastest, then
  // strategy, (dtype, op) and root, so that every combination comes up once every
  // sizes x 12 x 7 x n rounds whatever the counts are.
  bool round(std::uint64_t r, bool expired) {
    constexpr std::uint64_t slots = std::size(kAllStrategyNames) + 1;
    std::uint64_t digits = r;
    const std::size_t bytes = sizes_[digits % sizes_.size()];
    digits /= sizes_.size();
    set_strategy(r, digits % slots);
    digits /= slots;
    const Combo c = kCombos[digits % std::size(kCombos)];
    digits /= std::size(kCombos);
    const int root = static_cast<int>(digits % static_cast<std::uint64_t>(n_));
    const std::size_t elem = dtype_size(c.dtype);
    const std::size_t count = std::max<std::size_t>(bytes / elem, 1);
    allreduce(r, c, count, elem);
    broadcast(r, c, count, elem, root);
    reduce(r, c, count, elem, root);
    gathers(r, c, count, elem, root);
    concurrent(r, count * elem);
    consensus(r);
    subset(r, count * elem);
    blob(r, count * elem);
    std::array<std::uint32_t, 1> stop{expired ? 1u : 0u};
    ok(peer_.allreduce(std::span<std::uint32_t>(stop), ReduceOp::max), r, kStop);
    return stop[0] != 0;
  }

 private:
  // Slots 0-10: the 11 named strategies; slot 11: a STAR forest rooted at a rank that rotates
  // with the round (what adaptive_strategy switches to).
  void set_strategy(std::uint64_t r, std::uint64_t slot) {
    if (slot < std::size(kAllStrategyNames)) {
      peer_.set_strategy(kAllStrategyNames[slot]);
      return;
    }
    const int star = static_cast<int>(r % static_cast<std::uint64_t>(n_));
    std::vector<int> forest(static_cast<std::size_t>(n_), star);
    const Status s = peer_.set_strategy_forest(std::move(forest), fmt::format("STAR@{}", star));
    if (!s.ok()) throw std::runtime_error(fmt::format("round {} (strategy): {}", r, s.to_string()));
  }

  void allreduce(std::uint64_t r, Combo c, std::size_t count, std::size_t elem) {
    fill_bench_input(in_.data(), count, c.dtype, rank_, c.op);
    const BufferView out(out_.data(), count, c.dtype);
    Status s;
    if (r % 2 == 0) {
      std::memset(out_.data(), 0, count * elem);
      s = peer_.allreduce(ConstBufferView(in_.data(), count, c.dtype), out, c.op);
    } else {
      std::memcpy(out_.data(), in_.data(), count * elem);
      s = peer_.allreduce(out, out, c.op);
    }
    ok(s, r, kAllreduce);
    wrong_[kAllreduce] += count_wrong_allreduce(out_.data(), count, c.dtype, c.op, n_);
  }

  void broadcast(std::uint64_t r, Combo c, std::size_t count, std::size_t elem, int root) {
    fill_bench_input(want_.data(), count, c.dtype, root, c.op);
    if (rank_ == root) {
      std::memcpy(out_.data(), want_.data(), count * elem);
    } else {
      std::memset(out_.data(), 0, count * elem);
    }
    ok(peer_.broadcast(BufferView(out_.data(), count, c.dtype), root), r, kBroadcast);
    wrong_[kBroadcast] += count_differing(out_.data(), want_.data(), count, elem);
  }

  void reduce(std::uint64_t r, Combo c, std::size_t count, std::size_t elem, int root) {
    fill_bench_input(in_.data(), count, c.dtype, rank_, c.op);
    std::memset(out_.data(), 0, count * elem);
    ok(peer_.reduce(ConstBufferView(in_.data(), count, c.dtype),
                    BufferView(out_.data(), count, c.dtype), c.op, root),
       r, kReduce);
    if (rank_ == root)
      wrong_[kReduce] += count_wrong_allreduce(out_.data(), count, c.dtype, c.op, n_);
  }

  // allgather, then gather to `root`: the same n x input in rank order.
  void gathers(std::uint64_t r, Combo c, std::size_t count, std::size_t elem, int root) {
    const std::size_t total = count * static_cast<std::size_t>(n_);
    fill_bench_input(in_.data(), count, c.dtype, rank_, c.op);
    for (int q = 0; q < n_; ++q)
      fill_bench_input(want_.data() + static_cast<std::size_t>(q) * count * elem, count, c.dtype, q,
                       c.op);
    const ConstBufferView input(in_.data(), count, c.dtype);
    const BufferView output(out_.data(), total, c.dtype);
    std::memset(out_.data(), 0, total * elem);
    ok(peer_.allgather(input, output), r, kAllgather);
    wrong_[kAllgather] += count_differing(out_.data(), want_.data(), total, elem);
    std::memset(out_.data(), 0, total * elem);
    ok(peer_.gather(input, output, root), r, kGather);
    if (rank_ == root) wrong_[kGather] += count_differing(out_.data(), want_.data(), total, elem);
  }

  // Three f32 sums of falling sizes under fixed names, in flight together and started in an
  // order that differs by rank (named collectives may).
  void concurrent(std::uint64_t r, std::size_t bytes) {
    std::array<Handle, kInFlight> handles;
    std::array<std::size_t, kInFlight> counts{};
    for (std::size_t j = 0; j < kInFlight; ++j) {
      const std::size_t k = (j + static_cast<std::size_t>(rank_)) % kInFlight;
      counts[k] = std::max<std::size_t>(bytes / sizeof(float) >> k, 1);
      auto* in = reinterpret_cast<std::byte*>(concurrent_in_[k].data());
      fill_bench_input(in, counts[k], DType::f32, rank_, ReduceOp::sum);
      std::fill_n(concurrent_out_[k].begin(), counts[k], 0.0f);
      handles[k] = peer_.allreduce_async(
          ConstBufferView(in, counts[k], DType::f32),
          BufferView::of(std::span<float>(concurrent_out_[k].data(), counts[k]), DType::f32),
          ReduceOp::sum, fmt::format("soak.concurrent.{}", k));
    }
    for (std::size_t k = 0; k < kInFlight; ++k) {
      ok(handles[k].wait(), r, kConcurrent);
      wrong_[kConcurrent] +=
          count_wrong_allreduce(reinterpret_cast<const std::byte*>(concurrent_out_[k].data()),
                                counts[k], DType::f32, ReduceOp::sum, n_);
    }
  }

  // Equal bytes must agree; every 8th round the bytes carry the rank and (with 2 or more ranks)
  // must not.
  void consensus(std::uint64_t r) {
    const bool differ = r % 8 == 7 && n_ > 1;
    const std::array<std::uint64_t, 2> bytes{r, differ ? static_cast<std::uint64_t>(rank_) : 0};
    bool agreed = differ;  // the wrong answer unless the call writes the right one
    ok(peer_.consensus(ConstBufferView(reinterpret_cast<const std::byte*>(bytes.data()),
                                       sizeof bytes, DType::u8),
                       &agreed),
       r, kConsensus);
    wrong_[kConsensus] += agreed == !differ ? 0 : 1;
  }

  // A sum within pairs of ranks (the runtime's subset_allreduce over a forest), through post.
  void subset(std::uint64_t r, std::size_t bytes) {
    const std::size_t count = std::max<std::size_t>(bytes / sizeof(float), 1);
    std::fill_n(subset_in_.begin(), count, static_cast<float>(rank_ + 1));
    std::fill_n(subset_out_.begin(), count, 0.0f);
    auto done = std::make_shared<std::promise<Status>>();
    std::future<Status> result = done->get_future();
    peer_.post([this, count, done](Engine& engine) {
      subset_allreduce(
          engine,
          {.name = "soak.subset",
           .input = ConstBufferView(reinterpret_cast<const std::byte*>(subset_in_.data()), count,
                                    DType::f32),
           .output = BufferView::of(std::span<float>(subset_out_.data(), count), DType::f32),
           .op = ReduceOp::sum,
           .forest = pairs_},
          [done](Status s) { done->set_value(std::move(s)); });
    });
    ok(result.get(), r, kSubset);
    const int first = rank_ - rank_ % 2;
    float want = static_cast<float>(first + 1);
    if (first + 1 < n_) want += static_cast<float>(first + 2);
    for (std::size_t i = 0; i < count; ++i)
      wrong_[kSubset] += subset_out_[i] == want ? 0 : 1;
  }

  // A blob saved as version r + 1 under a fixed name, a barrier, then the next rank's version
  // r + 1 fetched and checked (the store keeps 3 versions; the next save of the same name is a
  // round away, behind collectives that need this rank).
  void blob(std::uint64_t r, std::size_t bytes) {
    const auto pattern = [r](int rank, std::size_t i) {
      return static_cast<std::byte>((r + static_cast<std::uint64_t>(rank) * 7 + i) & 0xff);
    };
    for (std::size_t i = 0; i < bytes; ++i)
      in_[i] = pattern(rank_, i);
    peer_.save("soak.blob", ConstBufferView(in_.data(), bytes, DType::u8), r + 1);
    ok(peer_.barrier(), r, kBarrier);
    if (n_ < 2) return;  // no other rank to ask
    const int from = (rank_ + 1) % n_;
    Blob got;
    ok(peer_.request(from, "soak.blob", &got, r + 1), r, kBlob);
    if (got.version != r + 1 || !got.bytes || got.bytes->size() != bytes) {
      wrong_[kBlob] += bytes;
      return;
    }
    for (std::size_t i = 0; i < bytes; ++i)
      wrong_[kBlob] += (*got.bytes)[i] == pattern(from, i) ? 0 : 1;
  }

  void ok(const Status& s, std::uint64_t r, Op op) {
    ++calls_[op];
    if (!s.ok())
      throw std::runtime_error(fmt::format("round {} ({}): {}", r, kOpNames[op], s.to_string()));
  }

  Peer& peer_;
  int n_;
  int rank_;
  std::vector<std::size_t> sizes_;
  std::vector<std::byte> in_, out_, want_;
  std::array<std::vector<float>, kInFlight> concurrent_in_, concurrent_out_;
  std::vector<float> subset_in_, subset_out_;
  std::vector<int> pairs_;
  std::array<std::uint64_t, kOpCount> calls_{}, wrong_{};
};

}  // namespace

int run_soak(Peer& peer, const SoakBench& b, std::ostream& out) {
  Soak soak(peer, b);
  const bool report = peer.rank() == 0;
  const auto start = Clock::now();
  const auto deadline = start + b.duration;
  auto next_progress = start + b.progress_every;
  std::uint64_t rounds = 0;
  if (report && !b.json) {
    out << fmt::format("# kfbench soak: {} ranks, {:.0f} s, sizes {}..{} B ({} sizes)\n",
                       peer.size(), std::chrono::duration<double>(b.duration).count(),
                       soak.sizes().front(), soak.sizes().back(), soak.sizes().size())
        << std::flush;
  }
  for (bool stop = false; !stop;) {
    const auto now = Clock::now();
    stop = soak.round(rounds, now >= deadline);
    ++rounds;
    if (report && !b.json && now >= next_progress) {
      out << fmt::format("# soak: {:.0f} s, {} rounds, {} collectives, {} wrong (rank 0)\n",
                         std::chrono::duration<double>(now - start).count(), rounds,
                         soak.total_calls(), soak.total_wrong())
          << std::flush;
      next_progress += b.progress_every;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  // Every rank's counts: summed per operation, and each rank's rounds in rank order.
  std::vector<std::uint64_t> sums(2 * kOpCount);
  std::copy(soak.calls().begin(), soak.calls().end(), sums.begin());
  std::copy(soak.wrong().begin(), soak.wrong().end(), sums.begin() + kOpCount);
  Status s = peer.allreduce(std::span<std::uint64_t>(sums), ReduceOp::sum);
  std::vector<std::uint64_t> per_rank(static_cast<std::size_t>(peer.size()));
  const std::array<std::uint64_t, 1> mine{rounds};
  if (s.ok()) {
    s = peer.allgather(
        ConstBufferView(reinterpret_cast<const std::byte*>(mine.data()), 1, DType::u64),
        BufferView::of(std::span<std::uint64_t>(per_rank), DType::u64));
  }
  if (!s.ok()) throw std::runtime_error("soak report: " + s.to_string());
  std::uint64_t calls = 0, wrong = 0;
  for (std::size_t op = 0; op < kOpCount; ++op) {
    calls += sums[op];
    wrong += sums[kOpCount + op];
  }
  if (report) {
    if (b.json) {
      nlohmann::json ops = nlohmann::json::object();
      for (std::size_t op = 0; op < kOpCount; ++op)
        ops[kOpNames[op]] = {{"calls", sums[op]}, {"wrong", sums[kOpCount + op]}};
      out << nlohmann::json{{"collective", "soak"},
                            {"ranks", peer.size()},
                            {"seconds", seconds},
                            {"rounds", rounds},
                            {"rounds_per_rank", per_rank},
                            {"sizes", soak.sizes()},
                            {"collectives", calls},
                            {"wrong", wrong},
                            {"ops", ops}}
                 .dump()
          << "\n";
    } else {
      out << fmt::format("# {:<22} {:>14} {:>10}\n", "operation", "calls", "wrong");
      for (std::size_t op = 0; op < kOpCount; ++op)
        out << fmt::format("  {:<22} {:>14} {:>10}\n", kOpNames[op], sums[op], sums[kOpCount + op]);
      out << fmt::format(
          "# soak done: {} ranks, {:.1f} s, {} rounds per rank ({}), {} collectives, {} wrong\n",
          peer.size(), seconds, rounds, fmt::join(per_rank, " "), calls, wrong);
    }
  }
  return wrong == 0 ? 0 : 1;
}

}  // namespace kf::bench
