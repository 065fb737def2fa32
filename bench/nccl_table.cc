#include "bench/nccl_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

namespace kf::bench {

double busbw_factor(std::string_view collective, int n) {
  const double dn = n;
  if (collective == "allreduce") return n > 1 ? 2.0 * (dn - 1) / dn : 0.0;
  if (collective == "allgather" || collective == "reducescatter") return (dn - 1) / dn;
  return 1.0;  // broadcast, reduce
}

void fill_timing(Row& row, std::vector<double> seconds, double factor) {
  if (seconds.empty()) return;
  std::sort(seconds.begin(), seconds.end());
  const double mean =
      std::accumulate(seconds.begin(), seconds.end(), 0.0) / static_cast<double>(seconds.size());
  auto pct = [&](double p) {
    const auto idx = static_cast<std::size_t>(p * static_cast<double>(seconds.size() - 1) + 0.5);
    return seconds[std::min(idx, seconds.size() - 1)];
  };
  row.time_us = mean * 1e6;
  row.p50_us = pct(0.50) * 1e6;
  row.p99_us = pct(0.99) * 1e6;
  row.algbw = mean > 0 ? static_cast<double>(row.bytes) / mean / 1e9 : 0;
  row.busbw = row.algbw * factor;
}

std::string table_header(std::string_view collective, int n, std::string_view strategy) {
  std::string h = fmt::format("# kfbench {}: {} ranks, strategy {}\n#\n", collective, n, strategy);
  h += fmt::format("# {:>10} {:>12} {:>8} {:>6} {:>6} {:>10} {:>8} {:>8} {:>6} {:>10} {:>10}\n",
                   "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                   "p50", "p99");
  h += fmt::format("# {:>10} {:>12} {:>8} {:>6} {:>6} {:>10} {:>8} {:>8} {:>6} {:>10} {:>10}\n",
                   "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)");
  return h;
}

std::string table_row(const Row& r) {
  return fmt::format(
      "  {:>10} {:>12} {:>8} {:>6} {:>6} {:>10.2f} {:>8.3f} {:>8.3f} {:>6} {:>10.2f} "
      "{:>10.2f}\n",
      r.bytes, r.count, r.type, r.redop, r.root, r.time_us, r.algbw, r.busbw, r.wrong, r.p50_us,
      r.p99_us);
}

double average_busbw(const std::vector<Row>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const auto& r : rows)
    sum += r.busbw;
  return sum / static_cast<double>(rows.size());
}

std::string table_footer(const std::vector<Row>& rows) {
  std::uint64_t wrong = 0;
  for (const auto& r : rows)
    wrong += r.wrong;
  return fmt::format("# Out of bounds values : {} {}\n# Avg bus bandwidth    : {:.4f} \n#\n", wrong,
                     wrong == 0 ? "OK" : "FAILED", average_busbw(rows));
}

std::string to_json(std::string_view collective, int n, std::string_view strategy,
                    const std::vector<Row>& rows) {
  nlohmann::json j;
  j["collective"] = collective;
  j["ranks"] = n;
  j["strategy"] = strategy;
  j["avg_busbw_gbps"] = average_busbw(rows);
  auto& out = j["rows"] = nlohmann::json::array();
  for (const auto& r : rows) {
    out.push_back({{"bytes", r.bytes},
                   {"count", r.count},
                   {"type", r.type},
                   {"redop", r.redop},
                   {"root", r.root},
                   {"time_us", r.time_us},
                   {"p50_us", r.p50_us},
                   {"p99_us", r.p99_us},
                   {"algbw_gbps", r.algbw},
                   {"busbw_gbps", r.busbw},
                   {"wrong", r.wrong}});
  }
  return j.dump();
}

}  // namespace kf::bench
