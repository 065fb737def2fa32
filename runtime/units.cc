#include "runtime/units.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

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
    {"ns", 1},  {"us", 1e3}, {"\xC2\xB5s", 1e3}, {"ms", 1e6},
    {"s", 1e9}, {"m", 60e9}, {"min", 60e9},      {"h", 3600e9},
};
constexpr std::string_view kDurationHelp =
    "write e.g. 5us, 1.5ms, 2s, 1h30m (units: ns, us, ms, s, min (or m), h)";
constexpr std::string_view kFlagDurationHelp =
    "write e.g. 30 (seconds), 250ms, 2.5s, 1h30m (units: ns, us, ms, s, min (or m), h)";

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
// nccl-tests' and kungfu-run's one-letter sizes: binary.
constexpr Unit kFlagSizeUnits[] = {
    {"K", 1024.0}, {"k", 1024.0}, {"M", 1048576.0}, {"G", 1073741824.0}, {"T", 1099511627776.0},
};
constexpr std::string_view kSizeHelp =
    "write e.g. 64KiB, 1MiB, 100MB (units: B, KB, MB, GB, TB decimal; KiB, MiB, GiB, TiB binary)";
constexpr std::string_view kFlagSizeHelp =
    "write e.g. 4096 (bytes), 64K, 1M, 1MiB, 100MB (K, M, G, T and KiB, MiB, GiB, TiB binary; "
    "KB, MB, GB, TB decimal)";

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

std::string quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

std::string trimmed(std::string_view text) {
  return std::string(trim(text));
}

// "[+-]digits[.digits][e[+-]digits]" at the start of `text`: its value and its length; nullopt
// when `text` does not start with a finite number.
std::optional<std::pair<double, std::size_t>> leading_number(std::string_view text) {
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
  return std::pair{value, i};
}

struct Quantity {
  double value;
  std::string_view unit;  // trimmed; empty for a bare number
};

// One number and the unit after it, or one of several ("1h30m") when `sequence`: the unit then
// ends where the next number starts.
std::optional<std::vector<Quantity>> split_quantities(std::string_view text, bool sequence) {
  text = trim(text);
  std::vector<Quantity> parts;
  while (true) {
    const auto number = leading_number(text);
    if (!number) return std::nullopt;
    text.remove_prefix(number->second);
    std::size_t unit_end = text.size();
    if (sequence) {
      unit_end = 0;
      while (unit_end < text.size() && !is_digit(text[unit_end]) && text[unit_end] != '.' &&
             text[unit_end] != '+' && text[unit_end] != '-')
        ++unit_end;
    }
    parts.push_back({number->first, trim(text.substr(0, unit_end))});
    text.remove_prefix(unit_end);
    if (text.empty()) return parts;
    // A later part needs a unit before it and no sign.
    if (parts.back().unit.empty() || text.front() == '+' || text.front() == '-')
      return std::nullopt;
  }
}

double factor_of(std::string_view unit, std::span<const Unit> units,
                 std::span<const Unit> more = {}) {
  for (const auto& u : units)
    if (u.name == unit) return u.factor;
  for (const auto& u : more)
    if (u.name == unit) return u.factor;
  return 0;
}

[[noreturn]] void no_unit(std::string_view text, std::string_view help) {
  throw std::invalid_argument(quoted(trim(text)) + " has no unit; " + std::string(help));
}

// The sum of value x unit factor over the parts of `text`; a bare number reads as `bare_factor`
// (0: only a bare 0 may go without a unit).
double parse_with_units(std::string_view text, std::span<const Unit> units,
                        std::span<const Unit> more_units, std::string_view what,
                        std::string_view help, double bare_factor, bool sequence) {
  const auto parts = split_quantities(text, sequence);
  if (!parts) {
    throw std::invalid_argument(quoted(text) + " is not " + std::string(what) + "; " +
                                std::string(help));
  }
  if (parts->size() == 1 && parts->front().unit.empty()) {
    const double v = parts->front().value;
    if (bare_factor > 0) return v * bare_factor;
    if (v == 0) return 0;
    no_unit(text, help);
  }
  double total = 0;
  for (const Quantity& q : *parts) {
    const double f = factor_of(q.unit, units, more_units);
    if (f > 0) {
      total += q.value * f;
      continue;
    }
    bool bare = q.unit.empty();
    for (const auto p : kBarePrefixes)
      bare = bare || p == q.unit;
    if (bare) no_unit(text, help);
    throw std::invalid_argument(quoted(text) + " has an unknown unit " + quoted(q.unit) + "; " +
                                std::string(help));
  }
  return total;
}

}  // namespace

double parse_bandwidth(std::string_view text) {
  const double bps =
      parse_with_units(text, kBandwidthUnits, {}, "a bandwidth", kBandwidthHelp, 0, false);
  if (!(bps > 0)) throw std::invalid_argument("must be positive, got " + trimmed(text));
  if (!std::isfinite(bps)) throw std::invalid_argument("too large, got " + trimmed(text));
  return bps;
}

std::chrono::nanoseconds parse_duration(std::string_view text, UnitStyle style) {
  const bool flag = style == UnitStyle::flag;
  const double ns =
      parse_with_units(text, kDurationUnits, {}, "a duration",
                       flag ? kFlagDurationHelp : kDurationHelp, flag ? 1e9 : 0, true);
  if (ns < 0) throw std::invalid_argument("must not be negative, got " + trimmed(text));
  if (!(ns < 9.2e18)) throw std::invalid_argument("too large, got " + trimmed(text));
  return std::chrono::nanoseconds(std::llround(ns));
}

std::size_t parse_size(std::string_view text, UnitStyle style) {
  const bool flag = style == UnitStyle::flag;
  const double bytes = parse_with_units(
      text, kSizeUnits, flag ? std::span<const Unit>(kFlagSizeUnits) : std::span<const Unit>(),
      "a size", flag ? kFlagSizeHelp : kSizeHelp, flag ? 1 : 0, false);
  if (bytes < 0) throw std::invalid_argument("must not be negative, got " + trimmed(text));
  if (!(bytes < 1.8e19)) throw std::invalid_argument("too large, got " + trimmed(text));
  const double whole = std::round(bytes);
  if (std::fabs(bytes - whole) > 1e-6 * std::max(1.0, whole)) {
    throw std::invalid_argument(quoted(trimmed(text)) + " is not a whole number of bytes");
  }
  return static_cast<std::size_t>(whole);
}

}  // namespace kf
