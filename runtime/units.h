// Quantities written as text: bandwidths, durations and sizes, for every front end (scenario
// files, kfrun, kfbench, kftrain, --set). One grammar and one table of units; the caller says how
// a number without a unit reads (UnitStyle), because the two conventions users know differ:
//
//   strict (scenario files): every value carries its unit; a bare number is an error (0 aside)
//     and so is a lone prefix ("1K", "1G"): "1G" could be bits, bytes, 1000^3 or 1024^3.
//   flag (command-line flags, as nccl-tests and kungfu-run take them): a bare number is bytes or
//     seconds, and the one-letter prefixes K, M, G, T are binary (KiB, MiB, GiB, TiB).
//
// In both, sizes in KB, MB, GB, TB are decimal and in KiB, MiB, GiB, TiB binary; durations take
// ns, us (or µs), ms, s, m or min, h, also in sequence as Go writes them ("1h30m", "1m30s").
// Bandwidths always need their unit: bps, Kbps ... Tbps, bit/s ..., and bytes per second B/s ...
//
// Errors are std::invalid_argument naming the text and the accepted units, e.g.
//   "'64' has no unit; write e.g. 64KiB, 1MiB, 100MB (units: ...)".
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

namespace kf {

enum class UnitStyle {
  strict,  // units required (scenario files)
  flag,    // bare numbers are bytes / seconds; K, M, G, T are binary (command-line flags)
};

// Bits per second, > 0: "1Gbps", "100Mbps", "10Gbit/s", "1.25GB/s".
double parse_bandwidth(std::string_view text);
// >= 0: "5us", "1.5ms", "2s", "1min", "1h30m"; with UnitStyle::flag also "30" (seconds).
std::chrono::nanoseconds parse_duration(std::string_view text, UnitStyle style);
// Whole bytes: "64KiB", "1MiB", "100MB", "7B"; with UnitStyle::flag also "4096", "64K", "1G".
std::size_t parse_size(std::string_view text, UnitStyle style);

}  // namespace kf
