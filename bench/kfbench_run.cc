#include "bench/kfbench_run.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>
#include <vector>

#include "bench/nccl_table.h"
#include "real/fd.h"
#include "runtime/half.h"

namespace kf::bench {
namespace {

using Clock = std::chrono::steady_clock;

void store(std::byte* p, DType t, double v) {
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case DType::u8:
      return put(static_cast<std::uint8_t>(v));
    case DType::u16:
      return put(static_cast<std::uint16_t>(v));
    case DType::u32:
      return put(static_cast<std::uint32_t>(v));
    case DType::u64:
      return put(static_cast<std::uint64_t>(v));
    case DType::i8:
      return put(static_cast<std::int8_t>(v));
    case DType::i16:
      return put(static_cast<std::int16_t>(v));
    case DType::i32:
      return put(static_cast<std::int32_t>(v));
    case DType::i64:
      return put(static_cast<std::int64_t>(v));
    case DType::f16:
      return put(float_to_f16(static_cast<float>(v)));
    case DType::bf16:
      return put(float_to_bf16(static_cast<float>(v)));
    case DType::f32:
      return put(static_cast<float>(v));
    case DType::f64:
      return put(v);
  }
}

double load(const std::byte* p, DType t) {
  auto get = [p]<typename T>(T) {
    T x;
    std::memcpy(&x, p, sizeof x);
    return x;
  };
  switch (t) {
    case DType::u8:
      return get(std::uint8_t{});
    case DType::u16:
      return get(std::uint16_t{});
    case DType::u32:
      return get(std::uint32_t{});
    case DType::u64:
      return static_cast<double>(get(std::uint64_t{}));
    case DType::i8:
      return get(std::int8_t{});
    case DType::i16:
      return get(std::int16_t{});
    case DType::i32:
      return get(std::int32_t{});
    case DType::i64:
      return static_cast<double>(get(std::int64_t{}));
    case DType::f16:
      return f16_to_float(get(std::uint16_t{}));
    case DType::bf16:
      return bf16_to_float(get(std::uint16_t{}));
    case DType::f32:
      return get(float{});
    case DType::f64:
      return get(double{});
  }
  return 0;
}

// Inputs whose reductions are exact in every dtype for modest rank counts.
double value(int rank, std::size_t i, ReduceOp op) {
  if (op == ReduceOp::prod) return rank == 0 && i % 2 == 0 ? 2.0 : 1.0;
  return 1.0 + static_cast<double>((static_cast<std::size_t>(rank) + i) % 3);
}

double reduced(int n, std::size_t i, ReduceOp op, DType t) {
  double acc = value(0, i, op);
  for (int r = 1; r < n; ++r) {
    const double v = value(r, i, op);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        acc += v;
        break;
      case ReduceOp::prod:
        acc *= v;
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
    }
  }
  if (op == ReduceOp::avg) acc = is_floating(t) ? acc / n : std::floor(acc / n);
  return acc;
}

bool close_enough(double got, double want, DType t, ReduceOp op) {
  if (op != ReduceOp::avg) return got == want;
  if (!is_floating(t)) return std::abs(got - want) <= 1.0;
  return std::abs(got - want) <= 1e-2 * std::abs(want);
}

// One benchmark buffer, zero-filled. With `huge`, 2 MiB aligned and advised onto transparent
// huge pages before its first touch (needed where the kernel offers them only on request, as
// Debian's default "madvise" does), as a program's large tensors can be (THP "always", glibc's
// malloc.hugetlb tunable, PyTorch's THP_MEM_ALLOC_ENABLE): a same-host peer copying a lent
// payload pins its pages, and huge pages make that pinning cheap.
class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(std::size_t bytes, bool huge) : size_(bytes) {
    constexpr std::size_t kHuge = std::size_t{2} << 20;
    if (bytes == 0) return;
    const bool aligned = huge && bytes >= kHuge;
    const std::size_t rounded = aligned ? (bytes + kHuge - 1) / kHuge * kHuge : bytes;
    data_ = static_cast<std::byte*>(aligned ? std::aligned_alloc(kHuge, rounded)
                                            : std::malloc(rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    if (aligned) ::madvise(data_, rounded, MADV_HUGEPAGE);  // a hint: failure is harmless
    std::memset(data_, 0, bytes);
  }
  ~HostBuffer() { std::free(data_); }
  HostBuffer(HostBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  HostBuffer& operator=(HostBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

struct Buffers {
  HostBuffer in, out;
  ConstBufferView input;
  BufferView output;
};

class Runner {
 public:
  Runner(Peer& peer, const CollectiveBench& b) : peer_(peer), b_(b), n_(peer.size()) {}

  // Elements per rank for a row of `bytes`.
  std::size_t count_of(std::size_t bytes) const {
    const std::size_t elem = dtype_size(b_.dtype);
    const std::size_t per =
        b_.collective == "allgather" ? bytes / elem / static_cast<std::size_t>(n_) : bytes / elem;
    return std::max<std::size_t>(per, 1);
  }

  Buffers make(std::size_t count) const {
    Buffers b;
    const std::size_t elem = dtype_size(b_.dtype);
    const std::size_t out_count =
        b_.collective == "allgather" ? count * static_cast<std::size_t>(n_) : count;
    b.in = HostBuffer(count * elem, b_.huge_pages);
    b.out = HostBuffer(out_count * elem, b_.huge_pages);
    b.input = ConstBufferView(b.in.data(), count, b_.dtype);
    b.output = BufferView(b.out.data(), out_count, b_.dtype);
    return b;
  }

  Status once(Buffers& b) {
    if (b_.collective == "allreduce") return peer_.allreduce(b.input, b.output, b_.op);
    if (b_.collective == "reduce") return peer_.reduce(b.input, b.output, b_.op, b_.root);
    if (b_.collective == "allgather") return peer_.allgather(b.input, b.output);
    if (b_.collective == "broadcast") {
      if (peer_.rank() == b_.root) std::memcpy(b.out.data(), b.in.data(), b.in.size());
      return peer_.broadcast(b.output, b_.root);
    }
    throw std::invalid_argument("unknown collective " + b_.collective);
  }

  std::uint64_t check(Buffers& b, std::size_t count) {
    const std::size_t elem = dtype_size(b_.dtype);
    const int r = peer_.rank();
    for (std::size_t i = 0; i < count; ++i)
      store(b.in.data() + i * elem, b_.dtype, value(r, i, b_.op));
    if (b.out.size() > 0) std::memset(b.out.data(), 0, b.out.size());
    const Status s = once(b);
    if (!s.ok()) return b.output.count();
    std::uint64_t wrong = 0;
    if (b_.collective == "allreduce" || (b_.collective == "reduce" && r == b_.root)) {
      for (std::size_t i = 0; i < count; ++i)
        wrong += close_enough(load(b.out.data() + i * elem, b_.dtype),
                              reduced(n_, i, b_.op, b_.dtype), b_.dtype, b_.op)
                     ? 0
                     : 1;
    } else if (b_.collective == "broadcast") {
      for (std::size_t i = 0; i < count; ++i)
        wrong += load(b.out.data() + i * elem, b_.dtype) == value(b_.root, i, b_.op) ? 0 : 1;
    } else if (b_.collective == "allgather") {
      for (int q = 0; q < n_; ++q)
        for (std::size_t i = 0; i < count; ++i)
          wrong += load(b.out.data() + (static_cast<std::size_t>(q) * count + i) * elem,
                        b_.dtype) == value(q, i, b_.op)
                       ? 0
                       : 1;
    }
    return wrong;
  }

  // One row: every rank times each iteration; an iteration takes as long as its slowest rank.
  Row row(std::size_t bytes) {
    const std::size_t count = count_of(bytes);
    Buffers b = make(count);
    Row row;
    row.bytes = b_.collective == "allgather" ? b.output.size_bytes() : b.input.size_bytes();
    row.count = b.output.count();
    row.type = bench_dtype_name(b_.dtype);
    row.redop = (b_.collective == "allreduce" || b_.collective == "reduce")
                    ? std::string(reduce_op_name(b_.op))
                    : "none";
    row.root = (b_.collective == "broadcast" || b_.collective == "reduce") ? b_.root : -1;
    ok(peer_.barrier());
    for (int i = 0; i < b_.warmup; ++i)
      ok(once(b));
    std::vector<double> seconds(static_cast<std::size_t>(b_.iters));
    for (auto& s : seconds) {
      const auto t0 = Clock::now();
      ok(once(b));
      s = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    ok(peer_.allreduce(std::span<double>(seconds), ReduceOp::max));
    fill_timing(row, seconds, busbw_factor(b_.collective, n_));
    if (b_.check) {
      std::vector<std::uint64_t> wrong{check(b, count)};
      ok(peer_.allreduce(std::span<std::uint64_t>(wrong), ReduceOp::sum));
      row.wrong = wrong[0];
    }
    return row;
  }

  void ok(const Status& s) {
    if (!s.ok()) throw std::runtime_error(s.to_string());
  }

 private:
  Peer& peer_;
  const CollectiveBench& b_;
  int n_;
};

}  // namespace

std::optional<DType> parse_bench_dtype(std::string_view name) {
  if (name == "float" || name == "float32") return DType::f32;
  if (name == "half" || name == "float16") return DType::f16;
  if (name == "bfloat16") return DType::bf16;
  if (name == "double" || name == "float64") return DType::f64;
  if (name == "int8") return DType::i8;
  if (name == "uint8") return DType::u8;
  if (name == "int32" || name == "int") return DType::i32;
  if (name == "uint32") return DType::u32;
  if (name == "int64") return DType::i64;
  if (name == "uint64") return DType::u64;
  return parse_dtype(name);
}

std::string bench_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float";
    case DType::f16:
      return "half";
    case DType::bf16:
      return "bfloat16";
    case DType::f64:
      return "double";
    case DType::i8:
      return "int8";
    case DType::u8:
      return "uint8";
    case DType::i32:
      return "int32";
    case DType::u32:
      return "uint32";
    case DType::i64:
      return "int64";
    case DType::u64:
      return "uint64";
    default:
      return std::string(dtype_name(t));
  }
}

void fill_bench_input(std::byte* data, std::size_t count, DType t, int rank, ReduceOp op) {
  const std::size_t elem = dtype_size(t);
  for (std::size_t i = 0; i < count; ++i)
    store(data + i * elem, t, value(rank, i, op));
}

std::uint64_t count_wrong_allreduce(const std::byte* data, std::size_t count, DType t, ReduceOp op,
                                    int n) {
  const std::size_t elem = dtype_size(t);
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i)
    wrong += close_enough(load(data + i * elem, t), reduced(n, i, op, t), t, op) ? 0 : 1;
  return wrong;
}

int run_collective_bench(Peer& peer, const CollectiveBench& b, std::ostream& out) {
  if (b.device != "host") return run_device_collective_bench(peer, b, out);
  Runner runner(peer, b);
  std::vector<Row> rows;
  const bool report = peer.rank() == 0;
  if (report && !b.json)
    out << table_header(b.collective, peer.size(), b.strategy_label) << std::flush;
  for (std::size_t bytes = b.min_bytes; bytes <= b.max_bytes;) {
    rows.push_back(runner.row(bytes));
    if (report && !b.json) out << table_row(rows.back()) << std::flush;
    const std::size_t next = b.step > 0
                                 ? bytes + b.step
                                 : static_cast<std::size_t>(static_cast<double>(bytes) * b.factor);
    if (next <= bytes) break;
    bytes = next;
  }
  if (report) {
    if (b.json) {
      out << to_json(b.collective, peer.size(), b.strategy_label, rows) << "\n";
    } else {
      out << table_footer(rows);
    }
  }
  for (const auto& r : rows)
    if (r.wrong != 0) return 1;
  return 0;
}

int run_tcp_bench(Peer& peer, std::size_t bytes, int iters, bool json, std::ostream& out) {
  if (peer.size() < 2) throw std::invalid_argument("kfbench tcp needs 2 workers (kfrun -np 2)");
  const int r = peer.rank();
  std::vector<std::uint32_t> port{0};
  Fd listener;
  if (r == 0) {
    listener.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    ::inet_pton(AF_INET, peer.cluster().worker(0).host.c_str(), &a.sin_addr);
    socklen_t len = sizeof a;
    if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), len) != 0 ||
        ::listen(listener.get(), 1) != 0 ||
        ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("kfbench tcp: cannot listen");
    }
    port[0] = ntohs(a.sin_port);
  }
  const Status s = peer.broadcast(BufferView::of(std::span<std::uint32_t>(port), DType::u32), 0);
  if (!s.ok()) throw std::runtime_error(s.to_string());
  constexpr std::size_t kChunk = 4u << 20;
  std::vector<char> buf(kChunk, 'k');
  std::vector<double> gbps;
  if (r == 1) {
    Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port[0]));
    ::inet_pton(AF_INET, peer.cluster().worker(0).host.c_str(), &a.sin_addr);
    if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      throw std::runtime_error("kfbench tcp: cannot connect");
    }
    for (int it = 0; it < iters; ++it) {
      for (std::size_t sent = 0; sent < bytes;) {
        const ssize_t n =
            ::send(fd.get(), buf.data(), std::min(kChunk, bytes - sent), MSG_NOSIGNAL);
        if (n <= 0) throw std::runtime_error("kfbench tcp: send failed");
        sent += static_cast<std::size_t>(n);
      }
      char ack;
      if (::recv(fd.get(), &ack, 1, MSG_WAITALL) != 1) throw std::runtime_error("no ack");
    }
  } else if (r == 0) {
    Fd fd(::accept(listener.get(), nullptr, nullptr));
    for (int it = 0; it < iters; ++it) {
      std::size_t got = 0;
      Clock::time_point t0;
      while (got < bytes) {
        const ssize_t n = ::recv(fd.get(), buf.data(), kChunk, 0);
        if (n <= 0) throw std::runtime_error("kfbench tcp: recv failed");
        if (got == 0) t0 = Clock::now();  // from the first byte: no connect or wake-up cost
        got += static_cast<std::size_t>(n);
      }
      const double t = std::chrono::duration<double>(Clock::now() - t0).count();
      gbps.push_back(static_cast<double>(bytes) / t / 1e9);
      const char ack = 1;
      if (::send(fd.get(), &ack, 1, MSG_NOSIGNAL) != 1) throw std::runtime_error("ack failed");
    }
    std::sort(gbps.begin(), gbps.end());
    const double median = gbps[gbps.size() / 2];
    const double best = gbps.back();
    if (json) {
      out << nlohmann::json{{"collective", "tcp"},
                            {"bytes", bytes},
                            {"iters", iters},
                            {"median_gbytes_per_s", median},
                            {"best_gbytes_per_s", best}}
                 .dump()
          << "\n";
    } else {
      out << fmt::format("# kfbench tcp: one TCP stream {} -> {}, {} bytes x {}\n",
                         peer.cluster().worker(1).host, peer.cluster().worker(0).host, bytes,
                         iters);
      out << fmt::format(
          "# TCP throughput (median): {:.3f} GB/s ({:.2f} Gbit/s); best {:.3f} GB/s\n", median,
          median * 8, best);
    }
  }
  const Status done = peer.barrier();
  return done.ok() ? 0 : 1;
}

}  // namespace kf::bench
