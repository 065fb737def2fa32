// gloo::allreduce (float, sum, out of place; Gloo's own algorithm choice) over Gloo's TCP
// transport, timed as kfbench times its allreduce, for bench/peers.sh: one CSV row per size from
// rank 0 (peer_common.h has the columns and the definitions). One process per rank, started by
// any means; they meet through a gloo::rendezvous::FileStore in a directory they all see (a fresh
// one for every job):
//   gloo_allreduce --rank R --size N --store DIR [--host ADDR] --sizes 8,4K --iters 20 ...
// --host: the address this rank's TCP device binds to (default 127.0.0.1).
// Exit 1 when a result is wrong or Gloo fails, 2 on bad arguments.
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <vector>

#include "bench/peers/peer_common.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kTimeout{300000};

template <typename T>
void allreduce(const std::shared_ptr<gloo::Context>& ctx, const T* in, T* out, std::size_t count,
               void (*fn)(void*, const void*, const void*, std::size_t), std::uint32_t tag) {
  gloo::AllreduceOptions opts(ctx);
  if (in != nullptr) opts.setInput(const_cast<T*>(in), count);
  opts.setOutput(out, count);
  opts.setReduceFunction(fn);
  opts.setTag(tag);
  opts.setTimeout(kTimeout);
  gloo::allreduce(opts);
}

int run(const kf::peers::Options& o) {
  gloo::transport::tcp::attr attr;
  attr.hostname = o.host;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(o.store);
  auto rctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
  rctx->setTimeout(kTimeout);
  rctx->connectFullMesh(store, dev);
  const std::shared_ptr<gloo::Context> ctx = rctx;
  const int n = o.size;
  if (o.rank == 0 && o.header) std::printf("%s\n", kf::peers::kCsvHeader);
  auto fsum =
      static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::sum<float>);
  auto dmax =
      static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::max<double>);
  auto usum = static_cast<void (*)(void*, const void*, const void*, std::size_t)>(
      &gloo::sum<std::uint64_t>);
  int status = 0;
  std::uint32_t tag = 0;
  for (const std::size_t bytes : o.sizes) {
    const std::size_t count = bytes / sizeof(float);
    std::vector<float> in(count), out(count);
    kf::peers::fill_input(in, o.rank);
    for (int i = 0; i < o.warmup; ++i)
      allreduce(ctx, in.data(), out.data(), count, fsum, ++tag);
    std::vector<double> seconds(static_cast<std::size_t>(o.iters));
    for (auto& s : seconds) {
      const auto t0 = Clock::now();
      allreduce(ctx, in.data(), out.data(), count, fsum, ++tag);
      s = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    allreduce<double>(ctx, nullptr, seconds.data(), seconds.size(), dmax, ++tag);
    std::vector<std::uint64_t> wrong{kf::peers::count_wrong(out, n)};
    allreduce<std::uint64_t>(ctx, nullptr, wrong.data(), 1, usum, ++tag);
    status = std::max(
        status, kf::peers::report_size("gloo_allreduce", o, o.rank, n, bytes, seconds, wrong[0]));
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  kf::peers::Options o;
  try {
    o = kf::peers::parse_options(argc, argv, true);
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "gloo_allreduce: %s\nusage: gloo_allreduce --rank R --size N --store DIR "
                 "[--host ADDR] [options]\n%s",
                 e.what(), kf::peers::kUsage);
    return 2;
  }
  if (o.system.empty()) o.system = "gloo";
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce: rank %d: %s\n", o.rank, e.what());
    return 1;
  }
}
