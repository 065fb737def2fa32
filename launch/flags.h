// Command-line conventions shared by kfrun and kfbench: Go-style single-dash long flags
// ("-np 4", "-port-range=...") as kungfu-run and nccl-tests take them, mapped onto CLI11's
// double-dash names; and Go-style durations ("30s", "5m", "1h30m", "250ms").
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <string_view>
#include <vector>

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

// "30s", "5m", "1h30m", "250ms", "2.5s", or a bare number of seconds. Throws on anything else.
std::chrono::milliseconds parse_duration(std::string_view text);

// "1K", "64M", "1G", "4096": powers of 1024. Throws on anything else.
std::size_t parse_size(std::string_view text);

}  // namespace kf
