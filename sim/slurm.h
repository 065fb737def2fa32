// kfsim --slurm: the runs of an experiment as one Slurm job array, one run per array task. Slurm
// schedules and kfsim runs: each task is `kfsim --run-task OUT INDEX` (the experiment's manifest,
// sim/experiment_plan.h, says what run INDEX is), and the caller collects the records once the
// job is gone. Only Slurm's own commands are used (sbatch, squeue), found on PATH, with whatever
// cluster SLURM_CONF and the user's Slurm configuration name.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

namespace kf {

// The indices as Slurm's --array list: "0-4,7,9-10".
std::string array_ranges(const std::vector<std::size_t>& indices);

// Whether `program` is an executable file in a directory of PATH.
bool on_path(const std::string& program);

// Writes OUT/slurm/job.sh (runs `kfsim_exe --run-task OUT $SLURM_ARRAY_TASK_ID`) and submits it
// with `sbatch --parsable --job-name NAME --array LIST --output OUT/slurm/%A_%a.out [sbatch_args]`:
// the job's id. `out` must be absolute. Throws std::runtime_error with sbatch's own message when
// it refuses.
std::string submit_array(const std::string& kfsim_exe, const std::string& out,
                         const std::string& name, const std::vector<std::size_t>& tasks,
                         const std::vector<std::string>& sbatch_args);

// Whether squeue still lists any task of `job` (pending or running). Throws std::runtime_error
// when squeue fails for another reason than a job Slurm no longer knows.
bool slurm_job_active(const std::string& job);

// Where array task `task` of `job` wrote its output.
std::string task_log(const std::string& out, const std::string& job, std::size_t task);

}  // namespace kf
