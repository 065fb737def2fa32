// runtime/units.h: one grammar for bandwidths, durations and sizes, read strictly (scenario files)
// or as command-line flags (nccl-tests' and kungfu-run's conventions).
#include "runtime/units.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kf {
namespace {

using namespace std::chrono_literals;
constexpr UnitStyle strict = UnitStyle::strict;
constexpr UnitStyle flag = UnitStyle::flag;

// The message `parse` throws (std::invalid_argument), or a failure naming what it returned.
std::string error_of(const std::function<void()>& parse) {
  try {
    parse();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "parsed without an error";
  return {};
}

TEST(Units, BandwidthNeedsItsUnit) {
  const std::vector<std::pair<const char*, double>> good = {
      {"1Gbps", 1e9},  {"100Mbps", 100e6}, {"10Gbit/s", 10e9}, {"1.25GB/s", 10e9}, {"5 Kbps", 5e3},
      {"2Tbps", 2e12}, {"800bps", 800},    {"1MB/s", 8e6},     {"1e3Mbps", 1e9}};
  for (const auto& [text, bps] : good)
    EXPECT_DOUBLE_EQ(parse_bandwidth(text), bps) << text;
  for (const char* bad : {"1G", "10", "fast", "", "1Gbsp", "Gbps", "1 G bps", "0Gbps", "0"})
    EXPECT_THROW(parse_bandwidth(bad), std::invalid_argument) << bad;
  EXPECT_EQ(error_of([] { parse_bandwidth("1G"); }),
            "'1G' has no unit; write e.g. 1Gbps, 100Mbps, 10Gbit/s (units: bps, Kbps, Mbps, "
            "Gbps, Tbps, bit/s, Kbit/s, Mbit/s, Gbit/s, Tbit/s, and bytes: B/s, KB/s, MB/s, "
            "GB/s, TB/s)");
  EXPECT_EQ(error_of([] { parse_bandwidth("-1Gbps"); }), "must be positive, got -1Gbps");
}

TEST(Units, StrictDurations) {
  const std::vector<std::pair<const char*, std::chrono::nanoseconds>> good = {
      {"5us", 5us},  {"1.5ms", 1500us},  {"2s", 2s},      {"100ns", 100ns},
      {"1min", 60s}, {"12.5s", 12500ms}, {"0", 0ns},      {"0s", 0ns},
      {"5m", 5min},  {"1h30m", 90min},   {"1min30s", 90s}};
  for (const auto& [text, ns] : good)
    EXPECT_EQ(parse_duration(text, strict), ns) << text;
  for (const char* bad : {"5", "1.5", "ms", "5 sec", "1e30s", "x", "1h-5m", "5s3"})
    EXPECT_THROW(parse_duration(bad, strict), std::invalid_argument) << bad;
  const std::string no_unit = error_of([] { parse_duration("5", strict); });
  EXPECT_NE(no_unit.find("'5' has no unit"), std::string::npos) << no_unit;
  EXPECT_NE(no_unit.find("ns, us, ms, s, min"), std::string::npos) << no_unit;
  EXPECT_EQ(error_of([] { parse_duration("-1ms", strict); }), "must not be negative, got -1ms");
}

TEST(Units, StrictSizes) {
  const std::vector<std::pair<const char*, std::size_t>> good = {
      {"64KiB", 64u * 1024},   {"1MiB", 1u << 20}, {"100MB", 100'000'000u}, {"1GiB", 1u << 30},
      {"2GB", 2'000'000'000u}, {"1.5KiB", 1536u},  {"1.1MB", 1'100'000u},   {"7B", 7u},
      {"1KB", 1000u},          {"0", 0u}};
  for (const auto& [text, bytes] : good)
    EXPECT_EQ(parse_size(text, strict), bytes) << text;
  for (const char* bad : {"64", "1M", "1Mb", "0.5B", "-1KiB", "big", "1e30GiB"})
    EXPECT_THROW(parse_size(bad, strict), std::invalid_argument) << bad;
  const std::string no_unit = error_of([] { parse_size("64", strict); });
  EXPECT_NE(no_unit.find("'64' has no unit; write e.g. 64KiB"), std::string::npos) << no_unit;
}

TEST(Units, FlagDurations) {
  const std::vector<std::pair<const char*, std::chrono::nanoseconds>> good = {
      {"1m30s", 90s}, {"250ms", 250ms}, {"2", 2s}, {"2.5", 2500ms}, {"1h", 60min}};
  for (const auto& [text, ns] : good)
    EXPECT_EQ(parse_duration(text, flag), ns) << text;
  for (const char* bad : {"5 parsecs", "-3s", "fast"})
    EXPECT_THROW(parse_duration(bad, flag), std::invalid_argument) << bad;
  EXPECT_EQ(error_of([] {
              parse_duration("10 parsecs", flag);
            }).rfind("'10 parsecs' has an unknown unit 'parsecs'; write e.g. 30 (seconds)", 0),
            0u);
}

TEST(Units, FlagSizes) {
  // nccl-tests' one-letter prefixes are binary; KB and MB stay decimal, as in scenario files.
  const std::vector<std::pair<const char*, std::size_t>> good = {
      {"64M", std::size_t{64} << 20}, {"1K", 1024u},      {"4096", 4096u},
      {"1G", std::size_t{1} << 30},   {"1MiB", 1u << 20}, {"1KB", 1000u},
      {"100MB", 100'000'000u}};
  for (const auto& [text, bytes] : good)
    EXPECT_EQ(parse_size(text, flag), bytes) << text;
  for (const char* bad : {"3X", "0.5", "-1K"})
    EXPECT_THROW(parse_size(bad, flag), std::invalid_argument) << bad;
}

TEST(Units, TheSameTextMeansTheSameInBothStylesWhereBothTakeIt) {
  for (const char* text : {"64KiB", "1MiB", "100MB", "7B", "0", "1GB"})
    EXPECT_EQ(parse_size(text, strict), parse_size(text, flag)) << text;
  for (const char* text : {"5us", "1.5ms", "2s", "1min", "1h30m", "0"})
    EXPECT_EQ(parse_duration(text, strict), parse_duration(text, flag)) << text;
}

}  // namespace
}  // namespace kf
