// defines: ProgramResult, run_program(), kSweepManifest, kSweepManifestFormat,
// CollectedTrial, SweepCollection, collect_sweep_folder(): the trials of a sweep run on a
// cluster (`fp8wb sweep --slurm`), merged from their folder into the sweep's database.
// `fp8wb sweep --collect` and the Sweeps tab's "Collect from folder…" both call it.
//
// The folder holds sweep.json (the sweep's identity, the job, the trials and their run
// identities), trials/<i>.sqlite (a trial's run, written by its task) and logs/<i>.log.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"

namespace fp8wb {

struct ProgramResult {
  bool started = false;  // false: the program was not found or could not run
  int status = -1;       // its exit status
  std::string out, err;
};
// Runs a program (looked up on PATH) with these arguments, no shell, and collects its
// output.
ProgramResult run_program(const std::vector<std::string>& argv);

inline constexpr const char* kSweepManifest = "sweep.json";
inline constexpr const char* kSweepManifestFormat = "fp8wb Slurm sweep";

struct CollectedTrial {
  std::string key;      // the trial's grid point and seed
  std::string state;    // finished, failed, ..., "collected before", running, pending, error
  std::string message;  // why (a failure's reason, an error, the steps done)
  int64_t run = 0;      // its run in the database (0: none yet)
};

struct SweepCollection {
  int64_t sweep_id = 0;
  std::string sweep_name, job;
  SweepStatus status = SweepStatus::Running;  // the sweep's, afterwards: finished or running
  std::string db;                             // the database collected into
  bool slurm_asked = false;
  std::string slurm_source;  // "sacct" or "scontrol"
  int added = 0;             // trials recorded now
  int waiting = 0;           // trials still to come
  std::vector<CollectedTrial> trials;
  std::vector<std::string> problems;  // trials that could not be collected, by name
};

// Thrown by collect_sweep_folder() where the database collected into does not hold the
// folder's sweep; its parts let a caller say what to do in its own terms (the CLI's
// message names --db, the workbench's its File menu).
class SweepNotInDatabase : public std::runtime_error {
 public:
  SweepNotInDatabase(std::string folder, std::string sweep_name, std::string submitted_from,
                     std::string database);
  std::string folder;          // the sweep's folder
  std::string sweep_name;      // its name
  std::string submitted_from;  // the database it was submitted from (sweep.json's)
  std::string database;        // the one collected into, which lacks it
};

// Merges a folder's finished trials into its sweep in the database at `db` (empty: the
// one the sweep was submitted from). Trials already collected are left as they are, so
// it can be run while the array runs and again at any time. A trial that failed on the
// cluster is recorded as failed with Slurm's reason (sacct, else scontrol, and the task's
// log). A trial database that is damaged or belongs to another sweep is listed in
// `problems` and not imported; every other trial is still collected. `progress(done,
// total)` is called after each trial (on the calling thread). Throws std::runtime_error
// (or StoreError) naming the problem for a folder that is not a sweep's, and
// SweepNotInDatabase for a database that does not hold its sweep.
SweepCollection collect_sweep_folder(const std::string& dir, const std::string& db,
                                     const std::function<void(size_t, size_t)>& progress = {});

}  // namespace fp8wb
