// defines: SlurmOptions, submit_slurm_sweep(), collect_slurm_sweep(): a
// sweep run on a cluster as one Slurm job array, each task an `fp8wb train` of one trial
// into its own database under a shared folder, and the trials' collection into the sweep.
//
// The folder (`--slurm-dir`) holds sweep.json (the sweep's identity, the job, the trials
// and their run identities), job.sh (what each task runs), trials/<i>.json (a trial's
// config), trials/<i>.uuid (its run's identity), trials/<i>.sqlite (its run, written by
// the task) and logs/<i>.log (the task's output).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"
#include "fp8wb/core/sweep/sweep.h"
#include "fp8wb/core/sweep/sweep_collect.h"

namespace fp8wb::cli {

struct SlurmOptions {
  std::string dir;          // the shared folder (default: ./fp8wb-sweep-<id> where it runs)
  std::string partition;    // sbatch --partition (default: the cluster's)
  int gpus_per_trial = -1;  // sbatch --gres=gpu:N (-1: 1 for a CUDA device, else none)
  int cpus_per_trial = 0;   // sbatch --cpus-per-task (0: the cluster's default)
  std::string time;         // sbatch --time (default: the partition's limit)
  std::string program;      // the fp8wb each task runs (default: this one)
};

// Writes the folder, submits the array with sbatch and records the sweep in the run
// database at `db`, which is created (where it is not there yet) only once sbatch has
// taken the job: a refused job leaves nothing behind, neither the folder's files nor a
// database. Throws std::runtime_error naming the problem (sbatch missing or refusing the
// job, a folder that already holds a sweep, a database that cannot be opened or made).
int submit_slurm_sweep(const SweepSpec& spec, const std::string& db, const SlurmOptions& opt,
                       bool json, std::ostream& out, std::ostream& err);

// Prints collect_sweep_folder()'s result (sweep_collect.h): merges a folder's finished
// trials into its sweep in the database at `db` (empty: the
// one the sweep was submitted from). Trials already collected are left as they are, so
// it can be run while the array runs and again at any time. A trial that failed on the
// cluster is recorded as failed with Slurm's reason (sacct, else scontrol, and the task's
// log). A trial database that is damaged or belongs to another sweep is reported by name
// and not imported (exit status 1); every other trial is still collected.
int collect_slurm_sweep(const std::string& dir, const std::string& db, bool json, std::ostream& out,
                        std::ostream& err);

// Running a program and its result: in the core, where the collection needs them too.
using fp8wb::ProgramResult;
using fp8wb::run_program;

}  // namespace fp8wb::cli
