// defines: SweepOptions, add_sweep_command(), run_sweep(), print_sweep_summary(): `fp8wb
// sweep`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "fp8wb/core/store/run_store.h"

namespace fp8wb::cli {

struct SweepOptions {
  std::string config_file;
  std::vector<std::string> overrides;
  std::vector<std::string> grid;  // key=v1,v2,...
  int seeds = 1;
  int parallel = 0;
  std::string name = "sweep";
  std::string db;
  std::optional<int64_t> resume;  // the sweep's id, where given
  bool json = false;
  bool quiet = false;
  // On a cluster: submit as a Slurm job array (slurm_sweep.h), or collect its trials.
  bool slurm = false;
  std::string slurm_dir;
  std::string partition;
  int gpus_per_trial = -1;
  int cpus_per_trial = 0;
  std::string time;
  std::string collect;
};

CLI::App* add_sweep_command(CLI::App& app, SweepOptions& opt);
int run_sweep(const SweepOptions& opt, std::ostream& out, std::ostream& err);
// A stored sweep's grid points and figures as a table, its best setting and its status.
void print_sweep_summary(const RunStore& store, int64_t sweep_id, std::ostream& out);

}  // namespace fp8wb::cli
