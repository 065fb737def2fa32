// A worker program for the multi-process tests, run under kfrun: performs the named operations
// through kf::Peer and checks every result, printing "rank R: <op> ok" or an error; exits 1 on
// any failure.
//   net_worker [--count N] [--timeout S] [--die-rank K] [--ignore-term] OP...
//   OP: allreduce broadcast allgather barrier consensus reduce gather loop
// "loop" runs 16 MiB allreduces until one fails; with --die-rank K, rank K kills itself with
// SIGKILL while its first one is in flight.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "launch/peer.h"

namespace {

int g_failures = 0;

void report(const kf::Peer& peer, const std::string& op, const kf::Status& s, bool correct) {
  if (s.ok() && correct) {
    std::printf("rank %d: %s ok\n", peer.rank(), op.c_str());
  } else {
    ++g_failures;
    std::printf("rank %d: %s FAILED: %s\n", peer.rank(), op.c_str(),
                s.ok() ? "wrong result" : s.to_string().c_str());
  }
  std::fflush(stdout);
}

void run(kf::Peer& peer, const std::string& op, std::size_t count, int die_rank) {
  const int n = peer.size();
  const int r = peer.rank();
  if (op == "allreduce") {
    std::vector<float> x(count);
    for (std::size_t i = 0; i < count; ++i)
      x[i] = static_cast<float>((r + 1) + static_cast<int>(i % 7));
    const auto s = peer.allreduce(std::span<float>(x));
    bool ok = true;
    for (std::size_t i = 0; i < count && ok; ++i)
      ok = x[i] == static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7));
    std::vector<std::int32_t> m(1000);
    for (std::size_t i = 0; i < m.size(); ++i)
      m[i] = static_cast<std::int32_t>((static_cast<int>(i) + r) % n);
    const auto s2 = peer.allreduce(std::span<std::int32_t>(m), kf::ReduceOp::max);
    for (std::size_t i = 0; i < m.size() && ok; ++i)
      ok = m[i] == (n == 1 ? 0 : n - 1);
    report(peer, op, s.ok() ? s2 : s, ok);
  } else if (op == "broadcast") {
    const int root = n - 1;
    std::vector<double> x(count, r == root ? 0.0 : -1.0);
    if (r == root)
      for (std::size_t i = 0; i < count; ++i)
        x[i] = static_cast<double>(i) * 0.5;
    const auto s = peer.broadcast(kf::BufferView::of(std::span<double>(x), kf::DType::f64), root);
    bool ok = true;
    for (std::size_t i = 0; i < count && ok; ++i)
      ok = x[i] == static_cast<double>(i) * 0.5;
    report(peer, op, s, ok);
  } else if (op == "allgather" || op == "gather") {
    std::vector<std::int32_t> in(count), out(count * static_cast<std::size_t>(n), -1);
    for (std::size_t i = 0; i < count; ++i)
      in[i] = r * 1000 + static_cast<int>(i % 100);
    const auto iv = kf::ConstBufferView::of(std::span<const std::int32_t>(in), kf::DType::i32);
    const auto ov = kf::BufferView::of(std::span<std::int32_t>(out), kf::DType::i32);
    const auto s = op == "allgather" ? peer.allgather(iv, ov) : peer.gather(iv, ov, 0);
    bool ok = true;
    if (op == "allgather" || r == 0)
      for (int q = 0; q < n && ok; ++q)
        for (std::size_t i = 0; i < count && ok; ++i)
          ok = out[static_cast<std::size_t>(q) * count + i] == q * 1000 + static_cast<int>(i % 100);
    report(peer, op, s, ok);
  } else if (op == "reduce") {
    std::vector<std::int64_t> in(count, r + 1), out(count, 0);
    const auto s =
        peer.reduce(kf::ConstBufferView::of(std::span<const std::int64_t>(in), kf::DType::i64),
                    kf::BufferView::of(std::span<std::int64_t>(out), kf::DType::i64));
    bool ok = true;
    if (r == 0)
      for (std::size_t i = 0; i < count && ok; ++i)
        ok = out[i] == n * (n + 1) / 2;
    report(peer, op, s, ok);
  } else if (op == "barrier") {
    report(peer, op, peer.barrier(), true);
  } else if (op == "consensus") {
    const std::string same = "model-v1";
    bool agreed = false;
    const auto s =
        peer.consensus(kf::ConstBufferView(reinterpret_cast<const std::byte*>(same.data()),
                                           same.size(), kf::DType::u8),
                       &agreed);
    const std::string mine = "rank-" + std::to_string(r);
    bool agreed2 = true;
    const auto s2 =
        peer.consensus(kf::ConstBufferView(reinterpret_cast<const std::byte*>(mine.data()),
                                           mine.size(), kf::DType::u8),
                       &agreed2);
    report(peer, op, s.ok() ? s2 : s, agreed && agreed2 == (n == 1));
  } else if (op == "loop") {
    std::vector<float> x(4u << 20, 1.0f);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0;; ++i) {
      auto h =
          peer.allreduce_async(kf::ConstBufferView::of(std::span<const float>(x), kf::DType::f32),
                               kf::BufferView::of(std::span<float>(x), kf::DType::f32));
      if (i == 0 && r == die_rank) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // mid-allreduce
        ::kill(::getpid(), SIGKILL);
      }
      const auto s = h.wait();
      if (!s.ok()) {
        const double t =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::printf("rank %d: error after %.3f s: %s\n", r, t, s.to_string().c_str());
        std::fflush(stdout);
        ++g_failures;
        return;
      }
      if (i > 2000) return;
    }
  } else {
    std::printf("unknown op %s\n", op.c_str());
    ++g_failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 300000;  // > 1 MiB of f32: several chunks
  double timeout_s = 20;
  int die_rank = -1;
  std::vector<std::string> ops;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--count" && i + 1 < argc) {
      count = std::stoul(argv[++i]);
    } else if (a == "--timeout" && i + 1 < argc) {
      timeout_s = std::stod(argv[++i]);
    } else if (a == "--die-rank" && i + 1 < argc) {
      die_rank = std::stoi(argv[++i]);
    } else if (a == "--ignore-term") {
      ::signal(SIGTERM, SIG_IGN);  // report the error ourselves even when kfrun stops us
    } else {
      ops.push_back(a);
    }
  }
  try {
    kf::PeerOptions options;
    options.engine.timeout =
        std::chrono::duration_cast<kf::Duration>(std::chrono::duration<double>(timeout_s));
    kf::Peer peer = kf::Peer::from_env(options);
    for (const auto& op : ops)
      run(peer, op, count, die_rank);
    if (g_failures == 0) std::printf("rank %d: all ok\n", peer.rank());
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 2;
  }
  return g_failures == 0 ? 0 : 1;
}
