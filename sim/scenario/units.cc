// Units for scenario files: bandwidths, durations and sizes, always written with their unit.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "sim/scenario/scenario.h"

namespace kf {
namespace {

struct Unit {
  std::string_view name;
  double factor;
};

constexpr Unit kBandwidthUnits[] = {
    {"bps", 1},      {"Kbps", 1e3},    {"kbps", 1e3},   {"Mbps", 1e6},   {"Gbps", 1e9},
    {"Tbps", 1e12},  {"bit/s", 1},     {"Kbit/s", 1e3}, {"kbit/s", 1e3}, {"Mbit/s", 1e6},
    {"Gbit/s", 1e9}, {"Tbit/s", 1e12}, {"b/s", 1},      {"Kb/s", 1e3},   {"kb/s", 1e3},
    {"Mb/s", 1e6},   {"Gb/s", 1e9},    {"Tb/s", 1e12},  {"B/s", 8},      {"KB/s", 8e3},
    {"kB/s", 8e3},   {"MB/s", 8e6},    {"GB/s", 8e9},   {"TB/s", 8e12},
};
constexpr std::string_view kBandwidthHelp =
    "write e.g. 1Gbps, 100Mbps, 10Gbit/s (units: bps, Kbps, Mbps, Gbps, Tbps, bit/s, Kbit/s, "
    "Mbit/s, Gbit/s, Tbit/s, and bytes: B/s, KB/s, MB/s, GB/s, TB/s)";

constexpr Unit kDurationUnits[] = {
    {"ns", 1}, {"us", 1e3}, {"\xC2\xB5s", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"min", 60e9},
};
constexpr std::string_view kDurationHelp = "write e.g. 5us, 1.5ms, 2s (units: ns, us, ms, s, min)";

constexpr Unit kSizeUnits[] = {
    {"B", 1},
    {"KB", 1e3},
    {"kB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"KiB", 1024.0},
    {"MiB", 1048576.0},
    {"GiB", 1073741824.0},
    {"TiB", 1099511627776.0},
};
constexpr std::string_view kSizeHelp =
    "write e.g. 64KiB, 1MiB, 100MB (units: B, KB, MB, GB, TB decimal; KiB, MiB, GiB, TiB binary)";

// A bare multiplier prefix ("1G", "64Ki") is a number missing its unit, not an unknown unit.
constexpr std::string_view kBarePrefixes[] = {"k", "K", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"};

bool is_space(char c) {
  return c == ' ' || c == '\t';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front()))
    s.remove_prefix(1);
  while (!s.empty() && is_space(s.back()))
    s.remove_suffix(1);
  return s;
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

struct Quantity {
  double value;
  std::string_view unit;
};

// "[+-]digits[.digits][e[+-]digits] [unit]"; nullopt when it does not start with a number.
std::optional<Quantity> split_quantity(std::string_view text) {
  text = trim(text);
  std::size_t i = 0;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
  std::size_t digits = 0;
  while (i < text.size() && is_digit(text[i]))
    ++i, ++digits;
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && is_digit(text[i]))
      ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    std::size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
    if (j < text.size() && is_digit(text[j])) {
      while (j < text.size() && is_digit(text[j]))
        ++j;
      i = j;
    }
  }
  std::string_view number = text.substr(0, i);
  if (!number.empty() && number.front() == '+') number.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) {
    return std::nullopt;
  }
  return Quantity{value, trim(text.substr(i))};
}

std::string quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

// Value x unit factor; throws with `what` ("a bandwidth") and `help` for anything else.
double parse_with_units(std::string_view text, std::span<const Unit> units, std::string_view what,
                        std::string_view help, bool bare_zero_ok) {
  const auto q = split_quantity(text);
  if (!q) {
    throw std::invalid_argument(quoted(text) + " is not " + std::string(what) + "; " +
                                std::string(help));
  }
  if (q->unit.empty() && q->value == 0 && bare_zero_ok) return 0;
  for (const auto& u : units) {
    if (u.name == q->unit) return q->value * u.factor;
  }
  bool bare = q->unit.empty();
  for (const auto p : kBarePrefixes)
    bare = bare || p == q->unit;
  if (bare) throw std::invalid_argument(quoted(text) + " has no unit; " + std::string(help));
  throw std::invalid_argument(quoted(text) + " has an unknown unit " + quoted(q->unit) + "; " +
                              std::string(help));
}

std::string trimmed(std::string_view text) {
  return std::string(trim(text));
}

}  // namespace

double parse_bandwidth(const std::string& text) {
  const double bps = parse_with_units(text, kBandwidthUnits, "a bandwidth", kBandwidthHelp, false);
  if (!(bps > 0)) throw std::invalid_argument("must be positive, got " + trimmed(text));
  if (!std::isfinite(bps)) throw std::invalid_argument("too large, got " + trimmed(text));
  return bps;
}

std::chrono::nanoseconds parse_duration(const std::string& text) {
  const double ns = parse_with_units(text, kDurationUnits, "a duration", kDurationHelp, true);
  if (ns < 0) throw std::invalid_argument("must not be negative, got " + trimmed(text));
  if (!(ns < 9.2e18)) throw std::invalid_argument("too large, got " + trimmed(text));
  return std::chrono::nanoseconds(std::llround(ns));
}

std::size_t parse_size(const std::string& text) {
  const double bytes = parse_with_units(text, kSizeUnits, "a size", kSizeHelp, true);
  if (bytes < 0) throw std::invalid_argument("must not be negative, got " + trimmed(text));
  if (!(bytes < 1.8e19)) throw std::invalid_argument("too large, got " + trimmed(text));
  const double whole = std::round(bytes);
  if (std::fabs(bytes - whole) > 1e-6 * std::max(1.0, whole)) {
    throw std::invalid_argument(quoted(trimmed(text)) + " is not a whole number of bytes");
  }
  return static_cast<std::size_t>(whole);
}

}  // namespace kf
