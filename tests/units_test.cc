// runtime/units.h: one grammar for bandwidths, durations and sizes, read strictly (scenario files)
// or as command-line flags (nccl-tests' and kungfu-run's conventions).
#include "runtime/units.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

namespace kf {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::nanoseconds;
using std::chrono::seconds;
constexpr UnitStyle strict = UnitStyle::strict;
constexpr UnitStyle flag = UnitStyle::flag;

TEST(Units, BandwidthNeedsItsUnit) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("1Gbps"), 1e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("100Mbps"), 100e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth("10Gbit/s"), 10e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1.25GB/s"), 10e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("5 Kbps"), 5e3);
  EXPECT_DOUBLE_EQ(parse_bandwidth("2Tbps"), 2e12);
  EXPECT_DOUBLE_EQ(parse_bandwidth("800bps"), 800);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1MB/s"), 8e6);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1e3Mbps"), 1e9);
  for (const char* bad : {"1G", "10", "fast", "", "1Gbsp", "Gbps", "1 G bps"}) {
    EXPECT_THROW(parse_bandwidth(bad), std::invalid_argument) << bad;
  }
  try {
    parse_bandwidth("1G");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(),
                 "'1G' has no unit; write e.g. 1Gbps, 100Mbps, 10Gbit/s (units: bps, Kbps, Mbps, "
                 "Gbps, Tbps, bit/s, Kbit/s, Mbit/s, Gbit/s, Tbit/s, and bytes: B/s, KB/s, MB/s, "
                 "GB/s, TB/s)");
  }
  try {
    parse_bandwidth("-1Gbps");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "must be positive, got -1Gbps");
  }
  EXPECT_THROW(parse_bandwidth("0Gbps"), std::invalid_argument);
  EXPECT_THROW(parse_bandwidth("0"), std::invalid_argument);
}

TEST(Units, StrictDurations) {
  EXPECT_EQ(parse_duration("5us", strict), microseconds(5));
  EXPECT_EQ(parse_duration("1.5ms", strict), microseconds(1500));
  EXPECT_EQ(parse_duration("2s", strict), seconds(2));
  EXPECT_EQ(parse_duration("100ns", strict), nanoseconds(100));
  EXPECT_EQ(parse_duration("1min", strict), seconds(60));
  EXPECT_EQ(parse_duration("12.5s", strict), milliseconds(12500));
  EXPECT_EQ(parse_duration("0", strict), nanoseconds(0));
  EXPECT_EQ(parse_duration("0s", strict), nanoseconds(0));
  EXPECT_EQ(parse_duration("5m", strict), minutes(5));
  EXPECT_EQ(parse_duration("1h30m", strict), minutes(90));
  EXPECT_EQ(parse_duration("1min30s", strict), seconds(90));
  for (const char* bad : {"5", "1.5", "ms", "5 sec", "1e30s", "x", "1h-5m", "5s3"}) {
    EXPECT_THROW(parse_duration(bad, strict), std::invalid_argument) << bad;
  }
  try {
    parse_duration("5", strict);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'5' has no unit"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ns, us, ms, s, min"), std::string::npos) << e.what();
  }
  try {
    parse_duration("-1ms", strict);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "must not be negative, got -1ms");
  }
}

TEST(Units, StrictSizes) {
  EXPECT_EQ(parse_size("64KiB", strict), 64u * 1024);
  EXPECT_EQ(parse_size("1MiB", strict), 1u << 20);
  EXPECT_EQ(parse_size("100MB", strict), 100'000'000u);
  EXPECT_EQ(parse_size("1GiB", strict), 1u << 30);
  EXPECT_EQ(parse_size("2GB", strict), 2'000'000'000u);
  EXPECT_EQ(parse_size("1.5KiB", strict), 1536u);
  EXPECT_EQ(parse_size("1.1MB", strict), 1'100'000u);
  EXPECT_EQ(parse_size("7B", strict), 7u);
  EXPECT_EQ(parse_size("1KB", strict), 1000u);
  EXPECT_EQ(parse_size("0", strict), 0u);
  for (const char* bad : {"64", "1M", "1Mb", "0.5B", "-1KiB", "big", "1e30GiB"}) {
    EXPECT_THROW(parse_size(bad, strict), std::invalid_argument) << bad;
  }
  try {
    parse_size("64", strict);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'64' has no unit; write e.g. 64KiB"), std::string::npos)
        << e.what();
  }
}

TEST(Units, FlagDurations) {
  EXPECT_EQ(parse_duration("1m30s", flag), seconds(90));
  EXPECT_EQ(parse_duration("250ms", flag), milliseconds(250));
  EXPECT_EQ(parse_duration("2", flag), seconds(2));
  EXPECT_EQ(parse_duration("2.5", flag), milliseconds(2500));
  EXPECT_EQ(parse_duration("1h", flag), minutes(60));
  EXPECT_THROW(parse_duration("5 parsecs", flag), std::invalid_argument);
  EXPECT_THROW(parse_duration("-3s", flag), std::invalid_argument);
  try {
    parse_duration("10 parsecs", flag);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(
        std::string(e.what()).rfind("'10 parsecs' has an unknown unit 'parsecs'; write e.g. 30 "
                                    "(seconds)",
                                    0),
        0u)
        << e.what();
  }
}

TEST(Units, FlagSizes) {
  EXPECT_EQ(parse_size("64M", flag), std::size_t{64} << 20);
  EXPECT_EQ(parse_size("1K", flag), 1024u);
  EXPECT_EQ(parse_size("4096", flag), 4096u);
  EXPECT_EQ(parse_size("1G", flag), std::size_t{1} << 30);
  EXPECT_EQ(parse_size("1MiB", flag), std::size_t{1} << 20);
  // Decimal KB and MB mean what they mean in scenario files.
  EXPECT_EQ(parse_size("1KB", flag), 1000u);
  EXPECT_EQ(parse_size("100MB", flag), 100'000'000u);
  EXPECT_THROW(parse_size("3X", flag), std::invalid_argument);
  EXPECT_THROW(parse_size("0.5", flag), std::invalid_argument);
}

TEST(Units, TheSameTextMeansTheSameInBothStylesWhereBothTakeIt) {
  for (const char* text : {"64KiB", "1MiB", "100MB", "7B", "0", "1GB"})
    EXPECT_EQ(parse_size(text, strict), parse_size(text, flag)) << text;
  for (const char* text : {"5us", "1.5ms", "2s", "1min", "1h30m", "0"})
    EXPECT_EQ(parse_duration(text, strict), parse_duration(text, flag)) << text;
}

}  // namespace
}  // namespace kf
