#include "launch/flags.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace kf {

Args go_style_args(int argc, char** argv, const std::set<std::string>& bool_flags,
                   bool stop_at_positional) {
  Args a;
  a.storage.reserve(static_cast<std::size_t>(argc));
  bool flags_done = false;
  bool expect_value = false;
  for (int i = 0; i < argc; ++i) {
    std::string s = argv[i];
    if (i > 0 && !flags_done) {
      if (expect_value) {
        expect_value = false;
      } else if (s == "--") {
        flags_done = true;
      } else if (s.size() >= 2 && s[0] == '-' && !std::isdigit(static_cast<unsigned char>(s[1]))) {
        if (s[1] != '-') s = "-" + s;
        const auto eq = s.find('=');
        const std::string name = s.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
        expect_value = eq == std::string::npos && !bool_flags.contains(name);
      } else if (stop_at_positional) {
        flags_done = true;  // the first positional: the rest is the worker's
      }
    }
    a.storage.push_back(std::move(s));
  }
  for (auto& s : a.storage)
    a.argv.push_back(s.data());
  return a;
}

std::chrono::milliseconds parse_duration(std::string_view text) {
  const std::string t(text);
  double total_ms = 0;
  std::size_t pos = 0;
  bool any = false;
  while (pos < t.size()) {
    char* end = nullptr;
    const double v = std::strtod(t.c_str() + pos, &end);
    const std::size_t used = static_cast<std::size_t>(end - (t.c_str() + pos));
    if (used == 0) throw std::invalid_argument(fmt::format("duration '{}': bad number", text));
    pos += used;
    std::string unit;
    while (pos < t.size() && std::isalpha(static_cast<unsigned char>(t[pos])))
      unit += t[pos++];
    if (unit.empty() || unit == "s") {
      total_ms += v * 1000;
    } else if (unit == "ms") {
      total_ms += v;
    } else if (unit == "m") {
      total_ms += v * 60'000;
    } else if (unit == "h") {
      total_ms += v * 3'600'000;
    } else {
      throw std::invalid_argument(fmt::format("duration '{}': unknown unit '{}'", text, unit));
    }
    any = true;
  }
  if (!any || total_ms < 0) throw std::invalid_argument(fmt::format("duration '{}'", text));
  return std::chrono::milliseconds(static_cast<long long>(total_ms));
}

std::size_t parse_size(std::string_view text) {
  const std::string t(text);
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  const std::string unit(end);
  double mult = 1;
  if (unit.empty() || unit == "B") {
    mult = 1;
  } else if (unit == "K" || unit == "KB" || unit == "k") {
    mult = 1024;
  } else if (unit == "M" || unit == "MB") {
    mult = 1024.0 * 1024;
  } else if (unit == "G" || unit == "GB") {
    mult = 1024.0 * 1024 * 1024;
  } else {
    throw std::invalid_argument(fmt::format("size '{}': unknown unit '{}'", text, unit));
  }
  if (end == t.c_str() || v < 0) throw std::invalid_argument(fmt::format("size '{}'", text));
  return static_cast<std::size_t>(v * mult);
}

}  // namespace kf
