// kfbench's report in nccl-tests' shape: one row per size (size, count, type, redop, root, time,
// algbw, busbw, #wrong) plus p50/p99 time columns, a closing "# Avg bus bandwidth" line, and the
// same rows as JSON for machines. GB = 1e9; busbw = algbw x the collective's factor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kf::bench {

struct Row {
  std::size_t bytes = 0;
  std::size_t count = 0;
  std::string type;
  std::string redop;
  int root = -1;
  double time_us = 0;  // mean
  double p50_us = 0;
  double p99_us = 0;
  double algbw = 0;  // GB/s
  double busbw = 0;  // GB/s
  std::uint64_t wrong = 0;
};

// nccl-tests' bus-bandwidth factors: allreduce 2(n-1)/n, allgather and reduce-scatter (n-1)/n,
// broadcast and reduce 1.
double busbw_factor(std::string_view collective, int n);

// Mean and percentiles of per-iteration times (seconds) into a row; fills time/algbw/busbw.
void fill_timing(Row& row, std::vector<double> seconds, double factor);

std::string table_header(std::string_view collective, int n, std::string_view strategy);
std::string table_row(const Row& row);
std::string table_footer(const std::vector<Row>& rows);
double average_busbw(const std::vector<Row>& rows);
std::string to_json(std::string_view collective, int n, std::string_view strategy,
                    const std::vector<Row>& rows);

}  // namespace kf::bench
