// What the peer benchmarks (bench/peers/mpi_allreduce.cc, gloo_allreduce.cc) share with each
// other and, in their definitions, with kfbench (bench/nccl_table.cc): the flags, the input
// pattern and its check, and one CSV row per size.
//
// Timing, as kfbench's: every rank times each iteration of a barrier-free loop (the way
// osu_allreduce runs its loop); an iteration takes as long as its slowest rank (the per-iteration
// maximum over ranks, taken after the loop); p50 is the nearest-rank median of those times and
// mean their mean; algbw = bytes / mean (GB = 1e9); busbw = algbw x 2(n-1)/n (nccl-tests'
// allreduce factor).
//
// CSV columns (bench/peers.sh's peers.csv):
//   system,ranks,where,bytes,iterations,p50_us,mean_us,algbw_GBps,busbw_GBps,note
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kf::peers {

inline constexpr const char* kCsvHeader =
    "system,ranks,where,bytes,iterations,p50_us,mean_us,algbw_GBps,busbw_GBps,note";

// "8", "4K", "256M", "1G" (binary multiples) -> bytes; throws on anything else.
inline std::size_t parse_size(std::string_view s) {
  if (s.empty()) throw std::invalid_argument("empty size");
  std::size_t mult = 1;
  switch (s.back()) {
    case 'K':
    case 'k':
      mult = std::size_t{1} << 10;
      break;
    case 'M':
    case 'm':
      mult = std::size_t{1} << 20;
      break;
    case 'G':
    case 'g':
      mult = std::size_t{1} << 30;
      break;
    default:
      break;
  }
  if (mult != 1) s.remove_suffix(1);
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos)
    throw std::invalid_argument("bad size '" + std::string(s) + "'");
  return std::stoull(std::string(s)) * mult;
}

inline std::vector<std::size_t> parse_sizes(std::string_view list) {
  std::vector<std::size_t> out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    out.push_back(parse_size(list.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (out.empty()) throw std::invalid_argument("no sizes");
  return out;
}

struct Options {
  std::vector<std::size_t> sizes{8, 4096, 262144, 4u << 20};
  int iters = 20;
  int warmup = 5;
  std::string system;
  std::string where = "host";
  bool header = false;
  // gloo_allreduce only: its rank, the job's size, the rendezvous directory and the address
  // its TCP device binds to.
  int rank = -1;
  int size = 0;
  std::string store;
  std::string host = "127.0.0.1";
};

inline const char* kUsage =
    "  --sizes LIST     bytes per allreduce, comma-separated (8,4K,256M); floats, so multiples\n"
    "                   of 4 (8 B: 2 floats)\n"
    "  --iters N        timed iterations per size (default 20)\n"
    "  --warmup N       untimed iterations before them (default 5)\n"
    "  --system NAME    the CSV's system column\n"
    "  --where W        the CSV's where column (host | netns)\n"
    "  --header         print the CSV header first\n";

// Parses the common flags and, with gloo set, --rank --size --store --host. Throws
// std::invalid_argument on anything it does not know.
inline Options parse_options(int argc, char** argv, bool gloo) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(std::string(a) + " needs a value");
      return argv[++i];
    };
    auto count = [&](int min) {
      const std::string v = value();
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos ||
          std::stoll(v) < min || std::stoll(v) > 1000000000)
        throw std::invalid_argument(std::string(a) + ": bad count '" + v + "'");
      return static_cast<int>(std::stoll(v));
    };
    if (a == "--sizes") {
      o.sizes = parse_sizes(value());
    } else if (a == "--iters") {
      o.iters = count(1);
    } else if (a == "--warmup") {
      o.warmup = count(0);
    } else if (a == "--system") {
      o.system = value();
    } else if (a == "--where") {
      o.where = value();
    } else if (a == "--header") {
      o.header = true;
    } else if (gloo && a == "--rank") {
      o.rank = count(0);
    } else if (gloo && a == "--size") {
      o.size = count(1);
    } else if (gloo && a == "--store") {
      o.store = value();
    } else if (gloo && a == "--host") {
      o.host = value();
    } else {
      throw std::invalid_argument("unknown argument '" + std::string(a) + "'");
    }
  }
  for (const std::size_t b : o.sizes)
    if (b == 0 || b % sizeof(float) != 0)
      throw std::invalid_argument("size " + std::to_string(b) + " is not a multiple of 4 bytes");
  if (gloo && (o.rank < 0 || o.size < 1 || o.rank >= o.size || o.store.empty()))
    throw std::invalid_argument("needs --rank R --size N (R < N) and --store DIR");
  return o;
}

// Rank r's input: small integers, so that every float sum is exact and the check is equality.
inline void fill_input(std::vector<float>& v, int rank) {
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1));
}

// Elements of an allreduce (sum over n ranks) result that are wrong.
inline std::uint64_t count_wrong(const std::vector<float>& v, int n) {
  std::uint64_t wrong = 0;
  const int ranks = n * (n + 1) / 2;
  for (std::size_t i = 0; i < v.size(); ++i)
    wrong += v[i] == static_cast<float>(ranks * static_cast<int>(i % 7 + 1)) ? 0 : 1;
  return wrong;
}

// One CSV row from the per-iteration times (seconds; already the maximum over ranks).
inline std::string csv_row(const Options& o, int n, std::size_t bytes, std::vector<double> s) {
  std::sort(s.begin(), s.end());
  const double mean = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(s.size());
  const auto mid = static_cast<std::size_t>(0.5 * static_cast<double>(s.size() - 1) + 0.5);
  const double p50 = s[std::min(mid, s.size() - 1)];
  const double algbw = mean > 0 ? static_cast<double>(bytes) / mean / 1e9 : 0;
  const double busbw = algbw * 2.0 * (n - 1) / n;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s,%d,%s,%zu,%zu,%.3f,%.3f,%.6f,%.6f,", o.system.c_str(), n,
                o.where.c_str(), bytes, s.size(), p50 * 1e6, mean * 1e6, algbw, busbw);
  return buf;
}

// Rank 0's report of one size: its CSV row on stdout, or the wrong-element count on stderr.
// Returns 1 if any element was wrong, else 0.
inline int report_size(const char* program, const Options& o, int rank, int n, std::size_t bytes,
                       std::vector<double> seconds, std::uint64_t wrong) {
  if (rank != 0) return wrong != 0 ? 1 : 0;
  if (wrong != 0) {
    std::fprintf(stderr, "%s: %zu bytes: %llu wrong elements\n", program, bytes,
                 static_cast<unsigned long long>(wrong));
    return 1;
  }
  std::printf("%s\n", csv_row(o, n, bytes, std::move(seconds)).c_str());
  std::fflush(stdout);
  return 0;
}

}  // namespace kf::peers
