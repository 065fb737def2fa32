// kfsim --jobs N: independent runs of one experiment (arms x seeds) in up to N worker processes
// at once. Each task runs in a child forked from kfsim after every scenario was loaded and
// validated, so a child only simulates and writes its own records; the parent collects the exit
// codes in task order and the caller reads the records back in that order, which is what makes
// the experiment's outputs the same for every N. Progress travels from each child over a pipe so
// the parent can draw one bar for the whole experiment.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "sim/simulation.h"

namespace kf {

using ProgressFn = std::function<void(const SimulationProgress&)>;

// One run, executed in the child: reports progress through the given function and returns the
// child's exit code (0 ran as planned, 1 ended with unexplained errors). An exception it throws
// is printed to stderr and exits the child with kTaskCrashed.
using ParallelTask = std::function<int(const ProgressFn&)>;

// A child that threw, was killed by a signal or could not be started.
inline constexpr int kTaskCrashed = 3;

// Runs every task, at most `jobs` (>= 1) at a time, each in its own process. `on_progress(i, p)`
// is called in the parent whenever task i reports. Returns each task's exit code, in task order.
// The parent must be single-threaded when it calls this (it forks). Throws std::system_error
// when no pipe or process can be made at all.
std::vector<int> run_parallel(
    const std::vector<ParallelTask>& tasks, int jobs,
    const std::function<void(std::size_t, const SimulationProgress&)>& on_progress);

}  // namespace kf
