// defines: RunsOptions, add_runs_command(), run_runs(): `fp8wb runs
// list|show|export|delete|import`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <ostream>
#include <string>

namespace fp8wb::cli {

struct RunsOptions {
  std::string action;  // list, show, export, delete, import
  std::string db;
  std::string target;  // the run's id (show, export, delete) or the file to import
  int64_t id = 0;      // the run (from target)
  std::string format = "csv";
  std::string out_file;
  bool json = false;
  bool yes = false;
};

CLI::App* add_runs_command(CLI::App& app, RunsOptions& opt);
int run_runs(const RunsOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace fp8wb::cli
