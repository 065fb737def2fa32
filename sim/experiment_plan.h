// The plan of an experiment (every arm at every seed, in the order the records are merged) and
// its bookkeeping on disk, which is what makes an experiment resumable and runnable elsewhere:
//
//   OUT/experiment.json  the manifest: the scenario file (absolute path and digest), the
//                        overrides, the kfsim build that planned it, and every run's directory,
//                        arm, seed and digest; `kfsim --run-task` and `--collect` read it back.
//   RUN_DIR/run.json     written last by a run that finished: its digest and exit code. A run
//                        counts as complete only when this marker's digest is the planned one.
//
// A run's digest covers the kfsim build (a digest of the executable), the scenario file's bytes,
// the overrides, the arm, the seed and the contents of a model profile file the arm reads
// (workload.profile): records of a changed scenario, profile, override or build never pass for
// complete ones.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/experiment.h"

namespace kf {

// A directory that holds no experiment, a manifest that does not parse, a changed scenario file:
// bad input, kfsim exits 2.
class ExperimentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One run of an experiment: arm `arm` at `seed`, into `dir`.
struct PlannedRun {
  std::size_t arm = 0;
  std::uint64_t seed = 0;
  std::string dir;
  Scenario scenario;
  std::string digest;  // see the file comment
};

// Every arm at `seeds` seeds, arm by arm and seed by seed: the order the records are merged in.
// Run k of an arm runs at the arm's seed + k; with more than one seed each run goes into
// ARM_DIR/seed=S/. Digests are computed for `build` and the scenario file `file_digest`.
std::vector<PlannedRun> plan_runs(const std::vector<Arm>& arms, int seeds, const std::string& out,
                                  const std::vector<std::string>& overrides,
                                  const std::string& build, const std::string& file_digest);

// A digest of the running kfsim executable (/proc/self/exe), as 16 hex digits.
std::string build_digest();

// A digest of a file's bytes, as 16 hex digits. Throws ExperimentError when it cannot be read.
std::string file_digest(const std::string& path);

// One Slurm submission: the job and the runs (indices into the plan) its array tasks run.
struct SlurmSubmission {
  std::string job;
  std::vector<std::size_t> tasks;
};

struct Manifest {
  std::string file;  // absolute
  std::string file_digest;
  std::vector<std::string> overrides;
  std::string build;
  struct Run {
    std::string dir;  // relative to the experiment's directory; "" for the directory itself
    std::string arm;
    std::uint64_t seed = 0;
    std::string digest;
  };
  std::vector<Run> runs;
  std::vector<SlurmSubmission> slurm;
};

Manifest make_manifest(const std::string& file, const std::string& file_digest,
                       const std::vector<std::string>& overrides, const std::string& build,
                       const std::vector<Arm>& arms, const std::vector<PlannedRun>& runs,
                       const std::string& out);

// OUT/experiment.json. write_manifest throws std::runtime_error when it cannot write;
// read_manifest throws ExperimentError naming the directory when there is none or it is not one.
void write_manifest(const std::string& out, const Manifest& manifest);
Manifest read_manifest(const std::string& out);
bool has_manifest(const std::string& out);

// RUN_DIR/run.json, written atomically (a rename) after every other record.
void write_run_marker(const PlannedRun& run, int exit_code);

// The exit code the run recorded (0 or 1) when its records are complete for `run.digest`; empty
// when there is no marker, it does not parse, or it is for another digest.
std::optional<int> completed_run(const PlannedRun& run);

// What a marker left in `run.dir` says, for messages: "no records", "incomplete records",
// "records of a different scenario or kfsim build", or "complete".
std::string run_state(const PlannedRun& run);

}  // namespace kf
