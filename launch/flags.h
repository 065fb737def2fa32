// Command-line conventions shared by kfrun, kfbench and kftrain: Go-style single-dash long flags
// ("-np 4", "-port-range=...") as kungfu-run and nccl-tests take them, mapped onto CLI11's
// double-dash names; and Go-style durations ("30s", "5m", "1h30m", "250ms").
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/units.h"

namespace kf {

struct Args {
  std::vector<std::string> storage;
  std::vector<char*> argv;  // points into storage; argv[0] kept
};

// Rewrites "-name" to "--name" up to the first positional argument (a word that is not a flag
// and not the value of the flag before it) or "--"; later words belong to the worker program.
// `bool_flags` take no separate value. With `stop_at_positional` false, every flag is rewritten
// (for programs whose positionals are their own, like kfbench's subcommand).
Args go_style_args(int argc, char** argv, const std::set<std::string>& bool_flags = {"q", "w", "v"},
                   bool stop_at_positional = true);

// Durations and sizes on the command line: runtime/units.h with UnitStyle::flag ("30s", "1h30m",
// a bare number of seconds; "64M", "4096"), in the milliseconds kfrun's timeouts are kept in.
std::chrono::milliseconds parse_flag_duration(std::string_view text);

}  // namespace kf
