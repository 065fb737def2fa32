#include "sim/experiment.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include "sim/compare.h"
#include "sim/experiment_plan.h"
#include "sim/parallel_runs.h"
#include "sim/report.h"
#include "sim/seed_summary.h"
#include "sim/simulation.h"
#include "sim/slurm.h"
#include "sim/variants.h"

namespace kf {

std::vector<Arm> expand_arms(const Scenario& scenario, const std::string& file,
                             const std::vector<std::string>& overrides) {
  std::vector<Arm> arms;
  if (!scenario.variants.empty()) {
    for (const auto& v : scenario.variants)
      arms.push_back({v.name, v.name, v.overrides, *v.scenario});
    return arms;
  }
  if (!scenario.sweep) {
    arms.push_back({"", "", {}, scenario});
    return arms;
  }
  for (const auto& value : scenario.sweep->values) {
    auto o = overrides;
    o.push_back(scenario.sweep->key + "=" + value);
    Scenario s = load_scenario(file, o);
    s.sweep.reset();
    std::string dir = scenario.sweep->key + "=" + value;
    std::replace(dir.begin(), dir.end(), '/', '_');
    arms.push_back({std::move(dir), value, {}, std::move(s)});
  }
  return arms;
}

int run_scenario(const Scenario& scenario, const std::string& out, bool quiet,
                 nlohmann::json* summary_out) {
  ProgressBar bar(!quiet && isatty(STDERR_FILENO));
  const int code = run_reporting(
      scenario, out, quiet, summary_out, [&bar](const SimulationProgress& p) { bar.update(p); },
      [&bar] { bar.done(); });
  return code;
}

int run_reporting(const Scenario& scenario, const std::string& out, bool quiet,
                  nlohmann::json* summary_out,
                  const std::function<void(const SimulationProgress&)>& progress,
                  const std::function<void()>& simulated) {
  Simulation sim(scenario);
  sim.run(progress);
  if (simulated) simulated();
  sim.write(out);
  const auto summary = sim.summary();
  if (summary_out != nullptr) *summary_out = summary;
  if (!quiet) print_summary(summary, sim.perf(), out);
  // Errors are the expected outcome of an injected failure; otherwise the run failed.
  const bool failure_injected =
      std::any_of(scenario.events.begin(), scenario.events.end(),
                  [](const ScenarioEvent& e) { return std::holds_alternative<FailEvent>(e.what); });
  if (!summary["errors"].empty() && !failure_injected) {
    fmt::print(stderr, "kfsim: the run ended with errors (see {}/summary.json)\n", out);
    return 1;
  }
  return 0;
}

namespace {

// --compare: every arm in every world, per-step times side by side; OUT/compare.csv lists the arms
// when there are several.
int run_compare(const Scenario& scenario, const ExperimentOptions& o) {
  const std::vector<Arm> arms = expand_arms(scenario, o.file, o.overrides);
  std::ofstream table;
  if (scenario.sweep || !scenario.variants.empty()) {
    std::filesystem::create_directories(o.out);
    table.open(o.out + "/compare.csv", std::ios::trunc);
    if (!table) throw std::runtime_error("cannot write " + o.out + "/compare.csv");
    table << "variant,world,mean_step_s,mean_abs_pct,max_abs_pct,mean_step_pct\n";
  }
  int worst = 0;
  for (const Arm& arm : arms) {
    const std::string where = arm.dir.empty() ? o.out : o.out + "/" + arm.dir;
    const Comparison c = compare_worlds(arm.scenario, o.compare, where);
    if (!o.quiet) print_comparison(c, arm.scenario, arm.dir, where, o.compare);
    for (std::size_t i = 0; i < c.runs.size(); ++i) {
      const auto& r = c.runs[i];
      if (!r.summary["errors"].empty()) worst = 1;
      if (!table.is_open()) continue;
      const auto pct = [&](const std::vector<double>& v) {
        return i > 0 ? fmt::format("{:.3f}", v[i - 1]) : std::string();
      };
      table << fmt::format("{},{},{:.9f},{},{},{}\n", arm.dir, option_name(r.world),
                           mean_step_seconds(r), pct(c.mean_abs_pct), pct(c.max_abs_pct),
                           pct(c.mean_step_pct));
    }
  }
  return worst;
}

// What the terminal shows before a run in sequence: the arm, its overrides, its seed.
void print_header(const Scenario& scenario, const Arm& arm, const PlannedRun& run, int seeds) {
  const std::string seed = seeds > 1 ? fmt::format(" (seed {})", run.seed) : "";
  if (!scenario.variants.empty()) {
    std::string set;
    for (const auto& s : arm.overrides)
      set += (set.empty() ? "" : ", ") + s;
    fmt::print("\n== {}{}{}\n", arm.label, set.empty() ? "" : " (" + set + ")", seed);
  } else if (scenario.sweep) {
    fmt::print("\n== {} = {}{}\n", scenario.sweep->key, arm.label, seed);
  } else if (seeds > 1) {
    fmt::print("\n== seed {}\n", run.seed);
  }
}

nlohmann::json read_summary(const std::string& dir) {
  const std::string path = dir + "/summary.json";
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot read " + path);
  try {
    return nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

// An experiment as planned: its scenario, arms and runs, and whether it keeps a manifest and a
// marker per run (more than one run, or on Slurm).
struct Plan {
  Scenario scenario;
  std::vector<Arm> arms;
  std::vector<PlannedRun> runs;
  std::string out;
  bool bookkept = false;
};

// One run of the plan: its directory emptied first when it is one of several (a rerun must not
// keep a file the new run does not write), its marker written last.
int execute_run(const Plan& plan, const PlannedRun& run, bool quiet, nlohmann::json* summary,
                const ProgressFn& progress, const std::function<void()>& simulated) {
  if (plan.bookkept && run.dir != plan.out) std::filesystem::remove_all(run.dir);
  const int code = run_reporting(run.scenario, run.dir, quiet, summary, progress, simulated);
  if (plan.bookkept) write_run_marker(run, code);
  return code;
}

// Runs `todo` (indices into the plan) in worker processes (--jobs), one progress bar for all.
// Their summaries are read back from the records afterwards, like those of runs done before.
int run_in_workers(const Plan& plan, const std::vector<std::size_t>& todo,
                   const ExperimentOptions& o) {
  std::vector<ParallelTask> tasks;
  for (std::size_t i : todo) {
    const PlannedRun& r = plan.runs[i];
    tasks.emplace_back([&plan, &r](const ProgressFn& progress) {
      return execute_run(plan, r, true, nullptr, progress, {});
    });
  }
  std::vector<SimulationProgress> progress(todo.size());
  for (std::size_t t = 0; t < todo.size(); ++t)
    progress[t].steps_total = plan.runs[todo[t]].scenario.steps;
  ProgressBar bar(!o.quiet && isatty(STDERR_FILENO));
  const auto codes = run_parallel(tasks, o.jobs, [&](std::size_t t, const SimulationProgress& p) {
    progress[t] = p;
    SimulationProgress all;
    for (const auto& q : progress) {
      all.steps_done += q.steps_done;
      all.steps_total += q.steps_total;
      all.simulated_seconds += q.simulated_seconds;
    }
    bar.update(all);
  });
  bar.done();
  int worst = 0;
  for (std::size_t t = 0; t < todo.size(); ++t) {
    const PlannedRun& r = plan.runs[todo[t]];
    if (codes[t] != 0 && codes[t] != 1)
      throw std::runtime_error("the run into " + r.dir + " failed (see above)");
    worst = std::max(worst, codes[t]);
    if (!o.quiet) {
      const auto s = read_summary(r.dir);
      fmt::print("  {:<40} {:>10.1f} samples/s  {:>9.3f} simulated s\n", r.dir,
                 s["throughput_samples_per_s"].get<double>(), s["simulation_end_s"].get<double>());
    }
  }
  return worst;
}

// Runs `todo` in sequence or in worker processes; `summaries` (one per run of the plan) receives
// theirs.
int run_locally(const Plan& plan, const std::vector<std::size_t>& todo, const ExperimentOptions& o,
                std::vector<nlohmann::json>& summaries) {
  if (o.jobs > 1 && todo.size() > 1) {
    const int worst = run_in_workers(plan, todo, o);
    for (std::size_t i : todo)
      summaries[i] = read_summary(plan.runs[i].dir);
    return worst;
  }
  int worst = 0;
  for (std::size_t i : todo) {
    const PlannedRun& r = plan.runs[i];
    if (!o.quiet) print_header(plan.scenario, plan.arms[r.arm], r, plan.scenario.seeds);
    ProgressBar bar(!o.quiet && isatty(STDERR_FILENO));
    worst = std::max(
        worst, execute_run(
                   plan, r, o.quiet, &summaries[i],
                   [&bar](const SimulationProgress& p) { bar.update(p); }, [&bar] { bar.done(); }));
  }
  return worst;
}

// The runs' summaries grouped by arm, for the statistics over seeds.
std::vector<SeededArm> by_arm(const Plan& plan, std::vector<nlohmann::json>& summaries) {
  std::vector<SeededArm> out(plan.arms.size());
  for (std::size_t a = 0; a < plan.arms.size(); ++a) {
    out[a].name = plan.arms[a].label;
    out[a].overrides = plan.arms[a].overrides;
  }
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    out[plan.runs[i].arm].seeds.push_back(plan.runs[i].seed);
    out[plan.runs[i].arm].summaries.push_back(std::move(summaries[i]));
  }
  return out;
}

// The experiment's tables from every run's summary (plan order): the single-seed tables as they
// always were, or the statistics over seeds.
void merge_records(const Plan& plan, std::vector<nlohmann::json> summaries, bool quiet) {
  const Scenario& scenario = plan.scenario;
  const std::string& out = plan.out;
  if (scenario.seeds == 1) {
    if (!scenario.variants.empty()) {
      std::vector<VariantRun> variant_runs;
      for (std::size_t i = 0; i < plan.runs.size(); ++i)
        variant_runs.push_back(
            {plan.arms[i].label, plan.arms[i].overrides, std::move(summaries[i])});
      const nlohmann::json comparison = compare_variants(scenario, variant_runs);
      write_variants(out, comparison);
      if (!quiet)
        fmt::print("{}  records: {}/{{summary.json, variants.csv}}\n", variants_table(comparison),
                   out);
    } else if (scenario.sweep) {
      std::vector<std::pair<std::string, nlohmann::json>> results;
      for (std::size_t i = 0; i < plan.runs.size(); ++i)
        results.emplace_back(plan.arms[i].label, std::move(summaries[i]));
      write_sweep(out, *scenario.sweep, results, quiet);
    }
    return;
  }
  const std::vector<SeededArm> seeded = by_arm(plan, summaries);
  if (!scenario.variants.empty() || scenario.sweep) {
    const std::string kind = scenario.sweep ? "values" : "variants";
    const nlohmann::json comparison = compare_seeded(scenario, kind, seeded);
    if (scenario.sweep) {
      write_seeded_sweep(out, *scenario.sweep, comparison);
    } else {
      write_seeded_variants(out, comparison);
    }
    if (!quiet) {
      fmt::print("{}  records: {}/{{summary.json, {}}}\n", seeded_table(comparison, kind), out,
                 scenario.sweep ? "sweep.csv" : "variants.csv");
    }
    return;
  }
  const nlohmann::json summary = seeded_summary(scenario, seeded.front());
  write_text(out + "/summary.json", summary.dump(2) + "\n");
  if (!quiet) {
    const auto& t = summary["figures"]["throughput_samples_per_s"];
    fmt::print(
        "\n{} at {} seeds: {:.1f} samples/s (95% interval {:.1f} .. {:.1f})\n  records: "
        "{}/summary.json\n",
        scenario.name, scenario.seeds, t["mean"].get<double>(), t["ci95_low"].get<double>(),
        t["ci95_high"].get<double>(), out);
  }
}

// The experiment in `dir` planned again from its manifest, for --collect and --run-task: the same
// scenario file (unchanged), the same overrides, the digests of the build that planned it.
Plan plan_from_manifest(const std::string& dir, const Manifest& m) {
  if (file_digest(m.file) != m.file_digest) {
    throw ExperimentError(fmt::format(
        "kfsim: {} changed since the experiment in {} was planned: run the experiment again "
        "(kfsim FILE --out {}) to run what the change affects",
        m.file, dir, dir));
  }
  Plan plan;
  plan.scenario = load_scenario(m.file, m.overrides);
  plan.arms = expand_arms(plan.scenario, m.file, m.overrides);
  plan.out = dir;
  plan.runs = plan_runs(plan.arms, plan.scenario.seeds, dir, m.overrides, m.build, m.file_digest);
  plan.bookkept = true;
  bool same = plan.runs.size() == m.runs.size();
  for (std::size_t i = 0; same && i < plan.runs.size(); ++i)
    same = plan.runs[i].digest == m.runs[i].digest;
  if (!same) {
    throw ExperimentError(
        fmt::format("kfsim: {}/experiment.json does not match what {} plans today", dir, m.file));
  }
  return plan;
}

// Where Slurm put the output of the last task that ran run `index`, if any.
std::string slurm_log_of(const Manifest& m, const std::string& dir, std::size_t index) {
  for (auto s = m.slurm.rbegin(); s != m.slurm.rend(); ++s) {
    if (std::find(s->tasks.begin(), s->tasks.end(), index) == s->tasks.end()) continue;
    const std::string log = task_log(dir, s->job, index);
    return std::filesystem::exists(log) ? log : "";
  }
  return "";
}

// The summaries of every run when all are complete (and the worst exit code they recorded);
// otherwise each missing run named on stderr and nothing returned.
std::optional<std::pair<int, std::vector<nlohmann::json>>> finished_records(const Plan& plan,
                                                                            const Manifest& m) {
  std::vector<std::size_t> missing;
  int worst = 0;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const auto code = completed_run(plan.runs[i]);
    if (!code) missing.push_back(i);
    worst = std::max(worst, code.value_or(0));
  }
  if (!missing.empty()) {
    fmt::print(stderr, "kfsim: {} of {} runs of {} are not complete:\n", missing.size(),
               plan.runs.size(), plan.out);
    for (std::size_t i : missing) {
      const PlannedRun& r = plan.runs[i];
      const std::string arm = plan.arms[r.arm].label;
      const std::string log = slurm_log_of(m, plan.out, i);
      fmt::print(stderr, "  run {}: {}{}seed {}: {}{}\n", i, arm, arm.empty() ? "" : ", ", r.seed,
                 run_state(r), log.empty() ? "" : fmt::format(" (Slurm log: {})", log));
    }
    fmt::print(stderr,
               "  kfsim {} --out {} [--slurm] runs only these (a changed scenario: all of them)\n",
               m.file, plan.out);
    return std::nullopt;
  }
  std::vector<nlohmann::json> summaries;
  for (const auto& r : plan.runs)
    summaries.push_back(read_summary(r.dir));
  return std::make_pair(worst, std::move(summaries));
}

std::string self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot find this kfsim's path: " + ec.message());
  return p.string();
}

// --slurm: submits the runs still to do as one job array, then waits for the job to leave the
// queue and collects, or (--no-wait) returns at once.
int run_on_slurm(const Plan& plan, Manifest& manifest, const std::vector<std::size_t>& todo,
                 const ExperimentOptions& o) {
  if (!todo.empty()) {
    const std::string job =
        submit_array(self_executable(), plan.out, plan.scenario.name, todo, o.sbatch_args);
    manifest.slurm.push_back({job, todo});
    write_manifest(plan.out, manifest);
    if (!o.quiet) {
      fmt::print("submitted Slurm job {}: {} run{} (array {}); logs: {}/slurm/{}_*.out\n", job,
                 todo.size(), todo.size() == 1 ? "" : "s", array_ranges(todo), plan.out, job);
    }
    if (!o.slurm_wait) {
      if (!o.quiet) fmt::print("collect it once it is done: kfsim --collect {}\n", plan.out);
      return 0;
    }
    ProgressBar bar(!o.quiet && isatty(STDERR_FILENO));
    std::size_t reported = 0;
    int failures = 0;
    for (;;) {
      bool active = true;
      try {
        active = slurm_job_active(job);
        failures = 0;
      } catch (const std::runtime_error& e) {
        // slurmctld restarting or busy: try again for a minute before giving up.
        if (++failures >= 30) {
          throw std::runtime_error(fmt::format(
              "{}; the job may still be running: collect it later with kfsim --collect {}",
              e.what(), plan.out));
        }
      }
      SimulationProgress p;
      std::size_t done = 0;
      for (std::size_t i : todo) {
        p.steps_total += plan.runs[i].scenario.steps;
        if (completed_run(plan.runs[i])) {
          ++done;
          p.steps_done += plan.runs[i].scenario.steps;
        }
      }
      bar.update(p);
      if (!o.quiet && !isatty(STDERR_FILENO) && done != reported) {
        fmt::print("  {} of {} runs done\n", done, todo.size());
        reported = done;
      }
      if (!active) break;
      ::sleep(2);
    }
    bar.done();
  }
  const auto records = finished_records(plan, manifest);
  if (!records) return 1;
  merge_records(plan, records->second, o.quiet);
  return records->first;
}

}  // namespace

namespace {

// workload.torch: each distinct task module of the plan is checked (loaded, built, a small batch
// run) before anything is written into OUT, so a broken task exits 2 with nothing half-written.
// When the runs will be forked (--jobs, Slurm) the check runs in a child of its own: this process
// must not start an interpreter before it forks.
void check_torch_tasks(const std::vector<PlannedRun>& runs, bool will_fork) {
  std::set<std::tuple<std::string, std::size_t, std::size_t>> seen;
  for (const PlannedRun& r : runs) {
    const auto& numeric = r.scenario.workload.numeric;
    if (!numeric || numeric->model != "torch") continue;
    const TorchTaskSpec spec = torch_spec(r.scenario);
    if (!seen.emplace(spec.module, spec.train, spec.test).second) continue;
    if (will_fork) {
      check_torch_task_in_child(spec);
    } else {
      check_torch_task(spec);
    }
  }
}

}  // namespace

int run_experiment(const Scenario& scenario, const ExperimentOptions& o) {
  if (!o.compare.empty()) return run_compare(scenario, o);
  if (o.slurm) {
    for (const char* tool : {"sbatch", "squeue"}) {
      if (!on_path(tool)) {
        throw ExperimentError(fmt::format(
            "kfsim: --slurm needs Slurm's {} on PATH (this machine has none: run kfsim on a "
            "Slurm login node, or without --slurm)",
            tool));
      }
    }
  }
  Plan plan;
  plan.scenario = scenario;
  plan.arms = expand_arms(scenario, o.file, o.overrides);
  plan.out = o.slurm ? std::filesystem::absolute(o.out).lexically_normal().string() : o.out;
  const std::size_t count = plan.arms.size() * static_cast<std::size_t>(scenario.seeds);
  plan.bookkept = count > 1 || o.slurm;
  const std::string build = plan.bookkept ? build_digest() : "";
  const std::string file = plan.bookkept ? file_digest(o.file) : "";
  plan.runs = plan_runs(plan.arms, scenario.seeds, plan.out, o.overrides, build, file);
  check_torch_tasks(plan.runs, o.slurm || (o.jobs > 1 && plan.runs.size() > 1));

  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    if (!plan.bookkept || o.fresh || !completed_run(plan.runs[i])) todo.push_back(i);
  }
  Manifest manifest;
  if (plan.bookkept) {
    manifest = make_manifest(o.file, file, o.overrides, build, plan.arms, plan.runs, plan.out);
    if (has_manifest(plan.out)) {
      // Earlier Slurm submissions of this same plan still point at the logs of its runs.
      try {
        const Manifest before = read_manifest(plan.out);
        bool same = before.runs.size() == manifest.runs.size();
        for (std::size_t i = 0; same && i < before.runs.size(); ++i)
          same = before.runs[i].digest == manifest.runs[i].digest;
        if (same) manifest.slurm = before.slurm;
      } catch (const ExperimentError&) {
        // An unreadable manifest is replaced; the markers alone decide what is complete.
      }
    }
    write_manifest(plan.out, manifest);
    if (!o.quiet && todo.size() < plan.runs.size()) {
      fmt::print("{}: {} of {} runs complete from before; running {}\n", plan.out,
                 plan.runs.size() - todo.size(), plan.runs.size(), todo.size());
    }
  }
  if (o.slurm) return run_on_slurm(plan, manifest, todo, o);

  std::vector<nlohmann::json> summaries(plan.runs.size());
  int worst = run_locally(plan, todo, o, summaries);
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    if (!summaries[i].is_null()) continue;
    summaries[i] = read_summary(plan.runs[i].dir);  // complete from before
    worst = std::max(worst, completed_run(plan.runs[i]).value_or(0));
  }
  merge_records(plan, std::move(summaries), o.quiet);
  return worst;
}

int collect_experiment(const std::string& dir, bool quiet) {
  const Manifest m = read_manifest(dir);
  const Plan plan = plan_from_manifest(dir, m);
  const auto records = finished_records(plan, m);
  if (!records) return 1;
  merge_records(plan, records->second, quiet);
  if (!quiet) fmt::print("collected {} runs into {}\n", plan.runs.size(), dir);
  return records->first;
}

int run_experiment_task(const std::string& dir, std::size_t index, bool quiet) {
  const Manifest m = read_manifest(dir);
  const Plan plan = plan_from_manifest(dir, m);
  if (index >= plan.runs.size()) {
    throw ExperimentError(fmt::format("kfsim --run-task: {} has runs 0..{}, not {}", dir,
                                      plan.runs.size() - 1, index));
  }
  if (build_digest() != m.build) {
    throw ExperimentError(fmt::format(
        "kfsim --run-task: this kfsim ({}) is not the build that planned {} ({}): its records "
        "would not be comparable; run the experiment again with this build",
        self_executable(), dir, m.build));
  }
  const PlannedRun& run = plan.runs[index];
  if (!quiet) print_header(plan.scenario, plan.arms[run.arm], run, plan.scenario.seeds);
  return execute_run(plan, run, quiet, nullptr, {}, {});
}

}  // namespace kf
