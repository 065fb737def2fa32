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

std::chrono::milliseconds parse_flag_duration(std::string_view text) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
      parse_duration(text, UnitStyle::flag));
}

}  // namespace kf
